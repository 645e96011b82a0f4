"""The journal's index checkpoint (``.team/journal.idx``): opening a long journal reads only the
lines after it, and a checkpoint that does not fit the file is ignored, never trusted."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from mailboxes.events import Event, EventDraft, TaskCreated, draft
from mailboxes.journal import frame, store
from mailboxes.journal.store import INDEX_NAME, JOURNAL_NAME, FileJournal


def _drafts(start: int, count: int, *, op: bool = False) -> list[EventDraft]:
    return [
        draft(
            "task.created",
            "cli",
            TaskCreated(task_id=f"task_{n}", subject=f"s{n}"),
            f"op-{n}" if op else None,
        )
        for n in range(start, start + count)
    ]


def _append(journal: FileJournal, drafts: list[EventDraft]) -> None:
    def decide(_seen: Sequence[Event]) -> list[EventDraft]:
        return drafts

    journal.append(decide, after=journal.last_seq())


@pytest.fixture
def team_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(store, "INDEX_EVERY", 10)
    folder = tmp_path / ".team"
    folder.mkdir()
    return folder


def _decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the seq of every line ``FileJournal`` decodes from now on."""
    seen: list[int] = []
    real = frame.decode_event

    def counting(raw: bytes, seq: int) -> Event:
        seen.append(seq)
        return real(raw, seq)

    monkeypatch.setattr(store, "decode_event", counting)
    return seen


def test_a_checkpoint_is_written_and_opening_reads_only_the_tail(
    team_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = FileJournal(team_dir)
    _append(journal, _drafts(1, 25, op=True))
    _append(journal, _drafts(26, 3))
    assert (team_dir / INDEX_NAME).exists()
    decoded = _decoded(monkeypatch)
    reopened = FileJournal(team_dir)
    # The checkpoint covers 25 events: opening decodes its first and last line (the check)
    # and the three lines after it, not all 28.
    assert sorted(set(decoded)) == [1, 25, 26, 27, 28]
    assert reopened.last_seq() == 28
    assert [e.seq for e in reopened.read_from(1)] == list(range(1, 29))
    assert [e.seq for e in reopened.read_from(24)] == list(range(24, 29))
    # The op_id index came from the checkpoint: a retried op is found, nothing is re-appended.
    _append(reopened, _drafts(7, 1, op=True))
    assert reopened.last_seq() == 28
    read_only = FileJournal(team_dir, read_only=True)
    assert read_only.last_seq() == 28


@pytest.mark.parametrize(
    "damage",
    ["checksum", "truncated_journal", "rewritten_last_line", "garbage", "other_byteorder"],
)
def test_a_checkpoint_that_does_not_fit_is_ignored(
    team_dir: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    journal = FileJournal(team_dir)
    _append(journal, _drafts(1, 12))
    index = team_dir / INDEX_NAME
    data = index.read_bytes()
    head, _, body = data.partition(b"\n")
    header = json.loads(head)
    path = team_dir / JOURNAL_NAME
    if damage == "checksum":
        index.write_bytes(head + b"\n" + body[:-1] + b"X")
    elif damage == "truncated_journal":
        # The journal now ends before the checkpoint (as after a salvage): the lines it had
        # are gone, so every line must be read again.
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:5]))
    elif damage == "rewritten_last_line":
        # Same length, other content: the last line the checkpoint covers was replaced by a
        # well-framed line of the same seq (e.g. another team's journal copied in).
        lines = path.read_bytes().splitlines(keepends=True)
        replacement = _other_line(12, len(lines[11]))
        lines[11] = replacement
        path.write_bytes(b"".join(lines))
    elif damage == "garbage":
        index.write_bytes(b"not an index")
    else:
        header["byteorder"] = "big" if header["byteorder"] == "little" else "little"
        index.write_bytes(json.dumps(header).encode() + b"\n" + body)
    with caplog.at_level(logging.INFO, logger="mailboxes.journal.store"):
        reopened = FileJournal(team_dir)
    assert "journal index" in caplog.text and "ignored" in caplog.text
    expected = 5 if damage == "truncated_journal" else 12
    assert reopened.last_seq() == expected
    assert [e.seq for e in reopened.read_from(1)] == list(range(1, expected + 1))


def _other_line(seq: int, length: int) -> bytes:
    """A well-framed event line of ``seq`` whose bytes differ from the journal's (same length
    when possible, so only the content check can tell)."""
    for pad in range(0, 400):
        event = Event(
            seq=seq,
            ts=1.0,
            type="task.created",
            actor="x" * (1 + pad),
            op_id=None,
            v=1,
            data={"task_id": f"task_{seq}", "subject": "other"},
        )
        line = frame.encode(event)
        if len(line) >= length:
            return line
    raise AssertionError("no line long enough")


def test_the_checkpoint_moves_forward_as_the_journal_grows(team_dir: Path) -> None:
    journal = FileJournal(team_dir)
    _append(journal, _drafts(1, 12))
    first = json.loads((team_dir / INDEX_NAME).read_bytes().partition(b"\n")[0])["seq"]
    _append(journal, _drafts(13, 4))  # 16: fewer than INDEX_EVERY since the checkpoint
    assert json.loads((team_dir / INDEX_NAME).read_bytes().partition(b"\n")[0])["seq"] == first
    _append(journal, _drafts(17, 8))  # 24
    assert json.loads((team_dir / INDEX_NAME).read_bytes().partition(b"\n")[0])["seq"] == 24
