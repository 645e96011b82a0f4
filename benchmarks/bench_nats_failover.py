"""Failover on a 3-node JetStream cluster: how long writes pause when the stream leader is
SIGKILLed, and when it is stopped gracefully; nothing acknowledged may be lost.

A 3-node loopback cluster (tests/support/nats_server.py ``NatsCluster``, ``sync_interval:
always``, the team's stream with 3 replicas). A writer thread appends one commit after another
through ``NatsEventStore`` (connected to every node), recording when each append returned. The
stream leader (stream info ``cluster.leader``) is then SIGKILLed: the pause is the longest gap
between two acknowledged appends from the kill until writes flow again (the Raft election, plus
the client noticing). The node is restarted, writes settle, and the new leader is stopped with
SIGTERM (graceful: it hands leadership over). Finally every acknowledged commit's op id must be
in the stream, exactly once. Skips (exit 0, ``"skipped"``) without nats-py or nats-server.
Prints one JSON object; exits 1 when a figure misses its goal.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from typing import Any

from benchmarks.bench_nats_claims import skip_reason
from benchmarks.common import at_most, finish, parser, scratch, shown

NAME = "nats_failover"
KILL_TARGET_S = 12.0
GRACEFUL_TARGET_S = 2.0
TEAM = "bench"
SETTLE_ACKS = 100
"""Acknowledged appends to wait for before each fault (and after, before the next)."""


class Writer(threading.Thread):
    """Appends commits (op ids ``w-<n>``) until stopped; records each acknowledgement time."""

    def __init__(self, store: Any) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.acked: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.cond = threading.Condition()

    def run(self) -> None:
        from mailboxes import events as ev

        after = self.store.last_seq()
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                op = f"w-{n}"
                body = ev.TaskCreated(task_id=f"task_{n}", subject=op)
                draft = ev.draft("task.created", "lead", body, op_id=op)
                got = self.store.append(lambda _s, d=draft: [d], after=after)
                after = got.appended[-1].seq
                with self.cond:
                    self.acked.append((time.monotonic(), op))
                    self.cond.notify_all()
        except BaseException as exc:  # reported by main
            self.error = exc
            with self.cond:
                self.cond.notify_all()

    def wait_acks(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            want = len(self.acked) + count
            while len(self.acked) < want:
                if self.error is not None:
                    raise self.error
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit(f"writes did not resume within {timeout}s")
                self.cond.wait(left)

    def pause_since(self, fault: float) -> float:
        """The longest gap between acknowledgements spanning or after ``fault``."""
        with self.cond:
            times = [t for t, _ in self.acked]
        before = [t for t in times if t <= fault]
        after = [t for t in times if t > fault]
        edges = ([before[-1]] if before else [fault]) + after
        return max((b - a for a, b in itertools.pairwise(edges)), default=0.0)


def wait_current(cluster: Any, stream: str, deadline_s: float = 60.0) -> None:
    """Wait (bounded) until the stream's leader reports every other replica current."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            info = cluster.stream_info(stream).get("cluster", {})
        except Exception:  # an election under way: ask again
            info = {}
        replicas = info.get("replicas") or []
        if info.get("leader") and len(replicas) == 2 and all(r.get("current") for r in replicas):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"stream {stream} replicas not current within {deadline_s}s: {info}")
        time.sleep(0.05)


def run(settle: int) -> dict[str, float]:
    from mailboxes.journal.nats import NatsEventStore
    from tests.support.nats_server import NatsCluster, nats_server_binary

    binary = nats_server_binary()
    assert binary is not None
    with scratch(NAME) as tmp:
        cluster = NatsCluster(tmp / "cluster", binary)
        writer: Writer | None = None
        try:
            cluster.start()
            store = NatsEventStore(cluster.urls, TEAM, deadline=120)
            stream = store.stream
            writer = Writer(store)
            writer.start()
            writer.wait_acks(settle)

            leader = cluster.stream_leader(stream)
            killed = time.monotonic()
            leader.kill()
            writer.wait_acks(settle)
            kill_pause = writer.pause_since(killed)
            leader.start()
            cluster.wait_ready()
            writer.wait_acks(settle)
            # A graceful stop hands the stream over to a current replica: measure it from a
            # healthy stream (the restarted node may report healthy before it has caught up
            # with the stream; one run in ~10 then paused 8.7 s for an election).
            wait_current(cluster, stream)

            leader = cluster.stream_leader(stream)
            stopped = time.monotonic()
            leader.stop()
            writer.wait_acks(settle)
            graceful_pause = writer.pause_since(stopped)
            leader.start()
            cluster.wait_ready()
            writer.wait_acks(settle)

            writer.stop.set()
            writer.join(timeout=120)
            if writer.error is not None:
                raise writer.error
            acked = [op for _, op in writer.acked]
            store.close()
            check = NatsEventStore(cluster.urls, TEAM)
            stored = Counter(e.op_id for e in check.read_from(1))
            check.close()
            lost = sum(1 for op in acked if stored[op] == 0)
            doubled = sum(1 for n in stored.values() if n > 1)
            return {
                "kill_pause": kill_pause,
                "graceful_pause": graceful_pause,
                "lost": lost + doubled,
                "acked": len(acked),
            }
        finally:
            if writer is not None:
                writer.stop.set()
            cluster.kill()


def main() -> None:
    args = parser(__doc__).parse_args()
    reason = skip_reason()
    if reason is not None:
        finish(NAME, [], quick=args.quick, skipped=reason)
    got = run(20 if args.quick else SETTLE_ACKS)
    figures = [
        at_most("leader_kill_write_pause", got["kill_pause"], "s", KILL_TARGET_S),
        at_most("graceful_stop_write_pause", got["graceful_pause"], "s", GRACEFUL_TARGET_S),
        at_most("acked_lost_or_doubled", got["lost"], "commits", 0),
        shown("acked_commits", got["acked"], "commits"),
    ]
    finish(NAME, figures, quick=args.quick, nodes=3)


if __name__ == "__main__":
    main()
