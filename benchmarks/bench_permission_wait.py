"""Permission answer → waiting teammate woken: latency of ``JournalDecisions`` (file watcher).

A teammate thread waits on a journaled permission request; a child process (another ``teamctl``,
as a human answering from a terminal) opens its own journal and journals the decision. The figure
is the time from just before that decision append to the waiter waking, with the rescan tick set
far away so only the watcher can wake it. Medians over ``--rounds``. Prints one JSON object;
exits 1 when the figure misses its target.

    python -m benchmarks.bench_permission_wait [--rounds 30] [--quick]
"""

from __future__ import annotations

import multiprocessing
import statistics
import subprocess
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from actors.board import protocols as bp
from actors.board.board import Board
from actors.factory import init_team
from actors.runtime.permission_requests import JournalDecisions
from benchmarks.common import at_most, finish, parser, scratch
from mailboxes.journal.store import FileJournal
from mailboxes.watch import HintWatcher

TARGET_MS = 50.0


def answerer(root: str, conn: Connection) -> None:
    board = Board(FileJournal(Path(root) / ".team"), actor="user")
    while (rid := conn.recv()) is not None:
        conn.send(time.perf_counter())
        bp.decide_permission(board, rid, True, by="user")


def main() -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--rounds", type=int, default=30)
    args = cmd.parse_args()
    if args.quick:
        args.rounds = 3
    with scratch("permission-wait") as tmp:
        latencies = measure(tmp / "repo", args.rounds)
    p50 = statistics.median(latencies)
    figures = [
        at_most(
            "permission answer from another process -> waiter woken (p50)", p50, "ms", TARGET_MS, 2
        )
    ]
    finish("permission_wait", figures, quick=args.quick, rounds=args.rounds)


def measure(root: Path, rounds: int) -> list[float]:
    """One latency (ms) per round."""
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    journal = FileJournal(root / ".team")
    board = Board(journal, actor="runtime")
    waits = JournalDecisions(
        journal, lambda on, s: HintWatcher(on, journal=journal.path, rescan_s=s), rescan_s=60
    )
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(target=answerer, args=(str(root), child))
    proc.start()
    latencies = []
    try:
        for i in range(rounds):
            rid = f"perm-{i}"
            bp.request_permission(board, rid, "ann", "bash", {}, "bench")
            woke: list[float] = []
            ready = threading.Event()

            def wait(
                rid: str = rid, woke: list[float] = woke, ready: threading.Event = ready
            ) -> None:
                ready.set()
                answer = waits.wait(rid, 30)
                woke.append(time.perf_counter())
                assert answer is not None and answer.allowed

            thread = threading.Thread(target=wait)
            thread.start()
            ready.wait()
            parent.send(rid)
            sent = parent.recv()
            thread.join()
            latencies.append((woke[0] - sent) * 1000)
    finally:
        parent.send(None)
        proc.join(10)
        waits.close()
    return latencies


if __name__ == "__main__":
    main()
