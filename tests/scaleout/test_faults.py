"""Fault tests on a 3-node loopback JetStream cluster (docs/SCALE-OUT.md, "Failover"):

- the stream leader is SIGKILLed during a 16-process claim race: every acknowledged event is in
  the journal once the node is back, no task is claimed twice, the journal folds clean (the
  nothing-lost oracle of tests/support/oracle.py over the exported stream);
- a host process holding claims (``NatsLiveness`` leases) is SIGKILLed: its tasks return to the
  board within the lease TTL + 1 s;
- the whole cluster stops (gracefully, or SIGKILLed) and starts again: the journal is intact
  and appends continue.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.board.board import Board
from mailboxes import events as ev
from tests.scaleout.streams import SubjectCounter, export_stream, write_journal
from tests.support.nats_server import NatsCluster
from tests.support.oracle import assert_nothing_lost, journal_events
from tests.support.procs import children

TEAM = "alpha"
BACKLOG = 48
RACERS = 16

CLAIMER = r"""
import json, sys
from actors.board.board import Board
from mailboxes.journal.nats import NatsEventStore
servers, team, name = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
board = Board(NatsEventStore(servers, team, deadline=120), actor=name)
print("ready", flush=True)
sys.stdin.readline()
out = {"attempted": [], "acked": [], "first": None, "drained": []}
out["attempted"].append(f"{name}-race")
got = board.claim("task_1", name, op_id=f"{name}-race")
if got.ok:
    out["acked"].append(f"{name}-race")
    out["first"] = got.epoch
    out["attempted"].append(f"{name}-race-done")
    board.complete("task_1", name, got.epoch, op_id=f"{name}-race-done")
    out["acked"].append(f"{name}-race-done")
n = 0
while True:
    n += 1
    op = f"{name}-claim-{n}"
    out["attempted"].append(op)
    got = board.claim_next(name, op_id=op)
    if not got.ok:
        break
    out["acked"].append(op)
    out["attempted"].append(op + "-done")
    board.complete(got.unwrap().id, name, got.epoch, op_id=op + "-done")
    out["acked"].append(op + "-done")
    out["drained"].append(got.unwrap().id)
print(json.dumps(out))
"""


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    stores: list[Any] = []
    yield stores
    for store in stores:
        store.close()


def journal(cluster: NatsCluster, opened: list[Any], **kw: Any) -> Any:
    from mailboxes.journal.nats import NatsEventStore

    store = NatsEventStore(cluster.urls, TEAM, **kw)
    opened.append(store)
    return store


def test_killing_the_stream_leader_mid_race_loses_nothing_and_claims_nothing_twice(
    cluster: NatsCluster, opened: list[Any], tmp_path: Path
) -> None:
    lead_store = journal(cluster, opened)
    assert lead_store.replicas == 3
    lead = Board(lead_store, actor="lead")
    lead.create("contended", op_id="seed-0")
    for n in range(1, BACKLOG):
        lead.create(f"backlog {n}", op_id=f"seed-{n}")
    seeded = lead_store.last_seq()
    counter = SubjectCounter(cluster.urls, lead_store.subject)
    argv = [(",".join(cluster.urls), TEAM, f"w{i}") for i in range(RACERS)]
    try:
        with children(CLAIMER, argv) as group:
            group.ready()
            group.go()
            counter.wait(12)  # the race is on: commits are flowing
            leader = cluster.stream_leader(lead_store.stream)
            leader.kill()
            at_kill = counter.count
            results = group.results(timeout=240)
            successor = cluster.stream_leader(lead_store.stream, not_on=leader.name)
            leader.start()
            cluster.wait_ready()
    finally:
        counter.close()
    assert counter.count > at_kill, "commits went on after the kill (under a new leader)"
    assert successor.name != leader.name

    winners = [r["first"] for r in results if r["first"] is not None]
    assert winners == [1], "exactly one process wins the contended task, at epoch 1"
    drained = sorted(t for r in results for t in r["drained"])
    assert drained == sorted(f"task_{n}" for n in range(2, BACKLOG + 1)), "each task once"

    # Recovery: read the whole stream through the node that was killed and came back.
    data = export_stream([leader.url], lead_store.stream)
    root = write_journal(tmp_path / "exported", data)
    seeds = {f"seed-{n}" for n in range(BACKLOG)}
    attempted = seeds | {op for r in results for op in r["attempted"]}
    acked = seeds | {op for r in results for op in r["acked"]}
    assert_nothing_lost(root, attempted=attempted, acked=acked, projections=False, pids=group.pids)
    events, problems = journal_events(root / ".team" / "journal.jsonl")
    assert problems == [] and len(events) > seeded
    assert sum(e.type == "task.completed" for e in events) == BACKLOG
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


HOLDER = r"""
import sys
from contextlib import ExitStack
from actors.board.board import Board
from mailboxes.journal.nats import NatsEventStore
from mailboxes.nats_liveness import NatsLiveness

