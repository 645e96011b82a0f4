"""FileJournal across processes: racing appenders and SIGKILL at each step of an append."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from mailboxes import events as ev
from mailboxes.journal.frame import check_journal
from mailboxes.journal.store import FileJournal

SPAWN = multiprocessing.get_context("spawn")


def task(n: int, op_id: str | None = None) -> ev.EventDraft:
    body = ev.TaskCreated(task_id=f"task_{n}", subject=f"subject {n}")
    return ev.draft("task.created", "lead", body, op_id=op_id)


def race_worker(team: str, rounds: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    """Append ``rounds`` times, each deciding task_<n> from the caught-up view."""
    journal = FileJournal(Path(team))
    barrier.wait(timeout=60)
    after = journal.last_seq()
    for _ in range(rounds):

        def decide(seen: Sequence[ev.Event], known: int = after) -> list[ev.EventDraft]:
            return [task(known + len(seen) + 1, op_id=f"{os.getpid()}-{known}")]

        after = journal.append(decide, after=after).appended[-1].seq
    journal.close()


def test_processes_appending_concurrently_are_linearizable(tmp_path: Path) -> None:
    procs, rounds = 4, 20
    barrier = SPAWN.Barrier(procs)
    workers = [
        SPAWN.Process(target=race_worker, args=(str(tmp_path), rounds, barrier))
        for _ in range(procs)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * procs
    stored = list(FileJournal(tmp_path).read_from(1))
    total = procs * rounds
    assert [e.seq for e in stored] == list(range(1, total + 1))
    assert [e.data["task_id"] for e in stored] == [f"task_{n}" for n in range(1, total + 1)]
    assert check_journal(tmp_path / "journal.jsonl").ok


def crash_worker(team: str, point: str, crash_on: int, acks: Connection) -> None:
    """Append ops op-0, op-1, …; report each acknowledged one; SIGKILL self at ``point`` during
    append number ``crash_on``."""
    attempt = 0

    def fault(where: str) -> None:
        if where == point and attempt == crash_on:
            os.kill(os.getpid(), signal.SIGKILL)

    journal = FileJournal(Path(team), fault=fault)
    after = journal.last_seq()
    written: list[ev.Event] = []
    while True:
        op_ids = [f"op-{attempt}-a", f"op-{attempt}-b"]
        acks.send(("attempt", op_ids))

        def decide(seen: Sequence[ev.Event], ids: list[str] = op_ids) -> list[ev.EventDraft]:
            return [task(0, op_id=i) for i in ids]

        result = journal.append(decide, after=after, on_commit=written.extend)
        after = result.appended[-1].seq
        acks.send(("ack", op_ids))  # synchronous: in the pipe before the next append starts
        attempt += 1


@pytest.mark.parametrize("point", ["after_write", "after_fsync", "after_commit"])
def test_sigkill_at_each_step_of_an_append_loses_nothing_acknowledged(
    tmp_path: Path, point: str
) -> None:
    FileJournal(tmp_path).append(lambda seen: [task(1, op_id="before")], after=0)
    receive, send = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(target=crash_worker, args=(str(tmp_path), point, 3, send))
    child.start()
    send.close()
    child.join(timeout=60)
    assert child.exitcode == -signal.SIGKILL
    attempted: set[str] = {"before"}
    acknowledged: set[str] = {"before"}
    while True:
        try:
            kind, op_ids = receive.recv()  # EOF once the dead child's end is drained
        except EOFError:
            break
        (attempted if kind == "attempt" else acknowledged).update(op_ids)
    assert len(acknowledged) == 1 + 3 * 2  # three appends of two ops returned before the kill

    report = check_journal(tmp_path / "journal.jsonl")
    assert report.ok, report
    stored = list(FileJournal(tmp_path).read_from(1))
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    stored_ops = {e.op_id for e in stored if e.op_id is not None}
    assert acknowledged <= stored_ops  # every acknowledged op is there
    assert stored_ops <= attempted  # nothing that was not attempted
    # The killed append wrote its lines before each crash point: they survive (unacknowledged).
    assert {"op-3-a", "op-3-b"} <= stored_ops
    # Appends continue after the crash: the kernel released the dead child's flock.
    follow = FileJournal(tmp_path).append(lambda seen: [task(2, op_id="op-3-a")], after=0)
    assert follow.appended[0].op_id == "op-3-a" and follow.appended[0].seq < len(stored) + 1
