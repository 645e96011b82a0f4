"""The look for hand-edited task files started before a board loads its snapshot
(``Projections.prefetch``, a ``find`` process): it repairs what the in-process scan repairs, and
its answer is used only when it is sure to be complete, else the board looks itself."""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
from pathlib import Path

import pytest

from actors.board import projections
from actors.board.board import Board
from actors.board.fold import fold_all
from actors.board.projections import Projections, verify
from actors.board.state import EMPTY
from mailboxes import events as ev
from mailboxes.journal.store import FileJournal
from tests.actors.cli.cli_support import git_repo, ok, run


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[set[str] | None]:
    """Prefetch for any folder size; records each scan's answer (None: not used)."""
    monkeypatch.setattr(projections, "PREFETCH_MIN_DIR_BYTES", 0)
    answers: list[set[str] | None] = []
    result = projections._FileScan.result

    def recorded(self: projections._FileScan, since: int | None) -> set[str] | None:
        answers.append(result(self, since))
        return answers[-1]

    monkeypatch.setattr(projections._FileScan, "result", recorded)
    return answers


def open_board(root: Path, *, prefetch: bool = True) -> Board:
    team = root / ".team"
    team.mkdir(exist_ok=True)
    proj = Projections(root)
    if prefetch:
        proj.prefetch()
    return Board(FileJournal(team), projections=proj, actor="lead")


def replayed(root: Path) -> list[str]:
    state = fold_all(EMPTY, FileJournal(root / ".team").read_from(1))
    return [str(d) for d in verify(state, root)]


