"""``complete_task`` on a task bound to a worktree: leftovers committed on ``wt/<name>`` before
``task.completed``, then the worktree unlocked; a failed commit refuses the completion."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.tools.toolsets import NO_HOOKS, lead_tools, teammate_tools
from actors.worktrees.git import WorktreeError
from actors.worktrees.messages import Shared
from mailboxes.events import WorktreeBound, WorktreeCreated, draft
from tests.actors.team_support import Driver, RealTeam, real_team


class Recorder:
    """Stands in for the Worktrees actor (the rest is the real runtime's): the unit boundary where
    the order of the calls is seen and a failed commit is made; notes the task's status at each
    call. A real worktree: tests/actors/tools/test_tools_verified_completion.py."""

    def __init__(self, team: RealTeam, commit: str | None = "c0ffee" * 6) -> None:
        self.team = team
        self.commit = commit
        self.calls: list[tuple[str, str, str]] = []
        self.fail = False

    def commit_all(self, name: str, message: str) -> str | None:
        self.calls.append(("commit_all", name, self.team.board.refresh().task("task_1").status))
        self.message = message
        if self.fail:
            raise WorktreeError("git commit failed: disk full")
        return self.commit

    def share(self, name: str) -> Shared:
        self.calls.append(("share", name, self.team.board.refresh().task("task_1").status))
        return Shared(name, f"wt/{name}", self.commit or "b" * 40)

    def sharing_warning(self) -> str | None:
        return None

    def unlock(self, name: str) -> None:
        self.calls.append(("unlock", name, self.team.board.refresh().task("task_1").status))


@pytest.fixture
def team(tmp_path: Path) -> Iterator[RealTeam]:
    team = real_team(tmp_path / "repo")
    yield team
    team.close()


def _bound_and_claimed(team: RealTeam) -> Driver:
    # ann first: on the real runtime a teammate with no work claims a ready task itself
    Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root).ok(
        "spawn_teammate", name="ann", prompt="work"
    )
    team.board.create("rename it")
    created = WorktreeCreated(name="cart", branch="wt/cart", base="main", path=".worktrees/cart")
    bound = WorktreeBound(name="cart", task_id="task_1")
    team.board.execute(
        lambda st: [draft(created.TYPE, "lead", created), draft(bound.TYPE, "lead", bound)]
    )
    ann = Driver(teammate_tools(team, "ann", hooks=NO_HOOKS), "ann", team.root)
    ann.ok("claim_task", task_id="task_1")
    return ann


def test_leftovers_are_committed_before_completion_then_the_worktree_is_unlocked(
    team: RealTeam,
) -> None:
    ops = Recorder(team)
    team.worktrees = ops
    ann = _bound_and_claimed(team)
    text = ann.ok("complete_task", task_id="task_1", summary="done")
    assert text.startswith("Completed task_1. Your uncommitted changes were committed on wt/cart")
    assert ops.calls == [
        ("commit_all", "cart", "in_progress"),
        ("share", "cart", "in_progress"),
        ("unlock", "cart", "completed"),
    ]
    assert ops.message.startswith("task_1: rename it\n") and "by ann" in ops.message


def test_nothing_left_to_commit_completes_quietly(team: RealTeam) -> None:
    ops = Recorder(team, commit=None)
    team.worktrees = ops
    ann = _bound_and_claimed(team)
    assert ann.ok("complete_task", task_id="task_1", summary="done") == "Completed task_1."
    assert [c[0] for c in ops.calls] == ["commit_all", "share", "unlock"]


def test_a_failed_commit_refuses_the_completion(team: RealTeam) -> None:
    ops = Recorder(team)
    ops.fail = True
    team.worktrees = ops
    ann = _bound_and_claimed(team)
    assert "disk full" in ann.error("complete_task", task_id="task_1", summary="done")
    assert team.board.refresh().task("task_1").status == "in_progress"
    assert team.events("task.completed") == []
