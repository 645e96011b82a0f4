"""``TeamState.changed_since``: the tasks a projection write needs, found from the fold's
``recent`` index when it covers the seq asked for, else by a scan; always the same answer."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from actors.board.fold import RECENT_MAX, fold_all
from actors.board.projections import Projections
from actors.board.state import EMPTY, NO_RECENT, Task, TeamState, task_number
from tests.actors.board.test_fold_fast_path import _workload


def _scan(state: TeamState, since: int) -> list[Task]:
    found = [task for task in state.tasks.values() if task.seq >= since]
    return sorted(found, key=lambda task: task_number(task.id))


def _check(state: TeamState) -> None:
    seqs = {1, state.recent_from - 1, state.recent_from, state.seq, state.seq + 1}
    seqs |= set(range(max(1, state.seq - 40), state.seq + 2))
    for since in sorted(s for s in seqs if 0 < s < NO_RECENT):
        assert state.changed_since(since) == _scan(state, since), since
        if since >= state.recent_from:  # the index's promise, whichever way the answer is found
            assert {task.id for task in _scan(state, since)} <= set(state.recent), since


@pytest.mark.parametrize("batch", [1, 2, 7, 60, RECENT_MAX + 1, 5000])
def test_changed_since_matches_a_scan_whatever_the_batches(batch: int) -> None:
    events = _workload(seed=batch, count=700)
    state = EMPTY
    for start in range(0, len(events), batch):
        state = fold_all(state, events[start : start + batch])
        _check(state)
    assert state.seq == len(events)
    if batch < RECENT_MAX // 2:
        # Small batches keep the index: the last command's tasks are found without a scan.
        assert state.recent_from <= state.seq
        assert len(state.recent) <= RECENT_MAX


def test_a_batch_too_big_for_the_index_covers_only_what_follows() -> None:
    events = _workload(seed=3, count=RECENT_MAX * 3)
    state = fold_all(EMPTY, events[:-5])
    assert state.recent == () and state.recent_from == state.seq + 1
    assert state.changed_since(state.seq + 1) == []
    state = fold_all(state, events[-5:])
    assert state.recent_from == len(events) - 4
    _check(state)


def test_a_state_built_without_the_fold_is_scanned() -> None:
    folded = fold_all(EMPTY, _workload(seed=4, count=200))
    by_hand = TeamState(seq=folded.seq, tasks=folded.tasks)
    assert by_hand.recent_from == NO_RECENT and by_hand.recent == ()
    assert by_hand == TeamState(
        seq=folded.seq, tasks=folded.tasks, recent=("task_1",), recent_from=1
    )
    _check(by_hand)
    # A fold on top of it indexes from its own first event on.
    more = fold_all(by_hand, _workload(seed=4, count=210)[200:])
    assert more.recent_from == folded.seq + 1
    _check(more)


def test_projection_writes_from_the_index_match_a_full_write(tmp_path: Path) -> None:
    events = _workload(seed=5, count=400)
    step, full = Projections(tmp_path / "step"), Projections(tmp_path / "full")
    state = EMPTY
    for start in range(0, len(events), 3):
        mark = state.seq
        state = fold_all(state, events[start : start + 3])
        step.write(state, since=mark + 1)
    full.write_all(fold_all(EMPTY, events))
    names = sorted(p.name for p in full.tasks_dir.iterdir() if not p.name.startswith("."))
    assert names == sorted(p.name for p in step.tasks_dir.iterdir() if not p.name.startswith("."))
    for name in names:
        assert (step.tasks_dir / name).read_bytes() == (full.tasks_dir / name).read_bytes()


def test_the_index_is_read_when_shorter_than_the_task_map() -> None:
    state = fold_all(EMPTY, _workload(seed=6, count=300))
    assert len(state.recent) < len(state.tasks)
    # An index naming one task (a lie, to see which way the answer is found) is believed when
    # it covers the seq asked for, and a scan answers below it.
    only = dataclasses.replace(state, recent=("task_2",), recent_from=state.seq - 50)
    assert [task.id for task in only.changed_since(1)] == [t.id for t in _scan(state, 1)]
    assert [task.id for task in only.changed_since(state.seq - 50)] == (
        ["task_2"] if state.tasks["task_2"].seq >= state.seq - 50 else []
    )
