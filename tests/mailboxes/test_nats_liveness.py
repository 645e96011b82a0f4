"""JetStream TTL leases (mailboxes/nats_liveness.py) against a real ``nats-server``: what the
backend-neutral tests (test_liveness.py) cannot show: refreshing past the TTL, another host
being refused, a lost lease being reported, the server restarting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mailboxes.errors import LeaseHeld
from tests.support.nats_server import NatsServer, running_server

TEAM = "alpha"
TTL = 1.0
REFRESH = 0.2


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


@pytest.fixture
def open_store(server: NatsServer) -> Iterator[Callable[..., Any]]:
    """Opens stores on ``server`` (each its own connection: one per simulated host)."""
    from mailboxes.nats_liveness import NatsLiveness

    stores: list[Any] = []

    def open_(**kw: Any) -> Any:
        kw.setdefault("ttl", TTL)
        kw.setdefault("refresh", REFRESH)
        store = NatsLiveness(server.url, TEAM, **kw)
        stores.append(store)
        return store

    yield open_
    for store in stores:
        store.close()


def revision(store: Any, agent: str) -> int:
    """The revision ``store`` last wrote for its lease on ``agent``."""

    async def read() -> int:
        return int(store._leases[agent].revision)

    result: int = store._run(read())
    return result


def wait_until(condition: Callable[[], bool], within: float, what: str) -> float:
    """Poll ``condition`` (bounded by ``within`` seconds); return the seconds it took."""
    start = time.monotonic()
    while not condition():
        waited = time.monotonic() - start
        assert waited <= within, f"not {what} within {within}s"
        time.sleep(0.02)
    return time.monotonic() - start


def test_a_refreshed_lease_outlives_the_ttl_and_refuses_other_hosts(
    open_store: Callable[..., Any],
) -> None:
    host_a, host_b = open_store(), open_store()
    with host_a.hold("bob"):
        first = revision(host_a, "bob")
        # Enough refreshes that the lease has lived well past one TTL.
        wait_until(lambda: revision(host_a, "bob") >= first + 8, 10 * TTL, "refreshed")
        assert host_a.held("bob")
        assert host_b.is_alive("bob")
        assert host_b.alive() == ["bob"]
        with pytest.raises(LeaseHeld, match="bob"), host_b.hold("bob"):
            pass
        assert host_a.held("bob")  # the refused attempt changed nothing
    assert not host_b.is_alive("bob")  # released at once, not after the TTL
    with host_b.hold("bob"):
        assert host_a.is_alive("bob")


def test_a_holder_that_stops_refreshing_is_dead_within_the_ttl(
    open_store: Callable[..., Any],
) -> None:
    """The holder's store is closed without releasing (as a frozen or partitioned host stops
    refreshing): its lease expires on the server."""
    holder, observer = open_store(), open_store()
    held = holder.hold("bob")
    held.__enter__()
    assert observer.is_alive("bob")
    holder.close()  # refreshing stops; the key is not deleted
    assert observer.is_alive("bob")
    wait_until(lambda: not observer.is_alive("bob"), TTL + 1.0, "seen dead")
    assert observer.alive() == []
    with observer.hold("bob"):
        assert observer.is_alive("bob")


def test_a_holder_whose_key_was_taken_learns_it_lost_the_lease(
    open_store: Callable[..., Any],
) -> None:
    lost: list[str] = []
    reported = threading.Event()

    def on_lost(agent: str) -> None:
        lost.append(agent)
        reported.set()

    old, new = open_store(on_lost=on_lost), open_store()
    with old.hold("bob"):
        # The key is deleted behind the holder's back (as when it expired while the holder was
        # frozen) and another host takes the lease.
        old._run(old._kv.delete("bob"))
        with new.hold("bob"):
            assert reported.wait(10 * TTL), "the loss was never reported"
            assert lost == ["bob"]
            assert not old.held("bob")
            assert new.held("bob")
    assert lost == ["bob"]  # reported once


def test_leaving_a_lost_hold_keeps_the_new_holders_key(open_store: Callable[..., Any]) -> None:
    reported = threading.Event()
    old = open_store(on_lost=lambda _agent: reported.set())
    new = open_store()
    with old.hold("bob"):
        old._run(old._kv.delete("bob"))
        taken = new.hold("bob")
        taken.__enter__()
        assert reported.wait(10 * TTL)
    assert new.is_alive("bob")
    assert new.held("bob")
    taken.__exit__(None, None, None)
    assert not new.is_alive("bob")


def test_an_unreachable_server_loses_the_lease_after_the_ttl(
    server: NatsServer, open_store: Callable[..., Any]
) -> None:
    reported = threading.Event()
    store = open_store(on_lost=lambda _agent: reported.set())
    with store.hold("bob"):
        server.stop()
        # No refresh can be confirmed: once the key may have expired, the lease counts as lost.
        assert reported.wait(TTL + 10.0), "the loss was never reported"
        assert not store.held("bob")
        server.start()


def test_an_unreachable_server_is_no_verdict_on_anyone(
    server: NatsServer, open_store: Callable[..., Any]
) -> None:
    from actors.board.rules import alive
    from mailboxes.errors import LivenessUnavailable

    store = open_store(timeout=1.0)
    server.stop()
    try:
        with pytest.raises(LivenessUnavailable, match="cannot be reached"):
            store.is_alive("bob")
        with pytest.raises(LivenessUnavailable):
            store.alive()
        assert alive(store, "bob")  # not judged dead: its tasks stay where they are
    finally:
        server.start()


def test_a_server_restart_keeps_live_leases(
    server: NatsServer, open_store: Callable[..., Any]
) -> None:
    reported = threading.Event()
    # A TTL longer than a restart takes: the lease must survive it.
    store = open_store(ttl=10.0, refresh=0.2, on_lost=lambda _agent: reported.set())
    with store.hold("bob"):
        server.restart()  # same store_dir, same port
        restarted = revision(store, "bob")
        wait_until(lambda: revision(store, "bob") > restarted + 2, 10.0, "refreshed again")
        assert store.is_alive("bob")
        assert store.held("bob")
        other = open_store(ttl=10.0)
        with pytest.raises(LeaseHeld), other.hold("bob"):
            pass
    assert not reported.is_set()
    assert not store.is_alive("bob")


def test_every_process_of_a_team_uses_the_same_ttl(open_store: Callable[..., Any]) -> None:
    open_store(ttl=TTL)
    with pytest.raises(ValueError, match="TTL"):
        open_store(ttl=2 * TTL)


def test_refresh_must_be_below_the_ttl(server: NatsServer) -> None:
    from mailboxes.nats_liveness import NatsLiveness

    with pytest.raises(ValueError, match="refresh"):
        NatsLiveness(server.url, TEAM, ttl=1.0, refresh=1.0)


def test_agent_names_with_dots_are_distinct_keys(open_store: Callable[..., Any]) -> None:
    store = open_store()
    with store.hold("bo.b"), store.hold("bo_b"):
        assert store.alive() == ["bo.b", "bo_b"]
        assert store.is_alive("bo.b")
    assert not store.is_alive("bo.b")
