"""Task board commands: ``tasks`` and ``task add|show|edit|delete|claim|release|complete``.

A person takes part with ``--as NAME``: the first claim journals ``member.spawned`` with
``kind="human"``; such claims hold no liveness lock and are never released automatically.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from actors.cli.common import (
    Lines,
    echo_json,
    json_option,
    show,
    team_session,
    text_table,
    warn,
)
from teamctl_base.text import CELL_CHARS, one_line

if TYPE_CHECKING:
    from actors.board.state import Task, TeamState
    from actors.factory import Team

_STATUS_ORDER = ("in_progress", "pending", "completed", "deleted")


def task_json(task: Task, state: TeamState) -> dict[str, Any]:
    """The JSON a program reads for one task: the projection file's fields plus ``ready``."""
    from actors.board.projections import render_task

    return {**render_task(task), "ready": state.is_ready(task)}


def _owner(task: Task) -> str:
    if task.owner is None:
        return "-"
    return f"{task.owner} (human)" if task.human else task.owner


TERMINAL_ROWS = 50
"""``teamctl tasks`` on a terminal shows at most this many rows unless ``--limit`` says."""


def _board_status(task: Task, state: TeamState) -> str:
    if task.status == "pending":
        return "ready" if state.is_ready(task) else "blocked"
    return task.status.replace("_", " ")


