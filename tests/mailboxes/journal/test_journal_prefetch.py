"""A journal decodes each line once: lines decoded by a read, by a writer next in line for the lock
or by a catch-up are not decoded again by the catch-up under the lock or by later reads, and are
reused only while their bytes on disk are unchanged."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from mailboxes.events import Event, EventDraft, TaskCreated, draft
from mailboxes.journal import store
from mailboxes.journal.store import JOURNAL_NAME, FileJournal


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


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The seqs ``decode_event`` is called for inside the store."""
    calls: list[int] = []
    real = store.decode_event

    def counting(raw: bytes, seq: int) -> Event:
        calls.append(seq)
        return real(raw, seq)

    monkeypatch.setattr(store, "decode_event", counting)
    yield calls


def test_the_catch_up_reuses_lines_a_read_already_decoded(
    team_dir: Path, decoded: list[int]
) -> None:
    mine, other = FileJournal(team_dir), FileJournal(team_dir)
    for n in range(1, 4):
        other.append(_constant(_created(n)), after=n - 1)
    assert [e.seq for e in mine.read_from(1)] == [1, 2, 3]
    decoded.clear()
    done = mine.append(_constant(_created(4)), after=0)
    assert [e.seq for e in done.seen] == [1, 2, 3]
    assert [e.data["task_id"] for e in done.seen] == ["task_1", "task_2", "task_3"]
    assert decoded == []  # nothing decoded twice under the lock


def test_reads_after_a_catch_up_reuse_its_decoding_but_still_check_the_bytes(
    team_dir: Path, decoded: list[int]
) -> None:
    mine, other = FileJournal(team_dir), FileJournal(team_dir)
    for n in range(1, 4):
        other.append(_constant(_created(n)), after=n - 1)
    mine.append(_constant(_created(4)), after=3)  # its catch-up decodes seqs 1-3
    decoded.clear()
    assert [e.seq for e in mine.read_from(1)] == [1, 2, 3, 4]
    assert [e.seq for e in mine.read_from(2)] == [2, 3, 4]
    assert decoded == [4]  # only its own line, once
    # a line changed on disk is not served from memory
    path = team_dir / JOURNAL_NAME
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"subject":"s2"', b'"subject":"s9"', 1))
    with pytest.raises(store.JournalCorrupt):
        list(mine.read_from(1))


def test_a_line_rewritten_since_it_was_read_is_decoded_again(
    team_dir: Path, decoded: list[int]
) -> None:
    mine = FileJournal(team_dir)
    mine.append(_constant(_created(1)), after=0)
    other = FileJournal(team_dir)
    other.append(_constant(_created(2)), after=1)
    assert [e.data["task_id"] for e in mine.read_from(2)] == ["task_2"]  # remembered
    # seq 2 is cut off (as a failed fsync's roll-back does) and another line takes its place
    path = team_dir / JOURNAL_NAME
    os.truncate(path, len(path.read_bytes().splitlines(keepends=True)[0]))
    FileJournal(team_dir).append(_constant(_created(7)), after=1)
    decoded.clear()
    done = mine.append(_constant(_created(3)), after=1)
    assert [e.data["task_id"] for e in done.seen] == ["task_7"]
    assert decoded == [2]
    assert [e.data["task_id"] for e in FileJournal(team_dir).read_from(1)] == [
        "task_1",
        "task_7",
        "task_3",
    ]


def test_a_writer_next_in_line_decodes_the_others_lines_before_it_gets_the_lock(
    team_dir: Path, decoded: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, other = FileJournal(team_dir), FileJournal(team_dir)
    queued = threading.Event()
    prefetch = mine._prefetch

    def prefetch_then_signal() -> None:
        prefetch()
        queued.set()

    monkeypatch.setattr(mine, "_prefetch", prefetch_then_signal)
    other.append(_constant(_created(1)), after=0)
    other.append(_constant(_created(2)), after=1)
    holder = os.open(team_dir / store.LOCK_NAME, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # someone else holds the journal lock
    result: list[tuple[int, ...]] = []
    errors: list[BaseException] = []

    def append() -> None:
        try:
            done = mine.append(_constant(_created(3)), after=0)
            result.append(tuple(e.seq for e in done.seen))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    writer = threading.Thread(target=append)
    writer.start()
    try:
        assert queued.wait(30)
        assert sorted(decoded) == [1, 2]  # decoded while queued, without the lock
        assert not result  # ... and still waiting for it
    finally:
        os.close(holder)  # releases the lock
        writer.join(30)
    assert not errors
    assert result == [(1, 2)]
    assert sorted(decoded) == [1, 2]  # not decoded again under the lock


def _counting_decode(journal: FileJournal, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The line numbers ``journal`` checks one by one (``_decode``: a hit or a decoding)."""
    checked: list[int] = []
    real = journal._decode

    def counting(offset: int, raw: bytes, line_no: int, remember: bool = True) -> Event:
        checked.append(line_no)
        return real(offset, raw, line_no, remember)

    monkeypatch.setattr(journal, "_decode", counting)
    return checked


def test_lines_read_ahead_are_indexed_as_one_block_under_the_lock(
    team_dir: Path, decoded: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, other = FileJournal(team_dir), FileJournal(team_dir)
    for n in range(1, 6):
        other.append(_constant(_created(n)), after=n - 1)
    assert [e.seq for e in mine.read_from(1)] == [1, 2, 3, 4, 5]  # as while queued
    other.append(_constant(_created(6)), after=5)  # written by the holder after that read
    decoded.clear()
    checked = _counting_decode(mine, monkeypatch)
    done = mine.append(_constant(_created(7)), after=0)
    assert [e.data["task_id"] for e in done.seen] == [f"task_{n}" for n in range(1, 7)]
    assert checked == [6]  # seqs 1-5 adopted with one comparison of their bytes
    assert decoded == [6]
    assert [e.seq for e in FileJournal(team_dir).read_from(1)] == list(range(1, 8))


def test_a_block_rewritten_since_it_was_read_is_decoded_again(
    team_dir: Path, decoded: list[int]
) -> None:
    mine = FileJournal(team_dir)
    mine.append(_constant(_created(1)), after=0)
    other = FileJournal(team_dir)
    for n in range(2, 5):
        other.append(_constant(_created(n)), after=n - 1)
    assert [e.data["task_id"] for e in mine.read_from(2)] == ["task_2", "task_3", "task_4"]
    # seqs 2-4 are cut off (a failed fsync's roll-back) and lines of the same length, of other
    # tasks, take their place: the remembered block no longer matches the file
    path = team_dir / JOURNAL_NAME
    os.truncate(path, len(path.read_bytes().splitlines(keepends=True)[0]))
    again = FileJournal(team_dir)
    for n in range(7, 10):
        again.append(_constant(_created(n)), after=n - 6)
    decoded.clear()
    done = mine.append(_constant(_created(5)), after=1)
    assert [e.data["task_id"] for e in done.seen] == ["task_7", "task_8", "task_9"]
    assert decoded == [2, 3, 4]
