"""Property: any prefix or single bit flip of a valid journal is either recovered to a prefix of
the original events (a torn tail, recorded) or refused with ``JournalCorrupt`` — never skipped."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mailboxes import events as ev
from mailboxes.errors import JournalCorrupt
from mailboxes.journal.frame import check_journal
from mailboxes.journal.store import FileJournal


@cache
def original() -> tuple[bytes, tuple[ev.Event, ...]]:
    """A small journal with varied events (unicode, nesting, nulls, op_ids)."""
    drafts = [
        ev.draft("team.created", "cli", ev.TeamCreated(name="crew ✓")),
        ev.draft(
            "task.created",
            "lead",
            ev.TaskCreated(task_id="task_1", subject="a\nb", metadata={"x": [1, {"y": None}]}),
            op_id="op-1",
        ),
        ev.draft("task.claimed", "ann", ev.TaskClaimed(task_id="task_1", owner="ann", epoch=1)),
        ev.draft("cron.fired", "scheduler", ev.CronFired(cron_id="c1", slot="2026-01-01T00:00")),
        ev.draft("task.completed", "ann", ev.TaskCompleted(task_id="task_1", owner="ann", epoch=1)),
    ]
    with tempfile.TemporaryDirectory() as folder:
        journal = FileJournal(Path(folder))
        stored = journal.append(lambda seen: drafts, after=0).appended
        return (Path(folder) / "journal.jsonl").read_bytes(), tuple(stored)


def outcome(data: bytes) -> tuple[list[ev.Event], bool] | None:
    """Open a journal holding ``data``: (events, repaired) or None if refused."""
    with tempfile.TemporaryDirectory() as folder:
        team = Path(folder)
        (team / "journal.jsonl").write_bytes(data)
        try:
            journal = FileJournal(team)
        except JournalCorrupt:
            report = check_journal(team / "journal.jsonl")
            assert not report.ok and not report.repairable  # the checker agrees
            assert (team / "journal.jsonl").read_bytes() == data  # refusal changes nothing
            return None
        events = list(journal.read_from(1))
        assert check_journal(team / "journal.jsonl").ok
    repaired = bool(events) and events[-1].type == "journal.tail_repaired"
    if repaired:
        tail = ev.payload(events[-1])
        assert isinstance(tail, ev.JournalTailRepaired)
        assert tail.line_no == len(events)  # the dropped line was the one after the kept ones
        events = events[:-1]
    return events, repaired


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_prefix_recovers_to_a_prefix(data: st.DataObject) -> None:
    raw, stored = original()
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)))
    result = outcome(raw[:cut])
    assert result is not None  # a prefix is never corruption
    events, repaired = result
    complete_lines = raw[:cut].count(b"\n")
    assert events == list(stored[:complete_lines])
    assert repaired == (cut > 0 and raw[cut - 1 : cut] != b"\n")


def check_flip(index: int, bit: int) -> None:
    raw, stored = original()
    flipped = bytearray(raw)
    flipped[index % len(raw)] ^= 1 << bit
    result = outcome(bytes(flipped))
    if result is None:
        return
    events, repaired = result
    assert repaired  # a change that was neither repaired nor refused would be a silent skip
    assert events == list(stored[: len(events)])
    assert len(events) >= len(stored) - 2  # only the last line (or two merged into one) is lost
    last_line_start = raw.rstrip(b"\n").rfind(b"\n") + 1
    second_last_start = raw[: last_line_start - 1].rfind(b"\n") + 1
    assert index % len(raw) >= second_last_start  # only damage at the end is ever repaired


FLIPS = st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=7))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FLIPS)
def test_any_bit_flip_is_repaired_as_a_tail_or_refused(flip: tuple[int, int]) -> None:
    check_flip(*flip)


@pytest.mark.deep
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FLIPS)
def test_any_bit_flip_deep(flip: tuple[int, int]) -> None:
    check_flip(*flip)


def last_two_lines() -> range:
    raw, _ = original()
    return range(raw[: raw.rstrip(b"\n").rfind(b"\n")].rfind(b"\n") + 1, len(raw))


def test_every_byte_of_the_last_two_lines() -> None:
    """Where repair is possible, every byte: each flip there is repaired or refused."""
    for index in last_two_lines():
        check_flip(index, index % 8)


@pytest.mark.deep
def test_every_bit_of_the_last_two_lines() -> None:
    for index in last_two_lines():
        for bit in range(8):
            check_flip(index, bit)
