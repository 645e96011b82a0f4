"""Claim latency through the host's commit service while the runtime holding it is busy.

The first runtime process of a team on a host holds the team's commit service (docs/
ARCHITECTURE.md, "One commit queue per host"). Served from a thread of that process, the service
shares its interpreter's GIL with the lead and the teammates the process hosts. Each commit makes
a few dozen system calls (socket, journal lock, write, fdatasync, projection files), and after
each one the serving thread must get the GIL back: while another thread of its process runs
Python, that takes up to the interpreter's switch interval (5 ms by default) every time. So the
runtime hands the service to a process of its own (``ServiceHandOff``); this measures what a
joined process's claim costs either way.

This process plays the runtime holding the service, with ``--busy`` threads running pure Python
(a lead parsing a long streamed answer, say). A child process plays a joined runtime process's
teammate: it claims a task through the service (``SharedCommits.claim_next``, timed), completes
it, and pauses 20 ms before the next, ``--claims`` times. Measured three ways: served from a
thread of this process while it is idle and while it is busy (reported, for scale), and handed to
a process of its own while this one is busy (as a runtime does; target: p50 ≤ 20 ms, the idle
claim's). Medians and p90 in milliseconds; prints one JSON object.

    python -m benchmarks.bench_service_busy [--claims 60] [--busy 1] [--quick]
"""

from __future__ import annotations

import multiprocessing
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from actors.board.board import Board
from actors.board.projections import Projections
from actors.factory import init_team
from actors.runtime.commit_service import (
    CommitClient,
    CommitServer,
    ServiceHandOff,
    service_address,
)
from actors.runtime.commits import SharedCommits
from benchmarks.common import at_most, finish, parser, percentile, scratch, shown
from mailboxes.journal.store import FileJournal

PAUSE_S = 0.02
TARGET_MS = 20.0
"""A joined process's claim while the runtime holding the service is busy: the idle-claim
latency target (``bench_idle_claim``), since the service's process is never the busy one."""


def _board(root: Path, actor: str) -> Board:
    return Board(FileJournal(root / ".team"), projections=Projections(root), actor=actor)


def joined(root: str, address: bytes, claims: int, out: Any) -> None:
    """A joined process's teammate: claim (timed) and complete ``claims`` tasks."""
    commits = SharedCommits(_board(Path(root), "w1"), remote=CommitClient(address))
    assert commits.remote is not None
    commits.remote.call([])  # connected before the first timed claim
    latencies = []
    for _ in range(claims):
        start = time.perf_counter()
        task = commits.claim_next("w1")
        latencies.append((time.perf_counter() - start) * 1000)
        if task is None:
            raise SystemExit("no task left to claim")
        commits.complete(task.id, "w1", task.epoch, "ok")
        time.sleep(PAUSE_S)
    out.put(latencies)


def _busy(stop: threading.Event) -> None:
    """Pure Python until told to stop: the GIL is released only when the interpreter forces it."""
    while not stop.is_set():
        table = {}
        for i in range(1000):
            table[str(i)] = i


def latencies(claims: int, busy: int, *, apart: bool = False) -> list[float]:
    """Claim latencies (ms) of a joined process while ``busy`` threads run here. ``apart``: the
    service is handed to a process of its own, as a runtime does (``ServiceHandOff``), instead
    of served from a thread of this one."""
    with scratch("service-busy") as root:
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        init_team(root)
        lead = _board(root, "lead")
        for n in range(claims):
            lead.create(f"task {n}")
        address = service_address(root / ".team" / "journal.jsonl")
        server: CommitServer | ServiceHandOff
        if apart:
            server = ServiceHandOff.for_team(address, root, fallback=SharedCommits(lead).serve)
        else:
            server = CommitServer(address, SharedCommits(lead).serve)
        if not server.start():
            raise SystemExit("the commit service's address is taken")
        stop = threading.Event()
        threads = [threading.Thread(target=_busy, args=(stop,), daemon=True) for _ in range(busy)]
        try:
            for thread in threads:
                thread.start()
            ctx = multiprocessing.get_context("spawn")
            out = ctx.Queue()
            child = ctx.Process(target=joined, args=(str(root), address, claims, out))
            child.start()
            found: list[float] = out.get(timeout=600)
            child.join(timeout=60)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
            server.stop()
        if apart and (not isinstance(server, ServiceHandOff) or server.child is None):
            raise SystemExit("the service was not handed to a process of its own")
    return found


def main() -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--claims", type=int, default=60)
    cmd.add_argument("--busy", type=int, default=1, help="busy threads in the serving process")
    args = cmd.parse_args()
    if args.quick:
        args.claims = 5
    if args.claims < 1 or args.busy < 1:
        raise SystemExit("--claims and --busy must be at least 1")
    idle = latencies(args.claims, 0)
    busy = latencies(args.claims, args.busy)
    apart = latencies(args.claims, args.busy, apart=True)
    figures = [
        shown("claim_via_service_idle_server_p50", statistics.median(idle), "ms"),
        shown("claim_via_service_idle_server_p90", percentile(idle, 0.9), "ms"),
        shown("claim_via_service_busy_server_p50", statistics.median(busy), "ms"),
        shown("claim_via_service_busy_server_p90", percentile(busy, 0.9), "ms"),
        shown("busy_over_idle_p50", statistics.median(busy) / statistics.median(idle), "x"),
        at_most(
            "claim_via_service_process_busy_runtime_p50", statistics.median(apart), "ms", TARGET_MS
        ),
        shown("claim_via_service_process_busy_runtime_p90", percentile(apart, 0.9), "ms"),
    ]
    finish("service_busy", figures, quick=args.quick, claims=args.claims, busy=args.busy)


if __name__ == "__main__":
    main()
