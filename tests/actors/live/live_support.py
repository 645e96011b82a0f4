"""A real team folder with a bit of everything in it, for the live view tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from actors.board.state import TeamState
from actors.factory import Team, init_team, open_team
from mailboxes.events import (
    EventDraft,
    JobFinished,
    JobStarted,
    MemberSpawned,
    MemberStatusChanged,
    Payload,
    PermissionRequested,
    WorktreeBound,
    WorktreeCreated,
    WorktreeMerged,
    draft,
)
from mailboxes.messages import MessageDraft


def new_team(tmp_path: Path) -> Team:
    """``teamctl init`` in a fresh git repository; the caller closes the team."""
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root, name="demo")
    return open_team(root)


def journal(team: Team, body: Payload, actor: str = "runtime") -> None:
    """Append one event through the board (decided under the journal lock)."""

    def decision(_state: TeamState) -> list[EventDraft]:
        return [draft(body.TYPE, actor, body)]

    team.board.execute(decision)


def spawn(team: Team, name: str, status: str, role: str = "worker") -> None:
    """An agent member with ``status`` and an inbox."""
    team.mailbox.ensure_inbox(name)
    journal(team, MemberSpawned(name=name, role=role))
    journal(team, MemberStatusChanged(name=name, status=status))


def populate(team: Team) -> None:
    """Members (agents, a human, a crashed one), a small task graph, worktrees, messages, a
    running and a finished job, and a pending permission request.

    After it: task_1 completed by alice; task_2 (blocked by task_1, worktree wt-api) held by
    alice; task_3 held by carol (human); task_4 blocked by task_2; task_5 ready.
    """
    board = team.board
    spawn(team, "alice", "working")
    spawn(team, "bob", "waiting_permission")
    spawn(team, "dave", "crashed")
    team.ensure_human("carol")
    t1 = board.create("schema")
    t2 = board.create("api", blocked_by=[t1.id])
    board.create("docs")
    board.create("cleanup", blocked_by=[t2.id])
    board.create("release notes")
    journal(team, WorktreeCreated(name="wt-api", branch="wt/wt-api", base="main", path=".wt"))
    journal(team, WorktreeBound(name="wt-api", task_id=t2.id))
    journal(team, WorktreeCreated(name="wt-old", branch="wt/wt-old", base="main", path=".wo"))
    journal(team, WorktreeMerged(name="wt-old", into="main", commit="abcdef0123456789"))
    claim = board.claim(t1.id, "alice").unwrap()
    board.complete(t1.id, "alice", claim.epoch, "done")
    board.claim(t2.id, "alice").unwrap()
    board.claim("task_3", "carol", human=True).unwrap()
    journal(team, JobStarted(job_id="job_run", owner="alice", command="pytest -q", cwd="."))
    journal(team, JobStarted(job_id="job_old", owner="bob", command="make", cwd="."))
    journal(team, JobFinished(job_id="job_old", status="exited", exit_code=0))
    body = PermissionRequested(request_id="perm-1", agent="bob", tool="bash", input={})
    journal(team, body, actor="bob")
    for text in ("one", "two"):
        team.mailbox.deliver("alice", MessageDraft.text("lead", text))
    team.mailbox.deliver("lead", MessageDraft.text("alice", "go"))
