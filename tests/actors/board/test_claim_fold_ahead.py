"""A claim folds what other writers appended *before* it holds the journal lock (while queued
for it, next in line), so the critical section folds only what was appended after that; and the state folded ahead is used only if the events under the lock are the very events
it was folded from (a rolled-back line must not be decided on)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import pytest

from actors.board import board as board_module
from actors.board import fold
from actors.board.board import Board
from actors.board.state import TeamState
from mailboxes.events import Event, TaskCreated, draft
from mailboxes.journal.base import Appended
from mailboxes.journal.memory import MemoryEventStore
from mailboxes.journal.store import FileJournal
from mailboxes.ports import Decide

DEADLINE = 30.0  # seconds; only ever waited out when the behaviour is broken


def test_a_claim_folds_the_events_of_a_writer_holding_the_lock_before_it_gets_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = tmp_path / ".team"
    team.mkdir()
    Board(FileJournal(team), actor="lead").create("first")  # seq 1
    board = Board(FileJournal(team), actor="w0")
    other = FileJournal(team)

    holding, release, folded_2 = threading.Event(), threading.Event(), threading.Event()
    folded: list[tuple[int, bool]] = []  # (seq, whether the other writer held the lock then)
    real_fold = fold.fold_all

    def recording(state: TeamState, events: Iterable[Event]) -> TeamState:
        events = list(events)
        for event in events:
            if event.seq > state.seq:
                folded.append((event.seq, holding.is_set() and not release.is_set()))
                if event.seq == 2:
                    folded_2.set()
        return real_fold(state, events)

    monkeypatch.setattr(board_module, "fold_all", recording)

    def keep_the_lock(_events: Sequence[Event]) -> None:  # on_commit runs under the lock
        holding.set()
        release.wait(DEADLINE)

    body = TaskCreated(task_id="task_2", subject="second")
    other_thread = threading.Thread(
        target=lambda: other.append(
            lambda _seen: [draft(body.TYPE, "lead", body)], after=1, on_commit=keep_the_lock
        ),
        daemon=True,
    )
    other_thread.start()
    results: list[object] = []
    try:
        assert holding.wait(DEADLINE)  # seq 2 is written and the other writer keeps the lock
        claim_thread = threading.Thread(
            target=lambda: results.append(board.claim_next("w0")), daemon=True
        )
        claim_thread.start()
        # Folded while the other writer still holds the lock: outside the critical section.
        assert folded_2.wait(DEADLINE)
        assert not results
    finally:
        release.set()
    other_thread.join(DEADLINE)
    claim_thread.join(DEADLINE)
    assert not claim_thread.is_alive()
    got = results[0]
    assert isinstance(got, board_module.ClaimResult) and got.ok
    assert got.unwrap().id == "task_1"
    assert folded.count((2, True)) == 1
    assert [seq for seq, _held in folded] == [2, 3]  # seq 2 not folded again under the lock


class RollsBackWhileQueued:
    """A store around ``MemoryEventStore`` whose append, after the caller read ahead, loses its
    last event (as a failed fdatasync's rollback does) and, optionally, stores ``instead`` in
    its place (another writer's line at the same seq)."""

    def __init__(self, inner: MemoryEventStore) -> None:
        self.inner = inner
        self.instead: Event | None = None
        self.armed = False

    def append(
        self,
        decide: Decide,
        *,
        after: int,
        on_commit: Callable[[Sequence[Event]], None] | None = None,
        while_queued: Callable[[], None] | None = None,
    ) -> Appended:
        if self.armed:
            self.armed = False
            if while_queued is not None:
                while_queued()
            stored = self.inner._events
            stored.pop()
            if self.instead is not None:
                stored.append(self.instead)
        return self.inner.append(decide, after=after, on_commit=on_commit)

    def read_from(self, seq: int) -> Iterator[Event]:
        return self.inner.read_from(seq)

    def last_seq(self) -> int:
        return self.inner.last_seq()

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("replaced", [False, True], ids=["cut", "cut-and-replaced"])
def test_a_state_folded_ahead_from_a_line_rolled_back_since_is_not_decided_on(
    replaced: bool,
) -> None:
    inner = MemoryEventStore()
    store = RollsBackWhileQueued(inner)
    lead = Board(inner, actor="lead")
    lead.create("held")  # task_1, taken by w9: not ready for w0
    assert Board(inner, actor="w9").claim_next("w9").ok
    board = Board(store, actor="w0")
    lead.create("stray")  # task_2, open to anyone; the board will read it ahead
    if replaced:
        stray = inner._events.pop()
        # task_2 again, not for w0 (a fresh board: the lead's state still holds the stray)
        Board(inner, actor="lead").create("for reviewers", role="reviewer")
        store.instead = inner._events.pop()
        inner._events.append(stray)
    store.armed = True

    got = board.claim_next("w0")

    # Decided on the events stored under the lock, not on the stray one read ahead.
    assert not got.ok and got.reason == "no ready task"
    if replaced:
        assert board.state.task("task_2").role == "reviewer"
    else:
        assert "task_2" not in board.state.tasks
    # Nothing was appended for the refused claim.
    expected = ["task.created", "task.claimed"] + (["task.created"] if replaced else [])
    assert [e.type for e in inner.read_from(1)] == expected
