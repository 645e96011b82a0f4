"""Claims under contention: 16 processes race claim_next + complete over 1,000 tasks.

Every process opens its own ``FileJournal`` and ``Board`` (with projections, as the runtime
does) and runs under the CPU scheduling policy of a team process (``SCHED_BATCH``, as
``teamctl run`` and ``teamctl join`` set it: ``batch_scheduling``; ``--scheduling normal`` for
the default policy), waits on a barrier, then loops claim → complete until nothing is ready.

As on a host where a team runs (docs/ARCHITECTURE.md, "One commit queue per host"), this process
plays the first runtime process: it serves the team's commit service from its ``SharedCommits``,
and the 16 workers are the other runtime processes, claiming and completing through their own
``SharedCommits`` as a joined runtime's teammates do (connected before the race). The same race
with the service off (every process deciding its commands under the journal lock itself, as
``Board.claim_next`` and ``Board.complete`` do for ``teamctl task …``: with ``--no-service``
alone, otherwise also reported for comparison) warms up with one claim that accepts nothing.

Figures: claims per second (all claims / wall time from the barrier to the last completion),
double claims found by re-checking the journal, how fast the resulting journal folds into team
state, the CPU time per claim + complete of the workers and the serving process (for scale: it
sets the rate on a busy machine), and the share of the machine's CPU time the host took away
during the races (``steal_share``: on a virtual machine whose host is busy, a third of it at
times, which the claims figure then lacks). Medians over ``--repeat`` runs. Prints one JSON
object; exits 1 when a figure misses its target.

    python -m benchmarks.bench_claims [--processes 16] [--tasks 1000] [--repeat 3]
        [--scheduling batch|normal] [--no-service] [--quick]
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Iterable
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from actors.board.board import Board
from actors.board.fold import fold_all
from actors.board.projections import Projections
from actors.board.state import EMPTY
from actors.runtime.commit_service import CommitClient, CommitServer, service_address
from actors.runtime.commits import SharedCommits
from actors.runtime.process import batch_scheduling
from benchmarks.common import (
    at_least,
    at_most,
    cpu_ticks,
    finish,
    parser,
    scratch,
    shown,
    steal_share,
)
from mailboxes.events import Event
from mailboxes.journal.store import FileJournal

CLAIMS_TARGET = 500.0
FOLD_TARGET = 100_000.0


def worker(
    root: str,
    name: str,
    project: bool,
    batch: bool,
    barrier: Barrier,
    results: Any,
    address: bytes | None = None,
) -> None:
    if batch:
        batch_scheduling()
    projections = Projections(Path(root)) if project else None
    board = Board(FileJournal(Path(root) / ".team"), projections=projections, actor=name)
    if address is not None:
        served(board, name, address, barrier, results)
        return
    # Warm up outside the timed window: a claim that accepts no task writes nothing but runs the
    # whole path once, so modules a command imports on first use (event payloads) are loaded
    # before the race rather than inside it, 16 times at once.
    assert not board.claim_next(name, accept=lambda _task: False).ok
    # That claim writes no projection, and the first one written loads the C library's
    # renameat2 through ctypes (mailboxes/fsutil.py): load it here as well.
    import ctypes  # noqa: F401

    barrier.wait(timeout=120)
    cpu = time.process_time()
    claims = 0
    while (got := board.claim_next(name)).ok:
        board.complete(got.unwrap().id, name, got.epoch, "ok")
        claims += 1
    results.put((name, claims, time.time(), time.process_time() - cpu))


def served(board: Board, name: str, address: bytes, barrier: Barrier, results: Any) -> None:
    """The worker of a team process whose host runs the commit service: claims and completions
    go through ``SharedCommits`` to the process serving it, as a joined runtime's do."""
    commits = SharedCommits(board, remote=CommitClient(address))
    assert commits.remote is not None
    commits.remote.call([])  # connect before the race (a request with no writes)
    barrier.wait(timeout=120)
    cpu = time.process_time()
    claims = 0
    while (task := commits.claim_next(name)) is not None:
        commits.complete(task.id, name, task.epoch, "ok")
        claims += 1
    results.put((name, claims, time.time(), time.process_time() - cpu))


def double_claims(events: Iterable[Event]) -> int:
    """Claims of a task that was not free, or by an owner already holding one."""
    owner: dict[str, str | None] = {}
    holding: set[str] = set()
    bad = 0
    for event in events:
        tid = event.data.get("task_id", "")
        if event.type == "task.created":
            owner[tid] = None
        elif event.type == "task.claimed":
            who = event.data["owner"]
            bad += owner[tid] is not None or who in holding
            owner[tid] = who
            holding.add(who)
        elif event.type in ("task.completed", "task.released"):
            holding.discard(event.data["owner"])
            owner[tid] = None
    return bad


