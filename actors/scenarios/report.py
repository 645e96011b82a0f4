"""The scenario report: a rich table for people, one JSON document for programs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actors.scenarios.model import Scenario
from actors.scenarios.run import ScenarioResult

__all__ = ["render_list", "render_result"]


def render_result(result: ScenarioResult) -> Any:
    """A renderable: one line per check (✓/✗), then the verdict."""
    from rich.console import Group
    from rich.text import Text

    from actors.live.text import SafeTable
    from teamctl_base.text import safe

    mode = "through the fake Messages API" if result.via_api else "in process"
    head = Text.assemble(("scenario ", "bold"), (safe(result.name), "bold cyan"), f" ({mode})")
    if result.skipped is not None:
        return Group(head, Text(f"skipped: {safe(result.skipped)}", style="yellow"))
    # Check details quote what agents wrote: plain escaped text, whole (``SafeTable``).
    grid = SafeTable(show_header=False, show_edge=False, box=None, pad_edge=False, max_cell=None)
    grid.add_column("", width=1)
    grid.add_column("check", overflow="fold")
    grid.add_column("detail", overflow="fold", style="dim")
    for check in result.checks:
        mark = Text("✓", style="green") if check.ok else Text("✗", style="bold red")
        grid.add_row(mark, check.name, check.detail)
    failed = len(result.failures)
    total = len(result.checks)
    if failed:
        verdict = Text(f"FAILED: {failed} of {total} checks failed", style="bold red")
    else:
        verdict = Text(f"PASSED: {total} checks in {result.seconds:.1f}s", style="bold green")
    parts: list[Any] = [head, grid, verdict]
    if result.repo is not None:
        parts.append(Text(f"repository kept at {safe(result.repo)}"))
    return Group(*parts)


def render_list(scenarios: Sequence[Scenario], missing: dict[str, str]) -> Any:
    """The table of ``teamctl scenario list``; ``missing`` maps names to why they are skipped."""
    from actors.live.text import SafeTable

    grid = SafeTable(
        title="Scenarios", title_justify="left", show_edge=False, pad_edge=False, max_cell=None
    )
    grid.add_column("name", style="cyan", no_wrap=True)
    grid.add_column("description", overflow="fold")
    grid.add_column("runs", overflow="fold")
    for s in scenarios:
        grid.add_row(s.name, s.description, missing.get(s.name, "yes"))
    return grid
