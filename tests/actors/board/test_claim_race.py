"""Claims raced by many processes and threads: one winner per task per epoch, one task per owner."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from actors.board.board import Board
from actors.board.fold import fold_all
from actors.board.projections import Projections, verify
from actors.board.state import EMPTY
from mailboxes.events import Event
from mailboxes.journal.memory import MemoryEventStore
from mailboxes.journal.store import FileJournal
from mailboxes.ports import EventStore

ROUNDS = 4
DRAIN_TASKS = 24


def check_journal(events: Iterable[Event]) -> dict[str, int]:
    """The oracle for claims, from the raw events: every claim took a free, ready task at
    the next epoch by an owner holding nothing; every completion was by the current holder.
    Returns how many times each task was completed."""
    status: dict[str, str] = {}
    epoch: dict[str, int] = {}
    owner: dict[str, str | None] = {}
    holding: dict[str, str] = {}
    completed: dict[str, int] = {}
    for event in events:
        data = event.data
        tid = data.get("task_id", "")
        if event.type == "task.created":
            status[tid], epoch[tid], owner[tid] = "pending", 0, None
        elif event.type == "task.claimed":
            assert status[tid] == "pending" and owner[tid] is None, f"double claim: {event}"
            assert data["epoch"] == epoch[tid] + 1, f"epoch skipped: {event}"
            assert data["owner"] not in holding, f"owner holds two tasks: {event}"
            status[tid], epoch[tid], owner[tid] = "in_progress", data["epoch"], data["owner"]
            holding[data["owner"]] = tid
        elif event.type in ("task.released", "task.completed"):
            assert owner[tid] == data["owner"] and epoch[tid] == data["epoch"], f"unfenced {event}"
            del holding[data["owner"]]
            owner[tid] = None
            status[tid] = "pending" if event.type == "task.released" else "completed"
            if event.type == "task.completed":
                completed[tid] = completed.get(tid, 0) + 1
    return completed


def race_worker(root: str, name: str, start: Barrier, end: Barrier) -> list[Any]:
    """One process: race for task_1 every round (the winner gives it back after the round),
    then drain the backlog with claim_next + complete."""
    board = Board(
        FileJournal(Path(root) / ".team"), projections=Projections(Path(root)), actor=name
    )
    wins: list[Any] = []
    for round_no in range(ROUNDS):
        start.wait(timeout=60)
        result = board.claim("task_1", name)
        end.wait(timeout=60)
        if result.ok:
            wins.append(("round", round_no, result.epoch))
            board.release("task_1", name, result.epoch, "round over")
    start.wait(timeout=60)
    while True:
        got = board.claim_next(name)
        if not got.ok:
            break
        task = got.unwrap()
        board.complete(task.id, name, got.epoch, f"done by {name}")
        wins.append(("drain", task.id, got.epoch))
    return wins


def child_main(root: str, name: str, start: Barrier, end: Barrier, results: Any) -> None:
    """Entry point of a spawned process: report this worker's wins."""
    results.put((name, race_worker(root, name, start, end)))


def seed_board(root: Path) -> Board:
    (root / ".team").mkdir(parents=True, exist_ok=True)
    board = Board(FileJournal(root / ".team"), projections=Projections(root), actor="lead")
    board.create("contended")
    for n in range(DRAIN_TASKS):
        # A chain every fourth task, so completions unblock work mid-race.
        deps = [f"task_{n + 1}"] if n % 4 == 3 else []
        board.create(f"backlog {n}", blocked_by=deps)
    return board


