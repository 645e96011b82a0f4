"""A read remembers only the lines near the end of the journal (``RECENT_BYTES``): a long replay
does not fill the decoded-line cache with lines nobody reads again, while the recent lines are
still decoded once and reused by the next read or catch-up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mailboxes.events import Event, TaskCreated, draft
from mailboxes.journal import store
from mailboxes.journal.store import JOURNAL_NAME, FileJournal


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


def test_a_long_read_remembers_only_the_lines_near_the_end(
    tmp_path: Path, decoded: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / ".team"
    folder.mkdir()
    writer = FileJournal(folder)
    bodies = [TaskCreated(task_id=f"task_{n}", subject=f"s{n}") for n in range(1, 41)]
    writer.append(lambda _seen: [draft(b.TYPE, "cli", b) for b in bodies], after=0)
    writer.close()
    lines = (folder / JOURNAL_NAME).read_bytes().splitlines(keepends=True)
    tail = sum(len(line) for line in lines[-5:])  # the last five lines
    monkeypatch.setattr(store, "RECENT_BYTES", tail)

    decoded.clear()
    reader = FileJournal(folder)  # its catch-up validates every line, remembers the last five
    assert decoded == list(range(1, 41))
    assert sorted(e.seq for _raw, e in reader._decoded.values()) == [36, 37, 38, 39, 40]
    decoded.clear()
    assert [e.seq for e in reader.read_from(1)] == list(range(1, 41))
    assert decoded == list(range(1, 36))
    assert sorted(e.seq for _raw, e in reader._decoded.values()) == [36, 37, 38, 39, 40]
    decoded.clear()
    assert [e.seq for e in reader.read_from(30)] == list(range(30, 41))
    assert decoded == list(range(30, 36))  # the recent ones were not decoded again