def fake_find(folder: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """A ``find`` earlier on PATH that runs ``script`` (sh) instead."""
    folder.mkdir()
    path = folder / "find"
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_the_scan_finds_every_kind_of_drift(
    tmp_path: Path, scans: list[set[str] | None], caplog: pytest.LogCaptureFixture
) -> None:
    board = open_board(tmp_path)
    for name in "abcde":
        board.create(name)
    tasks = tmp_path / ".tasks"
    (tasks / "task_1.json").write_text('{"id": "task_1", "status": ')  # malformed
    (tasks / "task_2.json").unlink()  # missing
    edited = json.loads((tasks / "task_3.json").read_text())
    edited["owner"] = "mallory"
    (tasks / "task_3.json").write_text(json.dumps(edited))  # hand-edited in place
    (tasks / "task_9.json").write_text("{}")  # not in the journal
    # What a power cut can leave of a recent write: empty, its time before the mark's.
    before = (tasks / "task_4.json").stat()
    (tasks / "task_4.json").write_bytes(b"")
    os.utime(tasks / "task_4.json", ns=(before.st_atime_ns, before.st_mtime_ns))
    (tasks / ".task_5.json.4242.tmp").write_text("{")  # a writer died mid-write
    scans.clear()

    with caplog.at_level(logging.INFO, logger="actors.board.projections"):
        open_board(tmp_path)
    assert len(scans) == 1 and scans[0] is not None  # the scan's answer was used
    assert replayed(tmp_path) == []
    assert not (tasks / "task_9.json").exists()
    assert not (tasks / ".task_5.json.4242.tmp").exists()
    repaired = sorted(r.getMessage().split(".tasks/")[1].split(":")[0] for r in caplog.records)
    assert repaired == ["task_1.json", "task_2.json", "task_3.json", "task_4.json", "task_9.json"]


def test_an_edit_as_old_as_the_mark_is_found(tmp_path: Path, scans: list[set[str] | None]) -> None:
    # The scan's reference is the mark's time minus 1 ns (find's -newermt is strictly newer).
    board = open_board(tmp_path)
    board.create("a")
    board.create("b")
    path = tmp_path / ".tasks" / "task_1.json"
    mark = (tmp_path / ".team" / "projections.lock").stat().st_mtime_ns
    path.write_text(path.read_text().replace('"a"', '"hacked"'))
    os.utime(path, ns=(mark, mark))
    scans.clear()
    open_board(tmp_path)
    found = scans[0]
    assert found is not None and "task_1.json" in found  # (task_2's may be as old as the mark)
    assert replayed(tmp_path) == []


def test_an_open_that_repairs_nothing_leaves_the_mark_alone(
    tmp_path: Path, scans: list[set[str] | None]
) -> None:
    # So a file edited while an open scanned (after the scan looked at it) is still newer than
    # the mark at the next open.
    board = open_board(tmp_path)
    board.create("a")
    lock = tmp_path / ".team" / "projections.lock"
    before = lock.stat().st_mtime_ns
    open_board(tmp_path)
    open_board(tmp_path, prefetch=False)
    assert lock.stat().st_mtime_ns == before
    path = tmp_path / ".tasks" / "task_1.json"
    path.write_text(path.read_text().replace('"a"', '"hacked"'))
    os.utime(path, ns=(before, before))
    open_board(tmp_path)
    assert replayed(tmp_path) == []
    assert lock.stat().st_mtime_ns > before  # a repair moves it


def test_a_find_that_does_not_list_the_mark_is_not_trusted(
    tmp_path: Path, scans: list[set[str] | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One that lists nothing at all (as one rounding the reference up would miss the mark).
    board = open_board(tmp_path)
    board.create("a")
    path = tmp_path / ".tasks" / "task_1.json"
    path.write_text(path.read_text().replace('"a"', '"hacked"'))
    fake_find(tmp_path / "bin", monkeypatch, "exit 0")
    scans.clear()
    open_board(tmp_path)
    assert scans == [None]
    assert replayed(tmp_path) == []


def test_a_failed_or_missing_find_leaves_the_look_to_the_board(
    tmp_path: Path, scans: list[set[str] | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    board = open_board(tmp_path)
    board.create("a")
    path = tmp_path / ".tasks" / "task_1.json"
    # Lists the mark (a valid answer otherwise) but exits 1, as after a file it could not stat.
    fake_find(tmp_path / "bin", monkeypatch, 'printf "%s\\0" "$1"; exit 1')
    path.write_text(path.read_text().replace('"a"', '"hacked"'))
    scans.clear()
    open_board(tmp_path)
    assert scans == [None]
    assert replayed(tmp_path) == []

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no find at all
    path.write_text(path.read_text().replace('"a"', '"hacked"'))
    scans.clear()
    open_board(tmp_path)
    assert scans == []  # never started
    assert replayed(tmp_path) == []


def test_a_mark_moved_during_the_scan_voids_it(
    tmp_path: Path, scans: list[set[str] | None]
) -> None:
    board = open_board(tmp_path)
    board.create("a")
    proj = Projections(tmp_path)
    proj.prefetch()
    # Another process writes projections (and moves the mark) after the scan began...
    other = Board(FileJournal(tmp_path / ".team"), projections=Projections(tmp_path))
    other.create("b")
    # ...and someone edits a file meanwhile.
    path = tmp_path / ".tasks" / "task_1.json"
    path.write_text(path.read_text().replace('"a"', '"hacked"'))
    scans.clear()
    Board(FileJournal(tmp_path / ".team"), projections=proj)
    assert scans == [None]
    assert replayed(tmp_path) == []


def test_a_prefetch_not_used_is_reaped(tmp_path: Path, scans: list[set[str] | None]) -> None:
    open_board(tmp_path).create("a")
    proj = Projections(tmp_path)
    proj.prefetch()
    scan = proj._scan
    assert scan is not None
    pid = scan._pid
    assert pid is not None
    proj.drop_prefetch()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie left


def test_a_stale_file_behind_the_mark_is_rewritten_with_the_scan(
    tmp_path: Path, scans: list[set[str] | None]
) -> None:
    # A writer died between its append and its projection write: the mark is behind, every
    # file is compared, the scan is not needed.
    board = open_board(tmp_path)
    board.create("a")
    journal = FileJournal(tmp_path / ".team")
    claim = ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1)
    journal.append(lambda seen: [ev.draft(claim.TYPE, "w1", claim)], after=journal.last_seq())
    scans.clear()
    assert open_board(tmp_path).get("task_1").owner == "w1"
    assert scans == []  # never asked
    assert replayed(tmp_path) == []


def test_a_read_only_command_repairs_a_hand_edit_with_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scans: list[set[str] | None]
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    ok(["task", "add", "a"])
    path = root / ".tasks" / "task_1.json"
    original = path.read_text()
    path.write_text(original.replace('"subject": "a"', '"subject": "hacked"'))
    scans.clear()
    result = run(["tasks", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)[0]["subject"] == "a"
    assert "task_1.json" in result.stderr
    assert scans and scans[0] is not None and "task_1.json" in scans[0]
    assert path.read_text() == original


def test_a_scan_whose_exit_status_is_lost_is_not_trusted(
    tmp_path: Path, scans: list[set[str] | None]
) -> None:
    # With SIGCHLD ignored the kernel reaps find itself: no exit status, so no proof.
    board = open_board(tmp_path)
    board.create("a")
    path = tmp_path / ".tasks" / "task_1.json"
    path.write_text(path.read_text().replace('"a"', '"hacked"'))
    scans.clear()
    before = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        open_board(tmp_path)
    finally:
        signal.signal(signal.SIGCHLD, before)
    assert scans == [None]
    assert replayed(tmp_path) == []
