"""``teamctl jobs`` and ``teamctl cron list|add|cancel``: journal views and commands.

These work with or without a running team: they read and append the journal directly; a running
Scheduler picks up jobs added here on its next wake. Heavy imports (croniter, pykka) happen inside
the commands.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import click

from actors.cli.common import echo_json, json_option, show, table, team_session

if TYPE_CHECKING:
    from actors.board.state import TeamState
from teamctl_base.text import one_line


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


@click.command("jobs")
@json_option
def jobs_command(as_json: bool) -> None:
    """Background jobs: running first, then the most recent finished."""
    from actors.jobs.table import fold_jobs, job_views

    with team_session() as team:
        table_ = fold_jobs({}, team.journal.read_from(1))
        found = job_views(table_, team.repo.team_dir / "jobs")
    if as_json:
        echo_json([view.as_json() for view in found])
        return
    if not found:
        click.echo("no background jobs")
        return
    # Whole log paths (to copy); the command is cut like any agent text.
    grid = table(
        None, ("job", "owner", "status", "exit", "started", "command", "log"), max_cell=None
    )
    grid.columns[0].no_wrap = True
    for v in found:
        code = "-" if v.exit_code is None else str(v.exit_code)
        command = one_line(v.command)
        grid.add_row(v.job_id, v.owner, v.status, code, _when(v.started_at), command, v.log_path)
    show(grid)


@click.group("cron", invoke_without_command=True)
@click.pass_context
def cron_group(ctx: click.Context) -> None:
    """Cron jobs that wake an agent (default: list the active ones)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(cron_list)


@cron_group.command("list")
@click.option("--all", "include_done", is_flag=True, help="Include cancelled and finished jobs.")
@json_option
def cron_list(include_done: bool = False, as_json: bool = False) -> None:
    """Cron jobs with their next firing time."""
    from actors.jobs.cron import fold_crons, views

    with team_session() as team:
        found = views(fold_crons({}, team.journal.read_from(1)), include_done=include_done)
    if as_json:
        echo_json([view.as_json() for view in found])
        return
    if not found:
        click.echo("no cron jobs")
        return
    grid = table(None, ("cron", "schedule", "tz", "kind", "owner", "status", "next", "prompt"))
    grid.columns[0].no_wrap = True
    for v in found:
        kind = "recurring" if v.recurring else "once"
        grid.add_row(
            v.cron_id,
            v.cron,
            v.tz or "local",
            kind,
            v.owner,
            v.status,
            v.next_fire or "-",
            v.prompt,
        )
    show(grid)


@cron_group.command("add")
@click.argument("expression")
@click.argument("prompt")
@click.option("--once", is_flag=True, help="Fire at the next slot only, then finish.")
@click.option("--tz", default=None, help="IANA zone (Europe/Paris) or UTC; default: local.")
@click.option("--owner", default="lead", show_default=True, help="Agent woken when it fires.")
@json_option
def cron_add(
    expression: str, prompt: str, once: bool, tz: str | None, owner: str, as_json: bool
) -> None:
    """Schedule PROMPT on a 5-field cron EXPRESSION (quote it: "*/15 9-17 * * mon-fri")."""
    from actors.jobs.cron import fold_crons, views
    from actors.jobs.scheduler import schedule_cron
    from teamctl_base.clock import UuidIds

    with team_session() as team:
        _check_owner(team.state(), owner)
        cron_id = schedule_cron(
            team.journal,
            UuidIds(),
            cron=expression,
            prompt=prompt,
            recurring=not once,
            tz=tz,
            owner=owner,
        )
        [view] = [
            v for v in views(fold_crons({}, team.journal.read_from(1))) if v.cron_id == cron_id
        ]
    if as_json:
        echo_json(view.as_json())
    else:
        click.echo(f"scheduled {cron_id}: next at {view.next_fire}")


def _check_owner(state: TeamState, owner: str) -> None:
    """A cron job wakes an agent of the team: the lead (even before its first run) or a
    teammate that was spawned (``UnknownMember`` otherwise)."""
    from actors.board.rules import LEAD
    from actors.errors import UnknownMember
    from mailboxes.messages import check_agent_name

    member = state.members.get(check_agent_name(owner))
    if owner != LEAD and (member is None or member.kind != "agent"):
        raise UnknownMember(owner)


@cron_group.command("cancel")
@click.argument("cron_id")
@json_option
def cron_cancel(cron_id: str, as_json: bool) -> None:
    """Cancel the cron job CRON_ID."""
    from actors.jobs.scheduler import cancel_cron

    with team_session() as team:
        was_active = cancel_cron(team.journal, cron_id)
    if as_json:
        echo_json({"cron_id": cron_id, "cancelled": was_active})
    elif was_active:
        click.echo(f"cancelled {cron_id}")
    else:
        click.echo(f"{cron_id} had already finished or been cancelled")


COMMANDS = (jobs_command, cron_group)
