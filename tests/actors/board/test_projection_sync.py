"""Coalesced projection syncs: a writer that finds the projection lock busy returns at once and
the holder covers its event; after any amount of racing the files match the journal and the mark
equals its last seq."""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from actors.board.board import Board
from actors.board.fold import fold_all
from actors.board.projections import Projections, verify
from actors.board.state import EMPTY, TeamState
from mailboxes.journal.store import FileJournal

COMMANDS = 12


def open_board(root: Path, actor: str) -> Board:
    (root / ".team").mkdir(parents=True, exist_ok=True)
    return Board(FileJournal(root / ".team"), projections=Projections(root), actor=actor)


def hammer(board: Board, name: str) -> None:
    """Create tasks and run them through claim + complete: many small commands."""
    for n in range(COMMANDS):
        board.create(f"{name} {n}", role=name)
        got = board.claim_next(name, role=name, accept=lambda t: t.role == name)
        assert got.ok, got.reason
        board.complete(got.unwrap().id, name, got.epoch, "ok")


def assert_projections_match_journal(root: Path) -> None:
    journal = FileJournal(root / ".team")
    state = fold_all(EMPTY, journal.read_from(1))
    assert verify(state, root) == []
    assert Projections(root).projected_seq() == journal.last_seq() == state.seq


def test_threads_with_their_own_journals_leave_no_drift(tmp_path: Path) -> None:
    open_board(tmp_path, "lead")
    names = [f"t{i}" for i in range(8)]
    barrier = threading.Barrier(len(names))

    def worker(name: str) -> None:
        board = open_board(tmp_path, name)
        barrier.wait(timeout=30)
        hammer(board, name)

    with ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(worker, names))
    assert_projections_match_journal(tmp_path)


def test_threads_sharing_one_board_leave_no_drift(tmp_path: Path) -> None:
    board = open_board(tmp_path, "lead")
    names = [f"s{i}" for i in range(6)]
    with ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(lambda name: hammer(board, name), names))
    assert_projections_match_journal(tmp_path)


def child_main(root: str, name: str, start: Barrier, done: Any) -> None:
    board = open_board(Path(root), name)
    start.wait(timeout=60)
    hammer(board, name)
    done.put(name)


def test_processes_leave_no_drift(tmp_path: Path) -> None:
    open_board(tmp_path, "lead")
    ctx = multiprocessing.get_context("spawn")
    names = [f"p{i}" for i in range(6)]
    start = ctx.Barrier(len(names))
    done = ctx.Queue()
    children = [
        ctx.Process(target=child_main, args=(str(tmp_path), name, start, done)) for name in names
    ]
    for child in children:
        child.start()
    try:
        finished = sorted(done.get(timeout=120) for _ in children)
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
    assert finished == sorted(names)
    assert all(child.exitcode == 0 for child in children)
    assert_projections_match_journal(tmp_path)


def test_a_busy_lock_is_not_waited_for_and_its_holder_writes_the_event(tmp_path: Path) -> None:
    board = open_board(tmp_path, "lead")
    task = board.create("a")
    holder_board = open_board(tmp_path, "other")
    holding, go = threading.Event(), threading.Event()
    calls = 0

    def slow_refresh() -> TeamState:
        # The holder's first catch-up happens before our command is appended.
        nonlocal calls
        calls += 1
        state = holder_board.refresh()
        if calls == 1:
            holding.set()
            assert go.wait(timeout=30)
        return state

    holder = threading.Thread(target=Projections(tmp_path).sync, args=(slow_refresh,))
    holder.start()
    try:
        assert holding.wait(timeout=30)
        with ThreadPoolExecutor(1) as pool:
            # Returns while the other writer holds the lock (it would time out if it waited).
            claimed = pool.submit(board.claim, task.id, "w1").result(timeout=10)
        assert claimed.ok
        state = fold_all(EMPTY, FileJournal(tmp_path / ".team").read_from(1))
        assert [d.kind for d in verify(state, tmp_path)] == ["stale", "stale"]
    finally:
        go.set()
        holder.join(timeout=30)
    assert not holder.is_alive()
    assert_projections_match_journal(tmp_path)
