"""The fold of ``worktree.*`` events into ``TeamState.worktrees`` (plain events, no git)."""

from __future__ import annotations

from actors.board.fold import fold_all
from actors.board.state import EMPTY, TeamState
from mailboxes import events as ev


def _state(*bodies: ev.Payload) -> TeamState:
    events = [
        ev.Event(seq=i, ts=10.0 + i, type=b.TYPE, actor="cli", data=b.model_dump(mode="json"))
        for i, b in enumerate(bodies, start=1)
    ]
    return fold_all(EMPTY, events)


def test_created_bound_merged_removed() -> None:
    created = ev.WorktreeCreated(name="a", branch="wt/a", base="main", path=".worktrees/a")
    state = _state(
        ev.TaskCreated(task_id="task_1", subject="s"),
        created,
        ev.WorktreeBound(name="a", task_id="task_1"),
    )
    record = state.worktrees["a"]
    assert (record.branch, record.base, record.path) == ("wt/a", "main", ".worktrees/a")
    assert record.task_id == "task_1" and not record.removed and record.merged_commit is None
    assert record.created_at == 12.0
    assert state.task("task_1").worktree == "a"

    merged = _state(
        ev.TaskCreated(task_id="task_1", subject="s"),
        created,
        ev.WorktreeBound(name="a", task_id="task_1"),
        ev.WorktreeMerged(name="a", into="main", commit="c0ffee"),
        ev.WorktreeRemoved(name="a", branch_deleted=False),
    )
    assert merged.worktrees["a"].merged_commit == "c0ffee"
    assert merged.worktrees["a"].removed
    assert merged.task("task_1").worktree is None


def test_a_name_created_again_after_removal_starts_fresh() -> None:
    first = ev.WorktreeCreated(name="a", branch="wt/a", base="main", path=".worktrees/a")
    again = ev.WorktreeCreated(name="a", branch="wt/a", base="dev", path=".worktrees/a")
    state = _state(first, ev.WorktreeRemoved(name="a"), again)
    assert not state.worktrees["a"].removed
    assert state.worktrees["a"].base == "dev"


def test_events_for_unknown_worktrees_are_recorded_on_tasks_only() -> None:
    state = _state(
        ev.TaskCreated(task_id="task_1", subject="s"),
        ev.WorktreeBound(name="ghost", task_id="task_1"),
        ev.WorktreeMerged(name="ghost", into="main", commit="x"),
    )
    assert "ghost" not in state.worktrees
    assert state.task("task_1").worktree == "ghost"
