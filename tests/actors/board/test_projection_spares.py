"""Projection files rewritten without making a new inode each time (``projections._Swapper``):
the replaced inode is kept as ``.<name>.spare`` and refilled at the next write under a write
lease, so a reader still sees only whole versions of the file it opened; and the projection mark
is trusted only within the boot that wrote it."""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from actors.board import projections
from actors.board.board import Board
from actors.board.bulk import NewTask
from actors.board.fold import fold_all
from actors.board.projections import Projections, verify
from actors.board.state import EMPTY
from mailboxes.journal.store import FileJournal

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="spares need renameat2 and leases")


def open_board(root: Path) -> Board:
    (root / ".team").mkdir(exist_ok=True)
    return Board(FileJournal(root / ".team"), projections=Projections(root), actor="lead")


def spare(path: Path) -> Path:
    return path.with_name(f".{path.name}.spare")


def ino(path: Path) -> int:
    return os.stat(path).st_ino


def replayed(root: Path) -> list[str]:
    state = fold_all(EMPTY, FileJournal(root / ".team").read_from(1))
    return [str(d) for d in verify(state, root)]


def test_a_rewrite_keeps_the_replaced_inode_and_the_next_one_reuses_it(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    task = tmp_path / ".tasks" / "task_1.json"
    team = tmp_path / ".team" / "team.json"
    board.create("a")
    first = ino(task)
    claimed = board.claim("task_1", "alice")
    assert spare(task).exists() and ino(spare(task)) == first  # the created file, kept
    kept, kept_team = ino(spare(task)), ino(spare(team))
    board.release("task_1", "alice", claimed.epoch)
    # The next write filled the spare and exchanged it in: no new inode.
    assert ino(task) == kept and ino(team) == kept_team
    assert replayed(tmp_path) == []


def test_a_task_added_by_a_command_is_claimed_and_completed_without_a_new_inode(
    tmp_path: Path,
) -> None:
    board = open_board(tmp_path)
    task = tmp_path / ".tasks" / "task_1.json"
    board.create("a")
    # Made with the file (a copy of it), never under its name.
    assert spare(task).read_bytes() == task.read_bytes() and ino(spare(task)) != ino(task)
    inodes = {ino(task), ino(spare(task))}
    got = board.claim("task_1", "alice")
    assert ino(task) in inodes
    board.complete("task_1", "alice", got.epoch, "done")
    assert ino(task) in inodes and not spare(task).exists()
    assert replayed(tmp_path) == []


def test_a_bulk_import_makes_no_spares(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    board.create_many([NewTask(f"t{n}") for n in range(projections.SPARES_AT_BIRTH + 1)])
    names = os.listdir(tmp_path / ".tasks")
    assert len(names) == projections.SPARES_AT_BIRTH + 1
    assert not [n for n in names if n.endswith(".spare")]


def test_a_finished_task_keeps_no_spare(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    board.create("a")
    board.create("b")
    got = board.claim("task_1", "alice")
    board.complete("task_1", "alice", got.epoch, "done")
    board.delete("task_2")
    assert sorted(p.name for p in (tmp_path / ".tasks").iterdir()) == [
        "task_1.json",
        "task_2.json",
    ]
    assert replayed(tmp_path) == []


def test_a_reader_holding_the_old_file_open_keeps_its_bytes(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    task = tmp_path / ".tasks" / "task_1.json"
    board.create("a")
    with task.open("rb") as reader:  # opened before the file is replaced twice
        before = task.read_bytes()
        claimed = board.claim("task_1", "alice")  # reader's inode is now the spare
        board.release("task_1", "alice", claimed.epoch)  # the spare is open: not reused
        assert reader.read() == before
        assert os.fstat(reader.fileno()).st_ino != ino(task)
    assert b'"status": "pending"' in task.read_bytes()
    assert replayed(tmp_path) == []


def test_an_open_while_the_spare_is_leased_waits_for_the_whole_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    board = open_board(tmp_path)
    task = tmp_path / ".tasks" / "task_1.json"
    board.create("a")
    claimed = board.claim("task_1", "alice")
    children: list[subprocess.Popen[str]] = []

    def leased(point: str, fd: int) -> None:
        assert point == "leased"
        if children:
            return
        # Opens the inode being refilled (by its spare name) and prints what it reads.
        code = f"import sys; sys.stdout.write(open({str(spare(task))!r}).read())"
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        children.append(child)
        # The child's open is held by the lease: the kernel marks the lease as being broken.
        deadline = time.monotonic() + 30
        while fcntl.fcntl(fd, fcntl.F_GETLEASE) == fcntl.F_WRLCK:
            assert child.poll() is None, "the open did not wait for the lease"
            assert time.monotonic() < deadline, "the child never opened the spare"
            time.sleep(0.01)

    monkeypatch.setattr(projections, "_hook", leased)
    board.release("task_1", "alice", claimed.epoch)
    out, _ = children[0].communicate(timeout=60)
    assert children[0].returncode == 0
    # What the waiting reader got is the new file, whole (this process was not signalled).
    assert out.encode() == task.read_bytes()
    assert '"status": "pending"' in out
    assert replayed(tmp_path) == []


def test_where_leases_are_refused_files_are_replaced_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = fcntl.fcntl

    def no_leases(fd: int, cmd: int, arg: Any = 0) -> Any:
        if cmd == fcntl.F_SETLEASE and arg == fcntl.F_WRLCK:
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))
        return real(fd, cmd, arg)

    monkeypatch.setattr(projections.fcntl, "fcntl", no_leases)
    board = open_board(tmp_path)
    task = tmp_path / ".tasks" / "task_1.json"
    board.create("a")
    claimed = board.claim("task_1", "alice")
    board.release("task_1", "alice", claimed.epoch)
    claimed = board.claim("task_1", "bob")
    assert not spare(task).exists()
    assert b'"owner": "bob"' in task.read_bytes()
    assert replayed(tmp_path) == []


def test_after_a_reboot_every_file_is_compared_whatever_the_mark_says(tmp_path: Path) -> None:
    # A power cut can keep the mark yet lose later bytes of a file written before it (an old
    # version under a time older than the mark): the first open of a new boot compares them all.
    board = open_board(tmp_path)
    board.create("a")
    board.create("b")
    task = tmp_path / ".tasks" / "task_1.json"
    lock = tmp_path / ".team" / "projections.lock"
    mark = lock.stat().st_mtime_ns
    old = mark - 10**9  # written a second before the mark
    task.write_bytes(task.read_bytes().replace(b'"a"', b'"lost"'))
    os.utime(task, ns=(old, old))
    open_board(tmp_path)  # same boot: only files newer than the mark are compared
    assert b'"lost"' in task.read_bytes()
    seq, _boot = lock.read_bytes().split()
    lock.write_bytes(b"%s %s\n" % (seq, b"0" * 32))  # written in another boot
    os.utime(lock, ns=(mark, mark))
    open_board(tmp_path)
    assert b'"lost"' not in task.read_bytes()
    assert replayed(tmp_path) == []
    # The mark now names this boot: the next open compares only what changed since.
    assert lock.read_bytes().split()[1] != b"0" * 32
    task.write_bytes(task.read_bytes().replace(b'"a"', b'"lost"'))
    old = lock.stat().st_mtime_ns - 10**9
    os.utime(task, ns=(old, old))
    open_board(tmp_path)
    assert b'"lost"' in task.read_bytes()


def test_a_spare_is_cut_only_when_the_new_bytes_are_shorter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    swapper = projections._Swapper()
    path = tmp_path / "view.json"
    assert swapper.put(path, b"x" * 40, keep=True, born=True)  # file and spare, 40 bytes each
    cuts: list[int] = []
    real = os.ftruncate

    def counting(fd: int, length: int) -> None:
        cuts.append(length)
        real(fd, length)

    monkeypatch.setattr(projections.os, "ftruncate", counting)
    for data in (b"a" * 40, b"b" * 50, b"c" * 10, b"d" * 45):
        assert swapper.put(path, data, keep=True)
        assert path.read_bytes() == data
    # The spares refilled held 40, 40, 40 and 50 bytes (two inodes take turns): only the writes
    # shorter than the spare's old bytes cut it.
    assert cuts == [10, 45]
