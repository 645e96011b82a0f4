"""Fold behaviours a board user sees, one each (added after mutation testing of
``actors/board/fold.py`` left them unchecked): a journal written by an older teamctl folds to
the same board, a merge is recorded on its worktree, a re-delivered event counts once, and an
event the state already holds changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from actors.board.fold import fold, fold_all
from actors.board.state import EMPTY, TeamState
from mailboxes import events as ev
from mailboxes.errors import InvalidEvent


def _event(seq: int, type_: str, data: dict[str, Any], v: int) -> ev.Event:
    return ev.Event(seq=seq, ts=100.0 + seq, type=type_, actor="w1", data=data, v=v)


def _typed(seq: int, body: ev.Payload) -> ev.Event:
    return _event(seq, body.TYPE, body.model_dump(mode="json"), body.VERSION)


def _claimed_task() -> list[ev.Event]:
    return [
        _typed(1, ev.TaskCreated(task_id="task_1", subject="s")),
        _typed(2, ev.TaskCreated(task_id="task_2", subject="t", blocked_by=("task_1",))),
        _typed(3, ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1)),
    ]


def test_a_release_written_by_an_older_teamctl_frees_the_task() -> None:
    # task.released v1 (no `forced_by`) goes through the payload upgrade, not the fast path
    release = _event(
        4, "task.released", {"task_id": "task_1", "owner": "w1", "epoch": 1, "reason": "r"}, 1
    )
    state = fold_all(EMPTY, [*_claimed_task(), release])
    task = state.task("task_1")
    assert (task.status, task.owner, task.seq) == ("pending", None, 4)
    assert "w1" not in state.holdings
    assert [t.id for t in state.ready()] == ["task_1"]


def test_a_completion_written_by_an_older_teamctl_makes_its_dependents_ready() -> None:
    done = _event(4, "task.completed", {"task_id": "task_1", "owner": "w1", "epoch": 1}, 1)
    state = fold_all(EMPTY, [*_claimed_task(), done])
    assert state.task("task_1").status == "completed"
    assert "w1" not in state.holdings
    assert [t.id for t in state.ready()] == ["task_2"]


def test_a_claim_and_a_creation_with_coerced_values_still_apply() -> None:
    # values the payload model coerces (an epoch written as a string) skip the fast path
    events = [
        _event(1, "task.created", {"task_id": "task_1", "subject": "s"}, 1),
        _event(2, "task.claimed", {"task_id": "task_1", "owner": "w1", "epoch": "3"}, 1),
    ]
    state = fold_all(EMPTY, events)
    task = state.task("task_1")
    assert (task.subject, task.status, task.owner, task.epoch) == ("s", "in_progress", "w1", 3)
    assert state.holdings["w1"] == "task_1"
    assert state.next_task == 2


def test_a_merged_worktree_records_its_merge_commit() -> None:
    events = [
        _typed(1, ev.WorktreeCreated(name="wt1", branch="b", base="main", path="/x")),
        _typed(2, ev.WorktreeMerged(name="wt1", into="main", commit="abc123")),
    ]
    state = fold_all(EMPTY, events)
    assert state.worktrees["wt1"].merged_commit == "abc123"


def test_an_event_delivered_twice_in_one_batch_is_folded_once() -> None:
    events = _claimed_task()
    again = [events[0], events[1], events[1], events[2], events[2]]
    state = fold_all(EMPTY, again)
    assert state == fold_all(EMPTY, events)
    assert state.seq == 3


def test_events_the_state_already_holds_return_the_same_state() -> None:
    state: TeamState = fold_all(EMPTY, _claimed_task())
    assert fold(state, _claimed_task()[2]) is state
    assert fold_all(state, _claimed_task()) is state


def test_a_stopped_member_keeps_its_record_and_an_unknown_one_is_recorded() -> None:
    events = [
        _typed(1, ev.MemberSpawned(name="w1", role="dev", model="m", prompt="p")),
        _typed(2, ev.MemberStatusChanged(name="w1", status="working")),
        _typed(3, ev.MemberStopped(name="w1", reason="done")),
        _typed(4, ev.MemberStopped(name="ghost", reason="gone")),
        _typed(5, ev.MemberStatusChanged(name="phantom", status="idle")),
    ]
    state = fold_all(EMPTY, events)
    w1 = state.members["w1"]
    assert (w1.status, w1.reason, w1.role, w1.model, w1.prompt) == (
        "stopped",
        "done",
        "dev",
        "m",
        "p",
    )
    assert w1.joined_at == 101.0
    assert (state.members["ghost"].status, state.members["ghost"].reason) == ("stopped", "gone")
    assert state.members["phantom"].status == "idle"


def test_a_completion_with_a_commit_is_recorded_on_the_worktree_it_was_bound_to() -> None:
    events = [
        _typed(1, ev.WorktreeCreated(name="wt1", branch="b", base="main", path="/x")),
        *[_typed(e.seq + 1, ev.payload(e)) for e in _claimed_task()],
        _typed(5, ev.WorktreeBound(name="wt1", task_id="task_1")),
        _typed(6, ev.TaskCompleted(task_id="task_1", owner="w1", epoch=1, commit="c1")),
    ]
    state = fold_all(EMPTY, events)
    assert state.worktrees["wt1"].completed_commit == "c1"
    assert state.task("task_1").status == "completed"


def test_a_task_whose_worktree_was_removed_still_completes_with_its_commit() -> None:
    events = [
        _typed(1, ev.WorktreeCreated(name="wt1", branch="b", base="main", path="/x")),
        *[_typed(e.seq + 1, ev.payload(e)) for e in _claimed_task()],
        _typed(5, ev.WorktreeBound(name="wt1", task_id="task_1")),
        _typed(6, ev.WorktreeRemoved(name="wt1")),
        _typed(7, ev.TaskCompleted(task_id="task_1", owner="w1", epoch=1, commit="c1")),
    ]
    state = fold_all(EMPTY, events)
    assert state.task("task_1").status == "completed"
    assert state.task("task_1").worktree is None
    assert state.worktrees["wt1"].removed
    assert state.worktrees["wt1"].completed_commit is None


def test_a_created_task_keeps_its_verify_command_and_plan_flag() -> None:
    events = [
        _typed(1, ev.TaskCreated(task_id="task_1", subject="s", verify="pytest -q")),
        _typed(2, ev.TaskCreated(task_id="task_2", subject="t", plan_required=True)),
    ]
    state = fold_all(EMPTY, events)
    assert state.task("task_1").verify == "pytest -q"
    assert not state.task("task_1").plan.required
    assert state.task("task_2").plan.required and state.task("task_2").verify is None


def test_a_created_event_without_its_optional_keys_gets_the_defaults() -> None:
    # a current-version event stored without the keys that have defaults (no plan, no verify)
    state = fold_all(EMPTY, [_event(1, "task.created", {"task_id": "task_1", "subject": "s"}, 2)])
    task = state.task("task_1")
    assert (task.plan.required, task.plan.status, task.verify, task.role) == (
        False,
        "none",
        None,
        None,
    )
    assert (task.description, task.blocked_by, dict(task.metadata)) == ("", (), {})


def test_a_claim_stored_without_the_human_key_is_an_agent_claim() -> None:
    events = [
        _typed(1, ev.TaskCreated(task_id="task_1", subject="s")),
        _event(2, "task.claimed", {"task_id": "task_1", "owner": "w1", "epoch": 1}, 1),
    ]
    task = fold_all(EMPTY, events).task("task_1")
    assert (task.owner, task.human, task.epoch) == ("w1", False, 1)


def test_adding_a_blocker_a_task_already_has_keeps_one_edge() -> None:
    events = [
        _typed(1, ev.TaskCreated(task_id="task_1", subject="s")),
        _typed(2, ev.TaskCreated(task_id="task_2", subject="t", blocked_by=("task_1",))),
        _typed(3, ev.TaskUpdated(task_id="task_2", add_blocked_by=("task_1",))),
    ]
    state = fold_all(EMPTY, events)
    assert state.task("task_2").blocked_by == ("task_1",)
    assert state.task("task_1").blocks == ("task_2",)


def test_a_task_a_plan_was_requested_for_still_needs_one_after_a_release() -> None:
    events = [
        *_claimed_task(),
        _typed(4, ev.PlanRequested(task_id="task_1", request_id="r1", teammate="w1", epoch=1)),
    ]
    state = fold_all(EMPTY, events)
    assert state.task("task_1").plan.required
    assert state.task("task_1").plan.status == "requested"
    assert state.plan_requests["r1"].status == "requested"
    release = ev.TaskReleased(task_id="task_1", owner="w1", epoch=1, reason="r")
    state = fold(state, _typed(5, release))
    assert state.task("task_1").plan.required
    assert state.task("task_1").plan.status == "required"
    assert "r1" not in state.plan_requests


def test_a_submitted_plan_is_pending_review_with_its_text() -> None:
    events = [
        *_claimed_task(),
        _typed(
            4,
            ev.PlanSubmitted(task_id="task_1", request_id="r1", owner="w1", epoch=1, plan="do it"),
        ),
    ]
    state = fold_all(EMPTY, events)
    request = state.plan_requests["r1"]
    assert (request.status, request.plan, request.teammate) == ("submitted", "do it", "w1")
    assert (state.task("task_1").plan.status, state.task("task_1").plan.plan) == (
        "submitted",
        "do it",
    )


def test_a_spawned_agent_is_starting_and_a_human_is_active() -> None:
    events = [
        _typed(1, ev.MemberSpawned(name="w1", role="dev")),
        _typed(2, ev.MemberSpawned(name="ann", role="reviewer", kind="human")),
    ]
    state = fold_all(EMPTY, events)
    assert state.members["w1"].status == "starting"
    assert state.members["ann"].status == "active"


@pytest.mark.parametrize(
    "data",
    [
        {"task_id": "task_1", "owner": "w1", "epoch": 1, "reason": "r", "forced_by": 5},
        {"task_id": "task_1", "owner": "w1", "epoch": 1, "reason": 7},
    ],
)
def test_a_release_with_malformed_fields_is_refused_as_invalid(data: dict[str, Any]) -> None:
    with pytest.raises(InvalidEvent):
        fold_all(EMPTY, [*_claimed_task(), _event(4, "task.released", data, 2)])