servers, team, ttl = sys.argv[1].split(","), sys.argv[2], float(sys.argv[3])
live = NatsLiveness(servers, team, ttl=ttl)
journal = NatsEventStore(servers, team)
with ExitStack() as held:
    for name in ("w1", "w2"):
        held.enter_context(live.hold(name))
        got = Board(journal, liveness=live, actor=name).claim_next(name)
        print(got.unwrap().id, name, got.epoch, flush=True)
    sys.stdin.read()  # hold the leases until killed
"""

TTL = 2.0


def test_a_killed_hosts_claims_return_within_the_lease_ttl(
    cluster: NatsCluster, opened: list[Any]
) -> None:
    from mailboxes.nats_liveness import NatsLiveness

    live = NatsLiveness(cluster.urls, TEAM, ttl=TTL)
    opened.append(live)
    board = Board(journal(cluster, opened), liveness=live)
    for n in range(3):
        board.create(f"work {n}")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, ",".join(cluster.urls), TEAM, str(TTL)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        claims = [proc.stdout.readline().split() for _ in range(2)]
        assert claims == [["task_1", "w1", "1"], ["task_2", "w2", "1"]]
        assert live.alive() == ["w1", "w2"]
        assert board.reap_dead_owners() == [], "a live host keeps its claims"
        proc.kill()  # SIGKILL: the leases are neither released nor refreshed any more
        killed = time.monotonic()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
    released: list[Any] = []
    while len(released) < 2:
        released += board.reap_dead_owners()
        assert time.monotonic() - killed <= TTL + 1.0, f"released only {released} in time"
        if len(released) < 2:
            time.sleep(0.05)
    assert sorted((t.id, t.status, t.owner) for t in released) == [
        ("task_1", "pending", None),
        ("task_2", "pending", None),
    ]
    assert board.reap_dead_owners() == []  # released once
    assert [live.is_alive(a) for a in ("w1", "w2")] == [False, False]
    assert live.alive() == []  # the listing agrees with is_alive


def task(n: int, op_id: str) -> ev.EventDraft:
    body = ev.TaskCreated(task_id=f"task_{n}", subject=f"subject {n}")
    return ev.draft("task.created", "lead", body, op_id=op_id)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_journal_survives_a_whole_cluster_restart_and_appends_continue(
    cluster: NatsCluster, opened: list[Any], how: str
) -> None:
    from mailboxes.nats_liveness import NatsLiveness

    store = journal(cluster, opened)
    written = []
    for n in range(1, 21):
        written += store.append(lambda _s, n=n: [task(n, f"op-{n}")], after=n - 1).appended
    store.close()
    if how == "stop":
        cluster.stop()
    else:
        cluster.kill()  # every node at once: only what was synced survives
    assert cluster.running() == []
    cluster.start()
    reopened = journal(cluster, opened)
    assert list(reopened.read_from(1)) == written
    assert reopened.replicas == 3
    again = reopened.append(lambda _s: [task(99, "op-1")], after=20).appended
    assert list(again) == [written[0]], "op ids are still known: no duplicate"
    more = reopened.append(lambda _s: [task(21, "op-21")], after=20).appended
    assert [e.seq for e in more] == [21]
    live = NatsLiveness(cluster.urls, TEAM, ttl=5.0)
    opened.append(live)
    with live.hold("w1"):
        assert live.alive() == ["w1"]


def test_appends_resume_at_once_when_the_leader_stops_gracefully(
    cluster: NatsCluster, opened: list[Any]
) -> None:
    """A request in flight to a leader that stops is never answered: the store's short write
    timeout (``WRITE_TIMEOUT``), not its long request timeout, bounds the wait; the commit in
    flight is then found by its commit id or published again, never twice."""
    import threading

    store = journal(cluster, opened, timeout=60.0, deadline=120.0)
    acked: list[str] = []
    more = threading.Condition()
    stop = threading.Event()
    failed: list[BaseException] = []

    def write() -> None:
        n = 0
        try:
            while not stop.is_set():
                n += 1
                store.append(lambda _s, n=n: [task(n, f"op-{n}")], after=n - 1)
                with more:
                    acked.append(f"op-{n}")
                    more.notify_all()
        except BaseException as exc:
            failed.append(exc)
            with more:
                more.notify_all()

    def wait_acks(count: int, within: float) -> None:
        deadline = time.monotonic() + within
        with more:
            want = len(acked) + count
            while len(acked) < want:
                assert not failed, failed
                left = deadline - time.monotonic()
                assert left > 0, f"writes stalled (request timeout {60.0}s)"
                more.wait(left)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        wait_acks(30, within=60)
        leader = cluster.stream_leader(store.stream)
        leader.stop()  # SIGTERM: a graceful shutdown
        wait_acks(30, within=20)  # far below the 60 s request timeout
    finally:
        stop.set()
        writer.join(timeout=120)
    assert not failed, failed
    ops = [e.op_id for e in store.read_from(1)]
    assert ops == [f"op-{n}" for n in range(1, len(ops) + 1)], "dense, in order, none twice"
    assert set(acked) <= set(ops)