@click.command("tasks")
@click.option("--all", "show_all", is_flag=True, help="Include deleted tasks.")
@click.option("--full", is_flag=True, help="Whole subjects (long ones are cut with … otherwise).")
@click.option(
    "--status",
    "only",
    type=click.Choice(["ready", "blocked", "in_progress", "completed", "deleted"]),
    multiple=True,
    help="Only tasks in this state (repeatable).",
)
@click.option("--owner", default=None, help="Only tasks held (or completed) by this member.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=None,
    help=f"At most this many rows (0: all). Default: {TERMINAL_ROWS} on a terminal, all otherwise.",
)
@json_option
def tasks(
    show_all: bool,
    full: bool,
    only: tuple[str, ...],
    owner: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """The task board, by status (in progress first, then ready, blocked, completed)."""
    import sys

    with team_session(read_only=True) as team:
        state = team.state()
    wanted = {s.replace("_", " ") for s in only}
    rows = [
        t
        for t in state.tasks.values()
        if (show_all or t.status != "deleted" or "deleted" in wanted)
        and (not wanted or _board_status(t, state) in wanted)
        and (owner is None or t.owner == owner)
    ]
    rows.sort(key=lambda t: (_STATUS_ORDER.index(t.status), t.number))
    if limit is None:
        limit = TERMINAL_ROWS if sys.stdout.isatty() and not as_json else 0
    hidden = rows[limit:] if limit else []
    if hidden:
        rows = rows[:limit]
    if as_json:
        echo_json([task_json(t, state) for t in rows])
        return
    if not rows:
        if state.tasks and (wanted or owner):
            click.echo("no tasks match")
        else:
            click.echo("no tasks yet — add one with `teamctl task add SUBJECT`")
        return
    verified = any(t.verify is not None for t in rows)  # the column only when a task has one
    columns = ("id", "status", "subject", "owner", "blocked by", "worktree")
    grid = text_table(
        None, columns + (("verify",) if verified else ()), max_cell=None if full else CELL_CHARS
    )
    for t in rows:
        cells = [t.id, _board_status(t, state), t.subject, _owner(t)]
        cells += [", ".join(t.blocked_by) or "-", t.worktree or "-"]
        if verified:
            cells.append(_verify_cell(t))
        grid.add_row(*cells)
    show(grid)
    if hidden:
        counts: dict[str, int] = {}
        for t in hidden:
            key = _board_status(t, state)
            counts[key] = counts.get(key, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in counts.items())
        click.echo(
            f"… and {len(hidden)} more ({summary}): --limit 0 shows all, --status/--owner "
            "filter, --json for programs"
        )


def _verify_cell(task: Task) -> str:
    """The verify command and how its last run went (the table escapes it)."""
    if task.verify is None:
        return "-"
    last = {True: " (passed)", False: " (failed)", None: ""}[task.verified]
    return task.verify + last


@click.group("task")
def task() -> None:
    """Add, inspect, change and work on tasks."""


@task.command("add")
@click.argument("subject")
@click.option("-d", "--description", default="", help="Longer description.")
@click.option("--blocked-by", multiple=True, metavar="ID", help="A task this one waits for.")
@click.option(
    "--verify",
    default=None,
    metavar="CMD",
    help="A shell command that must exit 0 before the task may be completed, and on the merge "
    "result before its worktree is merged.",
)
@click.option("--as", "actor", default="cli", show_default=True, help="Who is adding it.")
@json_option
def task_add(
    subject: str,
    description: str,
    blocked_by: tuple[str, ...],
    verify: str | None,
    actor: str,
    as_json: bool,
) -> None:
    """Add a task."""
    with team_session(actor) as team:
        created = team.board.create(subject, description, blocked_by=blocked_by, verify=verify)
        state = team.state()
    if as_json:
        echo_json(task_json(state.task(created.id), state))
    else:
        click.echo(f"added {created.id}: {one_line(created.subject)}")
        if created.verify is not None:
            click.echo(f"  verified by: {one_line(created.verify)}")


@task.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--as", "actor", default="cli", show_default=True, help="Who is adding them.")
@json_option
def task_import(file: Any, actor: str, as_json: bool) -> None:
    """Add many tasks in one journal commit from FILE (``-``: standard input), one JSON object
    per line: ``subject``, and optionally ``description``, ``blocked_by`` (ids or subjects, of
    tasks on the board or in the file) and ``verify``. Every line is checked first: with any
    bad line nothing is added and each bad line is reported (exit 1)."""
    from actors.board.bulk import BadImport, parse_lines

    lines = file.read().splitlines()
    with team_session(actor) as team:
        try:
            new = parse_lines(lines, team.state())
        except BadImport as exc:
            for line in exc.problems:
                click.echo(f"teamctl task import: {one_line(line)}", err=True)
            click.echo(
                f"teamctl task import: {len(exc.problems)} bad line(s); nothing was imported",
                err=True,
            )
            raise click.exceptions.Exit(1) from None
        created = team.board.create_many(new)
    if as_json:
        echo_json({"imported": len(created), "ids": [t.id for t in created]})
    elif not created:
        click.echo("nothing to import (the file has no tasks)")
    else:
        span = created[0].id if len(created) == 1 else f"{created[0].id} … {created[-1].id}"
        click.echo(f"imported {len(created)} task{'s' if len(created) != 1 else ''} ({span})")


@task.command("show")
@click.argument("task_id")
@json_option
def task_show(task_id: str, as_json: bool) -> None:
    """Show one task."""
    with team_session(read_only=True) as team:
        state = team.state()
    found = state.task(task_id)
    data = task_json(found, state)
    if as_json:
        echo_json(data)
        return
    # Whole texts, escaped; the description and summary keep their line breaks.
    grid = text_table(f"{found.id}: {found.subject}", ("field", "value"), max_cell=None)
    for key, value in data.items():
        if key in ("id", "subject", "seq"):
            continue
        grid.add_row(key.replace("_", " "), Lines(_cell(key, value)))
    show(grid)


def _cell(key: str, value: Any) -> str:
    if key == "verified" and isinstance(value, bool):
        return "last run passed" if value else "last run failed"
    if key == "plan" and isinstance(value, dict):
        return str(value["status"]) if value.get("required") else "-"
    if key.endswith("_at") and isinstance(value, float) and value:
        import time

        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    if isinstance(value, dict):
        return json.dumps(value) if value else "-"
    return "-" if value is None or value == "" else str(value)


@task.command("edit")
@click.argument("task_id")
@click.option("--subject", default=None)
@click.option("--description", default=None)
@click.option("--add-blocked-by", multiple=True, metavar="ID")
@click.option("--remove-blocked-by", multiple=True, metavar="ID")
@click.option("--as", "actor", default="cli", show_default=True)
def task_edit(
    task_id: str,
    subject: str | None,
    description: str | None,
    add_blocked_by: tuple[str, ...],
    remove_blocked_by: tuple[str, ...],
    actor: str,
) -> None:
    """Change a task's subject, description or dependencies."""
    if subject is None and description is None and not add_blocked_by and not remove_blocked_by:
        raise click.UsageError("nothing to change: give --subject, --description or a dependency")
    with team_session(actor) as team:
        if remove_blocked_by:
            # The board treats removing an absent edge as done (a retry is a no-op); a person
            # is told instead.
            edges = team.state().task(task_id).blocked_by
            strangers = [d for d in dict.fromkeys(remove_blocked_by) if d not in edges]
            if strangers:
                from actors.errors import TeamError

                raise TeamError(f"task {task_id} is not blocked by {', '.join(strangers)}")
        team.board.update(
            task_id,
            subject=subject,
            description=description,
            add_blocked_by=add_blocked_by,
            remove_blocked_by=remove_blocked_by,
        )
    click.echo(f"updated {task_id}")


@task.command("delete")
@click.argument("task_id")
@click.option("--force", is_flag=True, help="Delete even if other tasks wait for it.")
@click.option("--as", "actor", default="cli", show_default=True)
def task_delete(task_id: str, force: bool, actor: str) -> None:
    """Delete a task."""
    with team_session(actor) as team:
        team.board.delete(task_id, force=force)
    click.echo(f"deleted {task_id}")


@task.command("claim")
@click.argument("task_id")
@click.option("--as", "name", required=True, help="Your name on the team.")
def task_claim(task_id: str, name: str) -> None:
    """Take a ready task as a human member."""
    from actors.cli.worktree import claim_warning

    warning = None
    with team_session(name) as team:
        result = team.board.claim(task_id, name, human=True)
        if result.ok:
            team.ensure_human(name)
            if result.task is not None and result.task.worktree is not None:
                warning = claim_warning(team)  # its branch cannot reach other hosts
    if not result.ok:
        # A refused claim is a normal answer, not an error: one line, exit 1.
        click.echo(f"error: {name} cannot claim {task_id}: {result.reason}", err=True)
        raise click.exceptions.Exit(1)
    click.echo(f"{name} claimed {task_id}")
    if warning:
        warn(warning)


force_option = click.option(
    "--force",
    is_flag=True,
    help="Act even though a running teamctl hosts that agent (the journal records who forced it).",
)
by_option = click.option(
    "--by",
    default="user",
    show_default=True,
    help="With --force: who is forcing it, as recorded in the journal.",
)


def forced_by(team: Team, name: str, action: str, *, force: bool, by: str) -> str | None:
    """Who forces a person's ``action`` on the work or mail of ``name``: None when ``name`` is
    no live agent (nothing to force), ``by`` with ``--force``; ``LiveMemberRefused`` without it.
    A name that is no member must be one a person may take (``InvalidMemberName``)."""
    from actors.board.rules import check_member_name
    from actors.errors import LiveMemberRefused
    from mailboxes.messages import check_agent_name

    member = team.state().members.get(name)
    if member is None:
        check_member_name(name, lead=None)
        return None
    if member.kind != "agent" or not team.liveness.is_alive(name):
        return None
    if not force:
        raise LiveMemberRefused(name, action)
    return check_agent_name(by)


@task.command("release")
@click.argument("task_id")
@click.option("--as", "name", required=True, help="Who holds it.")
@force_option
@by_option
def task_release(task_id: str, name: str, force: bool, by: str) -> None:
    """Give a task back to the board."""
    from actors.board.board import acting_as

    with team_session(name) as team:
        who = forced_by(team, name, f"release its task {task_id}", force=force, by=by)
        held = team.state().task(task_id)
        with acting_as(who or name):
            team.board.release(task_id, name, held.epoch, "released by hand", forced_by=who)
    click.echo(f"{name} released {task_id}" + (f" (forced by {who})" if who else ""))


@task.command("complete")
@click.argument("task_id")
@click.option("--as", "name", required=True, help="Who holds it.")
@click.option("--summary", default="", help="What was done.")
@force_option
@by_option
def task_complete(task_id: str, name: str, summary: str, force: bool, by: str) -> None:
    """Mark a task you hold as done."""
    from actors.board.board import acting_as

    with team_session(name) as team:
        who = forced_by(team, name, f"complete its task {task_id}", force=force, by=by)
        held = team.state().task(task_id)
        with acting_as(who or name):
            if held.verify is not None and held.status == "in_progress" and held.owner == name:
                _verify_or_refuse(team, held)
            done = team.board.complete(task_id, name, held.epoch, summary, forced_by=who)
    unblocked = done.unblocked
    extra = f" (now ready: {', '.join(unblocked)})" if unblocked else ""
    forced = f" (forced by {who})" if who else ""
    click.echo(f"{name} completed {task_id}{extra}{forced}")


def _verify_or_refuse(team: Team, held: Task) -> None:
    """Run ``held``'s verify command where its work is (its worktree, else the main checkout)
    with the team's sandbox, environment and timeout; journal the run; exit 1 with the
    command's output when it failed (docs/ARCHITECTURE.md, "Verified tasks")."""
    from actors.settings import load_scoped_settings
    from actors.worktrees.git import WORKTREES_DIR
    from actors.worktrees.verify import Verifier
    from teamctl_base.text import safe

    assert held.verify is not None
    root = team.repo.root
    where = held.worktree
    cwd = root / WORKTREES_DIR / where if where is not None else root
    if not cwd.is_dir():
        cwd, where = root, None
    settings = load_scoped_settings(team.repo.settings_path, root=root).settings
    outcome = Verifier.from_settings(settings).run(held.verify, cwd=cwd)
    team.board.record_verification(outcome.event(held.id, "complete", worktree=where))
    if not outcome.passed:
        click.echo(
            f"error: {held.id} was not completed: its {safe(outcome.report(), multiline=True)}",
            err=True,
        )
        raise click.exceptions.Exit(1)


COMMANDS = (tasks, task)
