"""Wake latency across processes on a 3-node JetStream cluster: a journal commit in one process
→ another process's subscription to the journal subject sees it.

A 3-node loopback cluster (tests/support/nats_server.py ``NatsCluster``). A child process stands
for another host: connected to node 3, it subscribes to the team's journal subject
(``teamctl.<team>.journal``, what wakes a host when the journal advances) and records the
``CLOCK_MONOTONIC`` time (system-wide on Linux) of every message. This process, connected to
node 1, appends one commit at a time with ``NatsEventStore.append`` and records when each append
started. Latency = seen - started (so it includes the store's catch-up and the replicated,
fsynced write). Skips (exit 0, ``"skipped"``) without nats-py or nats-server. Prints one JSON
object; exits 1 when a figure misses its goal.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.bench_nats_claims import skip_reason
from benchmarks.common import at_most, finish, parser, scratch, shown

NAME = "nats_wake"
P50_TARGET_MS = 10.0
P99_TARGET_MS = 50.0
TEAM = "bench"

CHILD = textwrap.dedent(
    """
    import asyncio, json, sys, time
    import nats

    async def main():
        nc = await nats.connect(sys.argv[1])
        seen = []
        done = asyncio.Event()
        want = int(sys.argv[3])

        async def on_msg(msg):
            seen.append(time.monotonic())
            if len(seen) >= want:
                done.set()

        await nc.subscribe(sys.argv[2], cb=on_msg)
        await nc.flush()
        print("ready", flush=True)
        await asyncio.wait_for(done.wait(), 300)
        await nc.close()
        print(json.dumps(seen), flush=True)

    asyncio.run(main())
    """
)


def commit(n: int, subject: str) -> Callable[[Sequence[Any]], list[Any]]:
    """A ``decide`` creating task ``n``."""
    from mailboxes import events as ev

    body = ev.TaskCreated(task_id=f"task_{n}", subject=subject)
    return lambda _seen: [ev.draft("task.created", "lead", body)]


def run(samples: int) -> list[float]:
    """Latencies in milliseconds, one per commit."""
    from mailboxes.journal.nats import NatsEventStore, subject_name
    from tests.support.nats_server import NatsCluster, nats_server_binary

    binary = nats_server_binary()
    assert binary is not None
    warmup = 20
    with scratch(NAME) as tmp:
        cluster = NatsCluster(tmp / "cluster", binary)
        child = None
        try:
            cluster.start()
            store = NatsEventStore([cluster.urls[0]], TEAM)
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    cluster.urls[2],
                    subject_name(TEAM),
                    str(warmup + samples),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise SystemExit("the subscriber did not start")
            for n in range(warmup):  # connections, leader and caches warm: not measured
                store.append(commit(n + 1, "warm"), after=n)
            started: list[float] = []
            for n in range(warmup, warmup + samples):
                decide = commit(n + 1, "wake")
                started.append(time.monotonic())
                store.append(decide, after=n)
                time.sleep(0.005)  # one commit at a time: latency, not a queue
            out, _ = child.communicate(timeout=300)
            seen = json.loads(out.strip().splitlines()[-1])[warmup:]
            store.close()
        finally:
            if child is not None and child.poll() is None:
                child.kill()
                child.wait(timeout=30)
            cluster.kill()
    if len(seen) != samples:
        raise SystemExit(f"{len(seen)} of {samples} commits seen")
    return [(s - t) * 1000 for s, t in zip(seen, started, strict=True)]


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--samples", type=int, default=400)
    args = cli.parse_args()
    reason = skip_reason()
    if reason is not None:
        finish(NAME, [], quick=args.quick, skipped=reason)
    samples = 50 if args.quick else args.samples
    lat = sorted(run(samples))
    p50 = statistics.median(lat)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    figures = [
        at_most("wake_p50", p50, "ms", P50_TARGET_MS),
        at_most("wake_p99", p99, "ms", P99_TARGET_MS),
        shown("wake_max", lat[-1], "ms"),
    ]
    finish(NAME, figures, quick=args.quick, samples=samples, nodes=3)


if __name__ == "__main__":
    main()
