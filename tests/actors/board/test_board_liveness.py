"""The owner_dead rule with real leases: a SIGKILLed holder's claim is released, once."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from actors.board.board import Board
from actors.board.projections import Projections
from actors.errors import StaleEpoch
from mailboxes.journal.store import FileJournal
from mailboxes.liveness import FlockLiveness

HOLDER = """
import sys
from pathlib import Path
from actors.board.board import Board
from mailboxes.journal.store import FileJournal
from mailboxes.liveness import FlockLiveness

root = Path(sys.argv[1])
live = FlockLiveness(root / ".team" / "members")
with live.hold("w1"):
    board = Board(FileJournal(root / ".team"), liveness=live, actor="w1")
    got = board.claim_next("w1")
    print(got.unwrap().id, got.epoch, flush=True)
    sys.stdin.read()  # hold the lease until killed
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A real process hosting agent w1: it holds w1's lease and has claimed task_1."""
    (tmp_path / ".team").mkdir()
    Board(FileJournal(tmp_path / ".team")).create("work")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().split() == ["task_1", "1"]
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def runtime_board(root: Path) -> Board:
    live = FlockLiveness(root / ".team" / "members")
    return Board(FileJournal(root / ".team"), projections=Projections(root), liveness=live)


def test_sigkilled_owner_is_released(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    board = runtime_board(tmp_path)
    board.create("by hand")
    board.claim("task_2", "ann", human=True)
    assert board.reap_dead_owners() == [], "a live holder keeps its claim; humans are never reaped"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    released = board.reap_dead_owners()
    assert [(t.id, t.status, t.owner) for t in released] == [("task_1", "pending", None)]
    last = list(FileJournal(tmp_path / ".team").read_from(1))[-1]
    assert last.type == "task.released" and last.data["reason"] == "owner_dead"
    assert board.get("task_2").owner == "ann"
    # w1 comes back with its old epoch after someone else took over: fenced out.
    retaken = board.claim("task_1", "w2")
    assert retaken.epoch == 2
    with pytest.raises(StaleEpoch):
        board.complete("task_1", "w1", 1)


def test_concurrent_reapers_release_once(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    holder.kill()
    holder.wait(timeout=30)
    boards = [runtime_board(tmp_path) for _ in range(8)]
    barrier = threading.Barrier(len(boards))

    def reap(board: Board) -> int:
        barrier.wait(timeout=30)
        return len(board.reap_dead_owners())

    with ThreadPoolExecutor(len(boards)) as pool:
        assert sum(pool.map(reap, boards)) == 1
    types = [e.type for e in FileJournal(tmp_path / ".team").read_from(1)]
    assert types.count("task.released") == 1