def assert_race_outcome(root: Path, wins: dict[str, list[Any]]) -> None:
    per_round: dict[int, list[tuple[str, int]]] = {}
    drained: list[str] = []
    for name, items in wins.items():
        for item in items:
            if item[0] == "round":
                per_round.setdefault(item[1], []).append((name, item[2]))
            else:
                drained.append(item[1])
    assert sorted(per_round) == list(range(ROUNDS))
    for round_no, winners in per_round.items():
        assert len(winners) == 1, f"round {round_no}: {winners}"
        assert winners[0][1] == round_no + 1, "each round is the next epoch"
    events = list(FileJournal(root / ".team").read_from(1))
    completed = check_journal(events)
    expected = {f"task_{n}" for n in range(1, DRAIN_TASKS + 2)}
    assert set(completed) == expected and set(completed.values()) == {1}
    assert sorted(drained) == sorted(expected)
    assert verify(fold_all(EMPTY, events), root) == []


@pytest.mark.parametrize("processes", [2, 8, 16])
def test_processes_race_for_claims(tmp_path: Path, processes: int) -> None:
    seed_board(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(processes)
    end = ctx.Barrier(processes)
    results = ctx.Queue()
    names = [f"w{i}" for i in range(processes)]
    children = [
        ctx.Process(target=child_main, args=(str(tmp_path), name, start, end, results))
        for name in names
    ]
    for child in children:
        child.start()
    try:
        wins = dict(results.get(timeout=120) for _ in children)
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
    assert all(child.exitcode == 0 for child in children)
    assert_race_outcome(tmp_path, wins)


@pytest.mark.parametrize("kind", ["shared-memory", "file-handles"])
def test_threads_race_for_claims(tmp_path: Path, kind: str) -> None:
    threads = 8
    seed_board(tmp_path)
    memory = MemoryEventStore()
    if kind == "shared-memory":
        # Same commands against the in-memory store, seeded the same way.
        for event in FileJournal(tmp_path / ".team").read_from(1):
            memory.append(lambda seen, e=event: [_as_draft(e)], after=memory.last_seq())

    def store() -> EventStore:
        return memory if kind == "shared-memory" else FileJournal(tmp_path / ".team")

    start = threading.Barrier(threads)
    end = threading.Barrier(threads)

    def worker(name: str) -> list[Any]:
        board = Board(store(), actor=name)
        wins: list[Any] = []
        for round_no in range(ROUNDS):
            start.wait(timeout=60)
            result = board.claim("task_1", name)
            end.wait(timeout=60)
            if result.ok:
                wins.append(("round", round_no, result.epoch))
                board.release("task_1", name, result.epoch, "round over")
        start.wait(timeout=60)
        while (got := board.claim_next(name)).ok:
            board.complete(got.unwrap().id, name, got.epoch)
            wins.append(("drain", got.unwrap().id, got.epoch))
        return wins

    names = [f"t{i}" for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        wins = dict(zip(names, pool.map(worker, names), strict=True))
    per_round = [w for items in wins.values() for w in items if w[0] == "round"]
    assert sorted(w[1] for w in per_round) == list(range(ROUNDS))
    drained = [w[1] for items in wins.values() for w in items if w[0] == "drain"]
    assert sorted(drained) == sorted(f"task_{n}" for n in range(1, DRAIN_TASKS + 2))
    completed = check_journal(store().read_from(1))
    assert set(completed.values()) == {1} and len(completed) == DRAIN_TASKS + 1


def _as_draft(event: Event) -> Any:
    from mailboxes.events import EventDraft

    return EventDraft(type=event.type, actor=event.actor, data=event.data, v=event.v)


def test_one_board_shared_by_threads(tmp_path: Path) -> None:
    board = seed_board(tmp_path)
    names = [f"s{i}" for i in range(8)]
    barrier = threading.Barrier(len(names))

    def worker(name: str) -> int:
        barrier.wait(timeout=30)
        done = 0
        while (got := board.claim_next(name)).ok:
            board.complete(got.unwrap().id, name, got.epoch)
            done += 1
        return done

    with ThreadPoolExecutor(len(names)) as pool:
        total = sum(pool.map(worker, names))
    assert total == DRAIN_TASKS + 1
    completed = check_journal(FileJournal(tmp_path / ".team").read_from(1))
    assert len(completed) == DRAIN_TASKS + 1 and set(completed.values()) == {1}
    assert verify(board.state, tmp_path) == []
