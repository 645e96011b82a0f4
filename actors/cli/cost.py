"""``teamctl cost``: the team's model usage and its cost, by agent and by task.

Read from the journal's ``usage.recorded`` events (one per model call, folded into
``TeamState.usage``, ``agent_usage`` and ``task_usage``; docs/ARCHITECTURE.md, "Usage and
caps"), so it covers every run and resume of the team and survives crashes. The totals are the
sums of what the model client reported, never estimates; a call on a model whose price is
unknown counts its tokens but no cost (``unpriced_calls``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from actors.cli.common import echo_json, json_option, show, team_session, text_table

if TYPE_CHECKING:
    from actors.board.state import TeamState

_COLUMNS = ("calls", "input", "output", "cache read", "cache write", "cache hit", "cost")


def cost_report(state: TeamState) -> dict[str, Any]:
    """The ``--json`` document: ``agents`` (each agent member, then any other caller), ``tasks``
    (those with usage, in id order), ``no_task`` (calls made holding no task) and ``total``."""
    from actors.board.state import NO_USAGE

    names = [m.name for m in state.members.values() if m.kind == "agent"]
    names += [name for name in state.agent_usage if name not in names]
    agents = [{"name": name, **state.agent_usage.get(name, NO_USAGE).as_json()} for name in names]
    tasks = [
        {"id": tid, "subject": task.subject, **state.task_usage[tid].as_json()}
        for tid, task in state.tasks.items()
        if tid in state.task_usage
    ]
    return {
        "agents": agents,
        "tasks": tasks,
        "no_task": state.untasked_usage.as_json(),
        "total": state.usage.as_json(),
    }


def _cost(row: dict[str, Any]) -> str:
    text = f"${row['cost_usd']:.4f}"
    return text + f" (+{row['unpriced_calls']} unpriced)" if row["unpriced_calls"] else text


def _cells(row: dict[str, Any]) -> list[str]:
    return [
        str(row["calls"]),
        f"{row['input_tokens']:,}",
        f"{row['output_tokens']:,}",
        f"{row['cache_read_input_tokens']:,}",
        f"{row['cache_creation_input_tokens']:,}",
        f"{row['cache_hit_rate']:.0%}",
        _cost(row),
    ]


@click.command()
@json_option
def cost(as_json: bool) -> None:
    """Model usage and cost by agent and by task (tokens in, out, cache read and write, cache
    hit rate, USD), over every run of the team."""
    with team_session(read_only=True) as team:
        report = cost_report(team.state())
    if as_json:
        echo_json(report)
        return
    grid = text_table("by agent", ("name", *_COLUMNS))
    for row in report["agents"]:
        grid.add_row(row["name"], *_cells(row))
    grid.add_row("total", *_cells(report["total"]))
    show(grid)
    grid = text_table("by task", ("id", "subject", *_COLUMNS))
    for row in report["tasks"]:
        grid.add_row(row["id"], row["subject"], *_cells(row))
    grid.add_row("-", "(no task: the lead, between tasks)", *_cells(report["no_task"]))
    show(grid)


COMMANDS = (cost,)
