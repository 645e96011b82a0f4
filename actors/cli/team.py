"""Team-wide commands: ``init`` and ``status``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from actors.cli.common import echo_json, json_option, show, table, team_session

if TYPE_CHECKING:
    from actors.board.state import TeamState
    from actors.factory import Team


@click.command()
@click.option("--name", default=None, help="Team name (default: the repository folder name).")
def init(name: str | None) -> None:
    """Create `.team/` in this repository (safe to run again)."""
    from actors.factory import init_team

    report = init_team(name=name)
    if report.created:
        click.echo(f"initialised team {report.name!r} in {report.repo.team_dir}")
        for line in report.created:
            click.echo(f"  created {line}")
    else:
        click.echo(f"team {report.name!r} already initialised in {report.repo.team_dir}")


def _settings_problem(path: Path) -> str | None:
    from actors.settings import SettingsError, load_settings

    try:
        load_settings(path)
    except SettingsError as exc:
        return str(exc)
    return None


def _pending(team: Team, state: TeamState) -> list[dict[str, Any]]:
    """Requests waiting for an answer, oldest first: permission asks (``permission.requested``
    with no decision) and submitted plans. ``waiting_s``: since when they wait."""
    import time

    from actors.board.protocols import open_permission_events

    root = str(team.repo.root) + "/"
    asks: list[dict[str, Any]] = []
    for event in open_permission_events(team.journal):
        data = event.data.get("input") or {}
        target = data.get("target") or ", ".join(data.get("paths") or ())
        if isinstance(target, str) and target.startswith(root):
            target = target[len(root) :]
        asks.append(
            {
                "request_id": str(event.data.get("request_id", "")),
                "kind": "permission",
                "who": event.data.get("agent"),
                "what": f"{event.data.get('tool')} {target}".strip(),
                "since": event.ts,
            }
        )
    plans: list[dict[str, Any]] = [
        {
            "request_id": r.request_id,
            "kind": "plan",
            "who": r.teammate,
            "what": f"plan for {r.task_id}",
            "since": r.requested_at,
        }
        for r in state.plan_requests.values()
        if r.status == "submitted"
    ]
    now = time.time()
    rows = sorted([*asks, *plans], key=lambda row: row["since"])
    for row in rows:
        row["waiting_s"] = round(max(0.0, now - row.pop("since")), 1)
    return rows


def _usage(state: TeamState, name: str) -> dict[str, Any]:
    """A member's model usage for ``status`` (``teamctl cost`` has the details)."""
    from actors.board.state import NO_USAGE

    used = state.agent_usage.get(name, NO_USAGE)
    return {"tokens": used.tokens, "cost_usd": used.cost_usd}


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


@click.command()
@json_option
def status(as_json: bool) -> None:
    """Tasks by state, members (with their tokens and cost), requests waiting for an answer
    and inbox counts."""
    with team_session(read_only=True) as team:
        state = team.state()
        counts: dict[str, int] = {}
        for task in state.tasks.values():
            counts[task.status] = counts.get(task.status, 0) + 1
        ready = len(state.ready())
        members = [
            {
                "name": m.name,
                "kind": m.kind,
                "role": m.role,
                "status": m.status,
                **_usage(state, m.name),
            }
            for m in state.members.values()
        ]
        inboxes = team.inbox_counts()
        pending = _pending(team, state)
        settings_problem = _settings_problem(team.repo.settings_path)
    if settings_problem:
        click.echo(f"warning: {settings_problem}", err=True)
    if as_json:
        echo_json(
            {
                "team": state.name,
                "seq": state.seq,
                "tasks": {**counts, "ready": ready},
                "members": members,
                "usage": state.usage.as_json(),
                "pending": pending,
                "inboxes": inboxes,
            }
        )
        return
    click.echo(f"team {state.name!r} — journal at seq {state.seq}")
    order = ("pending", "in_progress", "completed", "deleted")
    summary = ", ".join(f"{s.replace('_', ' ')} {counts.get(s, 0)}" for s in order)
    click.echo(f"tasks: {summary} (ready {ready})")
    used = state.usage
    click.echo(
        f"model usage: {used.calls} calls, {used.tokens:,} tokens, ${used.cost_usd:.4f} "
        "(`teamctl cost` by agent and task)"
    )
    if members:
        grid = table("members", ("name", "kind", "role", "status", "tokens", "cost"))
        for m in members:
            tokens, cost = f"{m['tokens']:,}", f"${m['cost_usd']:.4f}"
            grid.add_row(m["name"], m["kind"], m["role"] or "-", m["status"], tokens, cost)
        show(grid)
    else:
        click.echo("members: none yet")
    if pending:
        grid = table("waiting for an answer", ("request", "who", "what", "waiting"))
        for row in pending:
            grid.add_row(row["request_id"], str(row["who"]), row["what"], _age(row["waiting_s"]))
        show(grid)
        click.echo("answer with `teamctl approve ID` or `teamctl reject ID --feedback TEXT`")
    grid = table("inboxes", ("agent", "unread"))
    for agent, unread in inboxes.items():
        grid.add_row(agent, str(unread))
    show(grid)


COMMANDS = (init, status)  # `teamctl settings` is in actors/cli/settings_cmd.py
