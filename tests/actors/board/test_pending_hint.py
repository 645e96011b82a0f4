"""``TeamState.pending_from``: where the search for a ready task starts. ``first_claimable``
raises it past the finished tasks it walked over, the fold lowers it to any task a batch left
pending (a release, a new task), and a state whose task map is not the one the hint was made
for does not use it. The answer is always the one a walk over every task gives."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import MappingProxyType

import pytest

from actors.board.fold import RECENT_MAX, fold_all
from actors.board.rules import first_claimable
from actors.board.state import EMPTY, Task, TeamState
from mailboxes import events as ev
from tests.actors.board.test_fold_fast_path import _typed, _workload


def _walk(
    state: TeamState, role: str | None, accept: Callable[[Task], bool] | None = None
) -> Task | None:
    """``first_claimable`` as a walk over every task (no hint)."""
    for task in state.tasks.values():
        if (
            task.status == "pending"
            and (task.role is None or task.role == role)
            and state.is_ready(task)
            and (accept is None or accept(task))
        ):
            return task
    return None


def _bound_holds(state: TeamState) -> None:
    lowest = state.pending_from()
    assert not [t.id for t in state.tasks.values() if t.status == "pending" and t.number < lowest]


@pytest.mark.parametrize("batch", [1, 3, 50, RECENT_MAX + 1])
def test_first_claimable_matches_a_walk_whatever_the_batches(batch: int) -> None:
    events = _workload(seed=batch + 11, count=900)
    state = EMPTY
    moved = 0
    for start in range(0, len(events), batch):
        state = fold_all(state, events[start : start + batch])
        _bound_holds(state)
        before = state.pending_from()
        for role in (None, "dev"):
            assert first_claimable(state, role) == _walk(state, role)
            odd: Callable[[Task], bool] = lambda task: task.number % 2 == 1  # noqa: E731
            assert first_claimable(state, role, odd) == _walk(state, role, odd)
        _bound_holds(state)
        moved += state.pending_from() > before
    if batch < RECENT_MAX:
        assert moved  # the searches did learn where the pending tasks start


def _history(tasks: int, done: int) -> list[ev.Event]:
    """``tasks`` tasks; the first ``done`` claimed by w1 and completed one after the other."""
    events: list[ev.Event] = []

    def add(body: ev.Payload) -> None:
        events.append(_typed(len(events) + 1, body))

    for n in range(1, tasks + 1):
        add(ev.TaskCreated(task_id=f"task_{n}", subject=f"s{n}"))
    for n in range(1, done + 1):
        add(ev.TaskClaimed(task_id=f"task_{n}", owner="w1", epoch=1))
        add(ev.TaskCompleted(task_id=f"task_{n}", owner="w1", epoch=1))
    return events


def test_a_claim_late_in_a_run_starts_past_the_finished_tasks() -> None:
    state = fold_all(EMPTY, _history(50, 40))
    assert state.pending_from() == 1  # nobody looked yet
    found = first_claimable(state, None)
    assert found is not None and found.id == "task_41"
    assert state.pending_from() == 41
    # The next state (w2 claims task_41) starts where this one's search ended.
    claimed = ev.TaskClaimed(task_id="task_41", owner="w2", epoch=1)
    after = fold_all(state, [_typed(state.seq + 1, claimed)])
    assert after.pending_from() == 41
    found = first_claimable(after, None)
    assert found is not None and found.id == "task_42"
    assert after.pending_from() == 42
    assert state.pending_from() == 41  # the earlier state keeps its own


def test_a_task_released_below_the_hint_is_found_again() -> None:
    events = _history(10, 0)
    events.append(_typed(11, ev.TaskClaimed(task_id="task_2", owner="w2", epoch=1)))
    state = fold_all(EMPTY, events)
    assert first_claimable(state, None).id == "task_1"  # type: ignore[union-attr]
    state = fold_all(
        state,
        [
            _typed(12, ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1)),
            _typed(13, ev.TaskCompleted(task_id="task_1", owner="w1", epoch=1)),
        ],
    )
    assert first_claimable(state, None).id == "task_3"  # type: ignore[union-attr]
    assert state.pending_from() == 3  # task_2 is in progress: the search starts past it
    released = ev.TaskReleased(task_id="task_2", owner="w2", epoch=1, reason="released")
    state = fold_all(state, [_typed(14, released)])
    assert state.pending_from() == 2
    assert first_claimable(state, None).id == "task_2"  # type: ignore[union-attr]


def test_new_tasks_after_everything_finished_are_found() -> None:
    state = fold_all(EMPTY, _history(5, 5))
    assert first_claimable(state, None) is None
    assert state.pending_from() == 6  # no task is pending
    state = fold_all(state, [_typed(state.seq + 1, ev.TaskCreated(task_id="task_6", subject="x"))])
    assert first_claimable(state, None).id == "task_6"  # type: ignore[union-attr]


def test_a_state_with_another_task_map_does_not_use_the_hint() -> None:
    state = fold_all(EMPTY, _history(10, 6))
    assert first_claimable(state, None).id == "task_7"  # type: ignore[union-attr]
    assert state.pending_from() == 7
    reopened = state.tasks["task_3"]._replace(status="pending", owner=None)
    by_hand = dataclasses.replace(
        state, tasks=MappingProxyType({**state.tasks, "task_3": reopened})
    )
    assert by_hand.pending_from() == 1
    assert first_claimable(by_hand, None) == reopened
    assert TeamState(tasks=state.tasks).pending_from() == 1  # no hint at all
