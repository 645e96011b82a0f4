"""Waiting for the journal's locks: a writer queued for the journal lock runs the caller's
``while_queued`` (reading ahead outside the lock), and a writer whose lines are already durable
reads the group-commit mark under a *shared* sync lock, so writers checking the mark at the same
time do not pass the lock one by one (docs/RELIABILITY.md, "What is guaranteed")."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from mailboxes.events import Event, EventDraft, TaskCreated, draft
from mailboxes.journal import store
from mailboxes.journal.store import FileJournal

DEADLINE = 30.0  # seconds; only ever waited out when the behaviour is broken


def _created(n: int) -> list[EventDraft]:
    body = TaskCreated(task_id=f"task_{n}", subject=f"s{n}")
    return [draft(body.TYPE, "cli", body)]


def _constant(drafts: list[EventDraft]) -> Callable[[Sequence[Event]], list[EventDraft]]:
    return lambda _seen: drafts


@pytest.fixture
def team_dir(tmp_path: Path) -> Path:
    folder = tmp_path / ".team"
    folder.mkdir()
    return folder


def _in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Start ``work`` in a thread; the list gets its result or the exception it raised."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:  # reported by the main thread
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_while_queued_runs_when_another_writer_holds_the_lock_and_not_otherwise(
    team_dir: Path,
) -> None:
    journal = FileJournal(team_dir)
    calls: list[str] = []
    # The lock is free: nothing to wait for, so the hint is not called.
    journal.append(_constant(_created(1)), after=0, while_queued=lambda: calls.append("free"))
    assert calls == []

    queued = threading.Event()

    def note_queued() -> None:
        calls.append("queued")
        queued.set()

    holder = os.open(team_dir / store.LOCK_NAME, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # someone else holds the journal lock
    try:
        thread, out = _in_thread(
            lambda: journal.append(
                _constant(_created(2)),
                after=1,
                while_queued=note_queued,
            )
        )
        assert queued.wait(DEADLINE)
        assert not out  # called while still waiting for the lock
    finally:
        os.close(holder)  # releases it
    thread.join(DEADLINE)
    assert not thread.is_alive()
    assert calls == ["queued"]
    assert [e.seq for e in out[0].appended] == [2]  # type: ignore[attr-defined]


def test_a_writer_whose_lines_are_durable_reads_the_mark_beside_other_readers(
    team_dir: Path,
) -> None:
    journal = FileJournal(team_dir)
    journal.append(_constant(_created(1)), after=0)  # synced: the mark covers line 1
    syncs: list[int] = []
    covered = FileJournal(team_dir, fsync=lambda fd: syncs.append(fd))
    # Another writer is reading the mark right now (shared). An append that writes nothing and
    # decided on durable lines only reads the mark too: it must not wait for an exclusive lock.
    reader = os.open(team_dir / store.SYNC_NAME, os.O_RDWR)
    fcntl.flock(reader, fcntl.LOCK_SH)
    try:
        thread, out = _in_thread(lambda: covered.append(_constant([]), after=0))
        thread.join(DEADLINE)
        assert not thread.is_alive(), "a covered writer waited for the sync lock exclusive"
    finally:
        os.close(reader)
    assert [e.seq for e in out[0].seen] == [1]  # type: ignore[attr-defined]
    assert syncs == []  # covered: no fdatasync of its own


def test_a_writer_whose_lines_are_not_durable_waits_for_the_readers_then_syncs(
    team_dir: Path,
) -> None:
    syncs: list[int] = []

    def counting(fd: int) -> None:
        syncs.append(fd)
        os.fdatasync(fd)

    journal = FileJournal(team_dir, fsync=counting)
    syncs.clear()
    reader = os.open(team_dir / store.SYNC_NAME, os.O_RDWR)
    fcntl.flock(reader, fcntl.LOCK_SH)  # a writer reading the mark
    written = threading.Event()

    def hook(point: str) -> None:
        if point == "before_sync":
            written.set()

    journal._fault = hook
    try:
        thread, out = _in_thread(lambda: journal.append(_constant(_created(1)), after=0))
        assert written.wait(DEADLINE)
        # Not acknowledged while the mark is being read: the fdatasync needs the lock alone.
        assert not out and syncs == []
    finally:
        os.close(reader)
    thread.join(DEADLINE)
    assert not thread.is_alive()
    assert len(syncs) == 1
    assert [e.seq for e in out[0].appended] == [1]  # type: ignore[attr-defined]
    mark_fd = os.open(team_dir / store.SYNC_NAME, os.O_RDONLY)
    try:
        durable = store._read_mark(mark_fd).durable
    finally:
        os.close(mark_fd)
    assert durable == (team_dir / store.JOURNAL_NAME).stat().st_size


def test_a_writer_yields_the_cpu_once_after_releasing_the_journal_lock(
    team_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = FileJournal(team_dir)
    lock_free: list[bool] = []

    def yielded() -> None:
        # The next writer in line may take the lock right now: it is already released.
        probe = os.open(journal.lock_path, os.O_RDWR)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            lock_free.append(True)
        except BlockingIOError:
            lock_free.append(False)
        finally:
            os.close(probe)

    monkeypatch.setattr(store.os, "sched_yield", yielded)
    journal.append(_constant(_created(1)), after=0)
    journal.append(_constant(_created(2)), after=1)
    assert lock_free == [True, True]
    assert [e.seq for e in journal.read_from(1)] == [1, 2]
