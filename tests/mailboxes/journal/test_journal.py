"""FileJournal behaviour beyond the shared contract: format, recovery, corruption, reopen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from mailboxes import events as ev
from mailboxes.errors import JournalCorrupt
from mailboxes.journal.frame import check_journal
from mailboxes.journal.store import FileJournal
from tests.support.fakes import FakeClock


def task(n: int, op_id: str | None = None) -> ev.EventDraft:
    body = ev.TaskCreated(task_id=f"task_{n}", subject=f"subject {n} ✓", metadata={"n": n})
    return ev.draft("task.created", "lead", body, op_id=op_id)


def fill(team: Path, count: int) -> list[ev.Event]:
    journal = FileJournal(team)
    result = journal.append(lambda seen: [task(n) for n in range(1, count + 1)], after=0)
    journal.close()
    return list(result.appended)


def journal_bytes(team: Path) -> bytes:
    return (team / "journal.jsonl").read_bytes()


def line_starts(data: bytes) -> list[int]:
    starts = [0]
    starts += [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    return starts[:-1]


def test_every_line_is_a_json_object_with_its_crc(tmp_path: Path) -> None:
    fill(tmp_path, 3)
    lines = journal_bytes(tmp_path).decode().splitlines()
    assert len(lines) == 3
    for seq, line in enumerate(lines, start=1):
        obj = json.loads(line)
        assert obj["seq"] == seq and len(obj["crc"]) == 8
        assert set(obj) == {"seq", "ts", "type", "actor", "op_id", "data", "v", "crc"}
    report = check_journal(tmp_path / "journal.jsonl")
    assert report.ok and report.lines == 3 and report.last_seq == 3


def test_reopen_continues_the_sequence_and_keeps_op_ids(tmp_path: Path) -> None:
    first = FileJournal(tmp_path)
    (original,) = first.append(lambda seen: [task(1, op_id="op-1")], after=0).appended
    first.close()
    second = FileJournal(tmp_path)
    again = second.append(lambda seen: [task(1, op_id="op-1"), task(2)], after=1).appended
    assert again[0] == original
    assert again[1].seq == 2
    assert [e.seq for e in FileJournal(tmp_path).read_from(1)] == [1, 2]


@pytest.mark.parametrize("cut", [1, 10, -20, -2, -1])
def test_torn_tail_is_truncated_and_recorded(tmp_path: Path, cut: int) -> None:
    originals = fill(tmp_path, 4)
    data = journal_bytes(tmp_path)
    last_start = line_starts(data)[-1]
    end = last_start + cut if cut > 0 else len(data) + cut
    (tmp_path / "journal.jsonl").write_bytes(data[:end])
    journal = FileJournal(tmp_path)
    events = list(journal.read_from(1))
    assert events[:3] == originals[:3]
    assert events[3].type == "journal.tail_repaired"
    assert ev.payload(events[3]) == ev.JournalTailRepaired(
        line_no=4, bytes_dropped=end - last_start
    )
    assert check_journal(tmp_path / "journal.jsonl").ok
    assert journal.append(lambda seen: [task(5)], after=4).appended[0].seq == 5


def test_bad_crc_on_the_last_line_is_repaired(tmp_path: Path) -> None:
    fill(tmp_path, 3)
    data = bytearray(journal_bytes(tmp_path))
    data[line_starts(bytes(data))[-1] + 5] ^= 0x04
    (tmp_path / "journal.jsonl").write_bytes(bytes(data))
    events = list(FileJournal(tmp_path).read_from(1))
    assert [e.type for e in events] == ["task.created"] * 2 + ["journal.tail_repaired"]


def test_a_bad_line_in_the_middle_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    fill(tmp_path, 5)
    data = bytearray(journal_bytes(tmp_path))
    data[line_starts(bytes(data))[2] + 30] ^= 0x01
    (tmp_path / "journal.jsonl").write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt, match="line 3") as info:
        FileJournal(tmp_path)
    assert info.value.line_no == 3
    assert "teamctl journal salvage" in str(info.value)
    assert journal_bytes(tmp_path) == bytes(data)
    report = check_journal(tmp_path / "journal.jsonl")
    assert not report.ok and report.problem_line == 3 and not report.repairable
    assert report.last_seq == 2 and report.lines == 5
    assert journal_bytes(tmp_path) == bytes(data)


def test_a_crc_correct_line_with_the_wrong_seq_is_not_repaired(tmp_path: Path) -> None:
    fill(tmp_path, 2)
    data = journal_bytes(tmp_path)
    duplicate = data[line_starts(data)[-1] :]
    (tmp_path / "journal.jsonl").write_bytes(data + duplicate)
    with pytest.raises(JournalCorrupt, match="seq 2 where 3 was expected"):
        FileJournal(tmp_path)
    assert journal_bytes(tmp_path) == data + duplicate


def test_check_journal_reports_a_torn_tail_without_touching_it(tmp_path: Path) -> None:
    fill(tmp_path, 3)
    torn = journal_bytes(tmp_path)[:-7]
    (tmp_path / "journal.jsonl").write_bytes(torn)
    report = check_journal(tmp_path / "journal.jsonl")
    assert not report.ok and report.repairable
    assert report.problem_line == 3 and report.last_seq == 2 and report.lines == 3
    assert journal_bytes(tmp_path) == torn


def test_a_tail_torn_by_another_writer_is_repaired_at_the_next_append(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)
    journal.append(lambda seen: [task(1)], after=0)
    with (tmp_path / "journal.jsonl").open("ab") as f:
        f.write(b'{"actor":"lead","da')  # a writer died mid-line
    assert [e.seq for e in journal.read_from(1)] == [1]  # readers stop at a torn end
    assert journal.last_seq() == 1
    seen: list[Sequence[ev.Event]] = []

    def decide(events: Sequence[ev.Event]) -> list[ev.EventDraft]:
        seen.append(events)
        return [task(2)]

    result = journal.append(decide, after=1)
    assert [e.type for e in seen[0]] == ["journal.tail_repaired"]
    assert result.appended[0].seq == 3
    assert check_journal(tmp_path / "journal.jsonl").ok


def test_readers_see_other_writers_and_refuse_later_mid_file_damage(tmp_path: Path) -> None:
    reader = FileJournal(tmp_path)
    fill(tmp_path, 3)
    assert reader.last_seq() == 3
    assert [e.seq for e in reader.read_from(2)] == [2, 3]
    data = bytearray(journal_bytes(tmp_path))
    data[line_starts(bytes(data))[1] + 3] ^= 0x10
    (tmp_path / "journal.jsonl").write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt) as info:
        list(reader.read_from(1))
    assert info.value.line_no == 2


def test_on_commit_failure_keeps_the_events_and_releases_the_lock(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)

    def broken_projection(events: Sequence[ev.Event]) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        journal.append(lambda seen: [task(1)], after=0, on_commit=broken_projection)
    assert journal.last_seq() == 1
    assert FileJournal(tmp_path).append(lambda seen: [task(2)], after=1).appended[0].seq == 2


def test_appending_from_inside_on_commit_is_an_error_not_a_deadlock(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)

    def nested(events: Sequence[ev.Event]) -> None:
        journal.append(lambda seen: [task(9)], after=0)

    with pytest.raises(RuntimeError, match="inside decide or on_commit"):
        journal.append(lambda seen: [task(1)], after=0, on_commit=nested)
    assert journal.last_seq() == 1


def test_orphan_tmp_files_of_dead_writers_are_removed_at_open(tmp_path: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    orphan = tmp_path / f".team.json.{child.stdout.strip()}.tmp"  # its writer has exited
    nameless = tmp_path / ".snapshot.tmp"
    in_flight = tmp_path / f".settings.json.{os.getpid()}.tmp"  # a live writer's
    keep = tmp_path / "settings.json"
    for path in (orphan, nameless, in_flight, keep):
        path.write_text("{half")
    FileJournal(tmp_path)
    assert not orphan.exists() and not nameless.exists()
    assert in_flight.exists() and keep.exists()


def test_clock_sets_ts_and_missing_team_dir_is_explained(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path, FakeClock(42.5))
    assert journal.append(lambda seen: [task(1)], after=0).appended[0].ts == 42.5
    with pytest.raises(FileNotFoundError, match="teamctl init"):
        FileJournal(tmp_path / "missing")


def test_an_unacknowledged_write_is_caught_up_by_the_next_append(tmp_path: Path) -> None:
    failures = ["after_write"]

    def flaky(point: str) -> None:
        if point in failures:
            failures.remove(point)
            raise OSError("simulated I/O error after the bytes hit the file")

    journal = FileJournal(tmp_path, fault=flaky)
    with pytest.raises(OSError, match="simulated"):
        journal.append(lambda seen: [task(1, op_id="op-1")], after=0)
    assert check_journal(tmp_path / "journal.jsonl").ok
    result = journal.append(lambda seen: [task(1, op_id="op-1"), task(2)], after=0)
    assert [e.seq for e in result.seen] == [1]
    assert [e.seq for e in result.appended] == [1, 2]  # op-1 was stored: not written twice
