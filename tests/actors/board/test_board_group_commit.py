"""A board lets its process's other threads append while one append waits for its fdatasync
(docs/RELIABILITY.md: group commit), so appends from one process's threads share fdatasyncs; a
failed fdatasync still rolls the board's state back."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from actors.board.board import Board
from mailboxes.errors import WriteFailed
from mailboxes.journal.store import FileJournal


class Syncs:
    """An ``Fsync`` that counts its calls and fails while ``failing`` is set."""

    def __init__(self) -> None:
        self.calls = 0
        self.failing = False

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.failing:
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)


def test_another_thread_appends_while_one_waits_for_its_fdatasync_and_shares_it(
    tmp_path: Path,
) -> None:
    syncs = Syncs()
    boards: list[Board] = []
    other: list[str] = []
    first = [True]

    def hook(point: str) -> None:
        # The first append, written and about to wait for durability: another thread of this
        # process adds a task through the same board, and must get through meanwhile.
        if point == "before_sync" and first[0]:
            first[0] = False
            thread = threading.Thread(target=lambda: other.append(boards[0].create("b").id))
            thread.start()
            thread.join(timeout=30)
            assert not thread.is_alive(), "the board stayed locked while its append was syncing"

    journal = FileJournal(tmp_path, fsync=syncs, fault=hook)
    board = Board(journal, actor="lead")
    boards.append(board)
    syncs.calls = 0
    a = board.create("a")
    assert other == ["task_2"] and a.id == "task_1"
    # The second append's one fdatasync covered the first's line too.
    assert syncs.calls == 1
    assert [t.subject for t in board.list()] == ["a", "b"]
    assert [e.seq for e in FileJournal(tmp_path).read_from(1)] == [1, 2]


def test_a_failed_fdatasync_after_the_board_let_go_rolls_its_state_back(tmp_path: Path) -> None:
    syncs = Syncs()
    journal = FileJournal(tmp_path, fsync=syncs)
    board = Board(journal, actor="lead")
    board.create("kept")
    syncs.failing = True
    with pytest.raises(WriteFailed):
        board.create("lost")
    syncs.failing = False
    board.refresh()
    assert [t.subject for t in board.list()] == ["kept"]
    board.create("next")
    assert [t.subject for t in board.list()] == ["kept", "next"]
    assert [t.subject for t in Board(FileJournal(tmp_path), actor="w1").list()] == ["kept", "next"]
