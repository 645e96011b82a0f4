"""``teamctl demo``: watch a team refactor a small repository in parallel worktrees, no API key.

Runs the ``parallel-refactor`` scenario (``actors.scenarios.demo``) with the live view: on a terminal one
panel redrawn in place on every team event; to a pipe or file one line per change, appended
(``actors.live.changes``). Then prints what happened and where to look. ``--json`` prints only the report, as JSON,
for programs and tests. Exit code 0 when the team finished and every expectation held, else 1.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from actors.cli.common import console, echo_json, json_option

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from actors.scenarios.demo import DemoReport

INTRO = (
    "teamctl demo: a lead and three teammates rename calc_total to order_total across a small "
    "shop package. The lead makes one task per module, each bound to its own git worktree; the "
    "teammates work at the same time; the lead merges the branches back. Scripted model, no API "
    "key."
)


@click.command("demo")
@click.option("--keep", is_flag=True, help="Keep the demo repository and print its path.")
@click.option(
    "--latency-ms",
    type=click.IntRange(0, 10_000),
    default=0,
    show_default=True,
    help="Scripted model latency per call (e.g. 300 makes the parallel work easy to follow).",
)
@click.option("--via-api", is_flag=True, help="Go through the local fake Messages API and SDK.")
@click.option("--no-live", is_flag=True, help="No live view: only the report at the end.")
@json_option
def demo(keep: bool, latency_ms: int, via_api: bool, no_live: bool, as_json: bool) -> None:
    """See a whole team at work in seconds (no API key needed)."""
    from actors.scenarios.demo import run_demo

    if as_json:
        report = run_demo(keep=keep, latency_ms=latency_ms, via_api=via_api)
        echo_json(report.as_json())
        sys.exit(0 if report.ok else 1)
    con = console()
    con.print(INTRO, end="\n\n")
    if no_live:
        report = run_demo(keep=keep, latency_ms=latency_ms, via_api=via_api)
    else:
        report = _with_live_view(con, keep=keep, latency_ms=latency_ms, via_api=via_api)
    con.print(render_report(report))
    sys.exit(0 if report.ok else 1)


def _with_live_view(con: Console, **options: Any) -> DemoReport:
    from rich.live import Live

    from actors.live.view import ChangeLog, render
    from actors.scenarios.demo import run_demo

    if not con.is_terminal:
        # A pipe or a file gets one line per change, appended; never a redrawn panel.
        return run_demo(show=ChangeLog(lambda line: con.out(line, highlight=False)), **options)
    with Live(console=con, auto_refresh=False, transient=False) as live:
        return run_demo(show=lambda snap: live.update(render(snap), refresh=True), **options)


def render_report(report: DemoReport) -> RenderableType:
    """What happened, and where to look."""
    from rich.console import Group
    from rich.text import Text

    from actors.cli.common import table
    from teamctl_base.text import one_line, safe

    parts: list[RenderableType] = [Text("What happened", style="bold underline")]
    tasks = table("Tasks", ["id", "subject", "status", "done by", "worktree", "summary"])
    for t in report.tasks:
        tasks.add_row(
            t["id"], t["subject"], t["status"], t["owner"] or "-", t["worktree"] or "-",
            t["summary"] or "",
        )  # fmt: skip
    parts += [tasks, Text()]
    agents = table("Who did what", ["agent", "role", "completed", "tool calls", "tokens"])
    for a in report.agents:
        calls = ", ".join(f"{name} ({n})" for name, n in a.tools.items()) or "-"
        agents.add_row(a.name, a.role, ", ".join(a.tasks) or "-", calls, f"{a.tokens:,}")
    parts += [agents, Text()]
    merges = table("Branches merged", ["branch", "task", "into", "commit"])
    for m in report.merges:
        merges.add_row(m["branch"], m["task_id"] or "-", m["into"] or "-", (m["commit"] or "")[:12])
    parts += [merges, Text()]
    parts.append(Text("Files changed on the base branch", style="bold"))
    parts.append(Text(safe(report.diffstat, multiline=True) or "(none)"))
    parts.append(Text())
    failed = [c for c in report.checks if not c.ok]
    how = " through the fake Messages API" if report.via_api else ""
    if report.ok:
        line = f"✓ {len(report.checks)} expectations hold; done in {report.seconds:.1f}s{how}."
        parts.append(Text(line, style="green"))
    else:
        parts.append(Text(f"✗ {len(failed)} of {len(report.checks)} expectations failed:", "red"))
        parts += [Text(f"  {safe(c.name)}: {one_line(c.detail, None)}") for c in failed]
        if not report.idle:
            parts.append(Text("  the team did not finish in time", style="red"))
    parts += [Text(), Text("Where to look", style="bold"), Text(where_to_look(report))]
    return Group(*parts)


def where_to_look(report: DemoReport) -> str:
    """How to look around afterwards."""
    if report.repo is None:
        lines = [
            "The demo repository was cleaned up. Keep it with `teamctl demo --keep`, then inside",
            "it run `teamctl watch` (the live view) and `teamctl events` (the journal).",
        ]
    else:
        lines = [
            f"The demo repository is kept at {report.repo}",
            f"  cd {report.repo}",
            "  teamctl watch            # the live view: members, tasks, worktrees",
            "  teamctl events           # the journal, event by event",
            "  teamctl worktree list    # the worktrees and their branches",
            "  git log --graph --oneline --all",
        ]
    lines.append(
        "With a real model: export ANTHROPIC_API_KEY, then `teamctl init` and `teamctl run` in "
        "your own repository."
    )
    return "\n".join(lines)


COMMANDS = (demo,)