def run_once(
    processes: int, tasks: int, project: bool, batch: bool = True, service: bool = True
) -> tuple[float, int, float, float, float | None]:
    """(claims/s, double claims, fold events/s, CPU ms per claim, steal share) for one race in
    a fresh folder. The CPU is the workers' own (user + system, from the barrier to their last
    completion), summed, plus the serving process's over the same time (``service``): what one
    claim + complete costs the machine, contention included."""
    with scratch("claims") as root:
        (root / ".team").mkdir()
        lead = Board(FileJournal(root / ".team"), projections=Projections(root), actor="lead")
        for n in range(tasks):
            lead.create(f"task {n}", blocked_by=[f"task_{n - 8}"] if n % 10 == 9 else [])
        server = None
        if service:  # this process is the team's first runtime process: it serves the host
            server = CommitServer(
                service_address(root / ".team" / "journal.jsonl"), SharedCommits(lead).serve
            )
            if not server.start():
                raise SystemExit("the commit service's address is taken")
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(processes + 1)
        results = ctx.Queue()
        address = server.address if server is not None else None
        children = [
            ctx.Process(
                target=worker,
                args=(str(root), f"w{i}", project, batch, barrier, results, address),
            )
            for i in range(processes)
        ]
        for child in children:
            child.start()
        barrier.wait(timeout=120)
        started = time.time()
        ticks = cpu_ticks()
        serving = time.process_time()
        reports = [results.get(timeout=300) for _ in children]
        serving = time.process_time() - serving if server is not None else 0.0
        stolen = steal_share(ticks, cpu_ticks())
        if server is not None:
            server.stop()
        for child in children:
            child.join(timeout=60)
        finished = max(r[2] for r in reports)
        claimed = sum(r[1] for r in reports)
        if claimed != tasks:
            raise SystemExit(f"{claimed} tasks claimed and completed, expected {tasks}")
        events = list(FileJournal(root / ".team").read_from(1))
        fold_start = time.perf_counter()
        state = fold_all(EMPTY, events)
        fold_rate = len(events) / (time.perf_counter() - fold_start)
        if any(t.status != "completed" for t in state.tasks.values()):
            raise SystemExit("a task was left unfinished")
        cpu_ms = (sum(r[3] for r in reports) + serving) * 1000 / claimed
        return claimed / (finished - started), double_claims(events), fold_rate, cpu_ms, stolen


def main() -> None:
    args = cli()
    project, batch = not args.no_projections, args.scheduling == "batch"
    runs = [
        run_once(args.processes, args.tasks, project, batch, not args.no_service)
        for _ in range(args.repeat)
    ]
    rate = statistics.median(r[0] for r in runs)
    doubles = max(r[1] for r in runs)
    fold_rate = statistics.median(r[2] for r in runs)
    cpu_ms = statistics.median(r[3] for r in runs)
    steals = [r[4] for r in runs if r[4] is not None]
    figures = [
        at_least(f"claims_per_s_{args.processes}_processes", rate, "claims/s", CLAIMS_TARGET),
        at_most("double_claims", doubles, "claims", 0),
        at_least("state_fold", fold_rate, "events/s", FOLD_TARGET),
        shown("cpu_per_claim", cpu_ms, "ms"),
    ]
    if not args.no_service and not args.quick:
        # For comparison: the same race with every process on the journal's lock alone (a
        # host without the service: ``team.commit_service`` off, or writers outside a runtime).
        alone = [
            run_once(args.processes, args.tasks, project, batch, service=False)
            for _ in range(args.repeat)
        ]
        figures += [
            shown(
                f"claims_per_s_{args.processes}_processes_journal_lock_only",
                statistics.median(r[0] for r in alone),
                "claims/s",
            ),
            at_most("double_claims_journal_lock_only", max(r[1] for r in alone), "claims", 0),
        ]
    if steals:
        figures.append(shown("steal_share", statistics.median(steals), "share of CPU time"))
    finish(
        "claims",
        figures,
        quick=args.quick,
        processes=args.processes,
        tasks=args.tasks,
        projections=not args.no_projections,
        scheduling=args.scheduling,
        service=not args.no_service,
    )


def cli() -> Any:
    cmd = parser(__doc__)
    cmd.add_argument("--processes", type=int, default=16)
    cmd.add_argument("--tasks", type=int, default=1000)
    cmd.add_argument("--repeat", type=int, default=3)
    cmd.add_argument("--no-projections", action="store_true", help="measure the journal alone")
    cmd.add_argument(
        "--no-service",
        action="store_true",
        help="no commit service: every process takes the journal's lock itself",
    )
    cmd.add_argument(
        "--scheduling",
        choices=("batch", "normal"),
        default="batch",
        help="the workers' CPU policy: a team process's (batch, the default) or the default one",
    )
    args = cmd.parse_args()
    if args.quick:
        args.processes, args.tasks, args.repeat = 4, 60, 1
    return args


if __name__ == "__main__":
    main()
