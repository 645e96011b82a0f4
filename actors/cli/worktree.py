"""``teamctl worktree list|add|merge|remove``: the host's view of the team's git worktrees.

Each command starts a ``Worktrees`` actor for its own run (git writes still go through one
actor) and stops it before returning. pykka and the actor are imported inside the commands.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

from actors.cli.common import echo_json, json_option, show, table, team_session, warn
from teamctl_base.text import safe

if TYPE_CHECKING:
    from actors.factory import Team
    from actors.worktrees.actor import WorktreesHandle
    from actors.worktrees.messages import MergeResult
    from mailboxes.ports import EventStore


def journal_job_probe(store: EventStore) -> Callable[[Path], bool]:
    """A job probe from the journal: a ``job.started`` with no ``job.finished`` whose cwd is in
    the path and whose pid (when recorded) is still alive."""
    from mailboxes.events import JobFinished, JobStarted, payload

    def running(path: Path) -> bool:
        live: dict[str, JobStarted] = {}
        for event in store.read_from(1):
            if event.type == JobStarted.TYPE:
                started = payload(event)
                assert isinstance(started, JobStarted)
                live[started.job_id] = started
            elif event.type == JobFinished.TYPE:
                live.pop(str(event.data.get("job_id")), None)
        root = os.path.realpath(path)
        for job in live.values():
            cwd = os.path.realpath(job.cwd)
            if cwd != root and not cwd.startswith(root + os.sep):
                continue
            if job.pid is None or _pid_alive(job.pid):
                return True
        return False

    return running


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_warning(team: Team) -> str | None:
    """The line to show when a task bound to a worktree is claimed in this clone while other
    hosts may join the team but its branch cannot reach them (docs/SCALE-OUT.md, "Code across
    hosts"); None on the file backend."""
    from actors.settings import load_scoped_settings, team_backend
    from actors.worktrees.remote import sharing_warning

    if team_backend(team.repo.settings_path) is None:
        return None
    settings = load_scoped_settings(team.repo.settings_path, root=team.repo.root).settings
    return sharing_warning(team.repo.root, team.repo.settings_path, settings)


@contextmanager
def worktrees_session() -> Iterator[WorktreesHandle]:
    """A ``Worktrees`` actor over the current repository's team, stopped afterwards. A verified
    task's command runs on a merge result with the team's sandbox, environment and timeout."""
    from actors.settings import load_scoped_settings
    from actors.worktrees.actor import WorktreesHandle
    from actors.worktrees.remote import BranchSharing
    from actors.worktrees.verify import Verifier

    with team_session() as team:
        settings = load_scoped_settings(team.repo.settings_path, root=team.repo.root).settings
        handle = WorktreesHandle.start(
            team.repo.root,
            team.board,
            job_running=journal_job_probe(team.journal),
            lock_path=team.repo.team_dir / "worktrees.lock",  # git writes of other processes
            verifier=Verifier.from_settings(settings),
            sharing=BranchSharing.for_team(team.repo.settings_path, settings),
        )
        try:
            yield handle
        finally:
            handle.stop()


@click.group("worktree")
def worktree() -> None:
    """Git worktrees bound to tasks (`.worktrees/<name>` on branch `wt/<name>`).

    On a team other hosts join, a completed task's branch is pushed to the shared git remote
    and `merge` in any clone fetches the exact commit its completion recorded
    (docs/SCALE-OUT.md, "Code across hosts")."""


@worktree.command("list")
@json_option
@click.option("--prune", is_flag=True, help="Run `git worktree prune` for vanished directories.")
@click.option(
    "--repair",
    is_flag=True,
    help="Remove half-created worktrees and forget journaled ones whose directory is gone.",
)
@click.option("--all", "include_removed", is_flag=True, help="Include removed worktrees.")
def list_command(as_json: bool, prune: bool, repair: bool, include_removed: bool) -> None:
    """Worktrees, their tasks, and any drift between git and the journal."""
    with worktrees_session() as wt:
        report = wt.reconcile(prune=prune, repair=repair)
        views = wt.list(include_removed=include_removed)
    if as_json:
        echo_json(
            {
                "worktrees": [asdict(v) for v in views],
                "drift": [asdict(d) for d in report.drifts],
                "pruned": report.pruned,
                "repaired": list(report.repaired),
            }
        )
        return
    for line in report.repaired:
        click.echo(safe(line))
    if views:
        grid = table(None, ["name", "branch", "base", "task", "status", "owner", "state"])
        for v in views:
            state = "removed" if v.removed else ("missing" if not v.exists else "ok")
            if v.locked:
                state += ", locked"
            if v.merged_commit:
                state += f", merged {v.merged_commit[:8]}"
            grid.add_row(
                v.name,
                v.branch,
                v.base,
                v.task_id or "-",
                v.task_status or "-",
                v.owner or "-",
                state,
            )
        show(grid)
    else:
        click.echo("no worktrees")
    for drift in report.drifts:
        warn(safe(drift))


@worktree.command("add")
@click.argument("name")
@click.option("--task", "task_id", required=True, help="The pending task to bind it to.")
@click.option("--base", default=None, help="Base ref (default: the main checkout's HEAD).")
def add_command(name: str, task_id: str, base: str | None) -> None:
    """Create `.worktrees/NAME` on branch `wt/NAME` for a pending task."""
    with worktrees_session() as wt:
        made = wt.create(name, task_id, base)
    click.echo(f"created {made.path} on {made.branch} from {made.base} for {made.task_id}")


def _say(result: MergeResult) -> str:
    if result.already_merged:
        return f"{result.name}: already merged into {result.into}"
    if result.ok:
        how = "fast-forward" if result.fast_forward else ("squash" if result.squash else "merge")
        if result.verified:
            how += ", verified"
        if result.fetched_from:
            how += f", fetched from {result.fetched_from}"
        return f"{result.name}: merged into {result.into} ({how}) at {(result.commit or '')[:12]}"
    if result.conflicts:
        return f"{result.name}: conflict in {', '.join(result.conflicts)}; nothing was changed"
    return f"{result.name}: not merged: {result.reason}"


@worktree.command("merge")
@click.argument("name", required=False)
@click.option("--all", "merge_all", is_flag=True, help="Every completed, unmerged worktree.")
@click.option("--squash", is_flag=True, help="One squash commit instead of a merge.")
@json_option
def merge_command(name: str | None, merge_all: bool, squash: bool, as_json: bool) -> None:
    """Merge a completed task's branch into the main checkout's branch."""
    if bool(name) == merge_all:
        raise click.UsageError("give a worktree NAME or --all (not both)")
    with worktrees_session() as wt:
        results = (
            wt.merge_all(squash=squash) if merge_all else (wt.merge(name or "", squash=squash),)
        )
    if as_json:
        echo_json([asdict(r) for r in results])
    else:
        if not results:
            click.echo("nothing to merge")
        for result in results:
            click.echo(safe(_say(result)), err=not result.ok)
    if any(not r.ok for r in results):
        raise SystemExit(1)


@worktree.command("remove")
@click.argument("name")
@click.option("--force", is_flag=True, help="Remove even while claimed, busy, dirty or unmerged.")
@click.option("--delete-branch", is_flag=True, help="Also delete branch wt/NAME.")
def remove_command(name: str, force: bool, delete_branch: bool) -> None:
    """Remove a worktree (the branch is kept unless --delete-branch)."""
    with worktrees_session() as wt:
        removed = wt.remove(name, force=force, delete_branch=delete_branch)
    kept = "deleted" if removed.branch_deleted else "kept"
    click.echo(f"removed worktree {removed.name}; branch {removed.branch} {kept}")


COMMANDS = (worktree,)
