"""The owner_dead rule on the JetStream backend: a SIGKILLed host's claim returns to the board
within the lease TTL + 1 s, released once (journal and leases on a real ``nats-server``)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.board.board import Board
from tests.support.nats_server import NatsServer, running_server

TEAM = "alpha"
TTL = 1.0

HOLDER = """
import sys
from actors.board.board import Board
from mailboxes.journal.nats import NatsEventStore
from mailboxes.nats_liveness import NatsLiveness

url, team, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
live = NatsLiveness(url, team, ttl=ttl)
with live.hold("w1"):
    board = Board(NatsEventStore(url, team), liveness=live, actor="w1")
    got = board.claim_next("w1")
    print(got.unwrap().id, got.epoch, flush=True)
    sys.stdin.read()  # hold the lease until killed
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


@pytest.fixture
def opened(server: NatsServer) -> Iterator[list[Any]]:
    stores: list[Any] = []
    yield stores
    for store in stores:
        store.close()


def runtime_board(server: NatsServer, opened: list[Any]) -> Board:
    from mailboxes.journal.nats import NatsEventStore
    from mailboxes.nats_liveness import NatsLiveness

    journal = NatsEventStore(server.url, TEAM)
    live = NatsLiveness(server.url, TEAM, ttl=TTL)
    opened += [journal, live]
    return Board(journal, liveness=live)


def test_a_killed_hosts_claim_returns_within_the_lease_ttl(
    server: NatsServer, opened: list[Any]
) -> None:
    board = runtime_board(server, opened)
    board.create("work")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, server.url, TEAM, str(TTL)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["task_1", "1"]
        assert board.reap_dead_owners() == [], "a live host keeps its claim"
        proc.kill()  # SIGKILL: the lease is neither released nor refreshed any more
        killed = time.monotonic()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
    while not (released := board.reap_dead_owners()):
        assert time.monotonic() - killed <= TTL + 1.0, "the dead host's claim was not released"
        time.sleep(0.05)
    assert [(t.id, t.status, t.owner) for t in released] == [("task_1", "pending", None)]
    assert board.reap_dead_owners() == []  # released once
    other = runtime_board(server, opened)  # another host sees the same board
    assert other.get("task_1").status == "pending"
    events = [e for e in opened[0].read_from(1) if e.type == "task.released"]
    assert [e.data["reason"] for e in events] == ["owner_dead"]
