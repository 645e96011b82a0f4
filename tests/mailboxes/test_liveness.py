"""The ``Liveness`` implementations, across threads and real processes: flock leases
(mailboxes/liveness.py) and JetStream TTL leases (mailboxes/nats_liveness.py, against a real
``nats-server``; its own behaviour is in test_nats_liveness.py)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mailboxes.errors import LeaseHeld
from mailboxes.liveness import FlockLiveness
from mailboxes.messages import InvalidAgentName
from mailboxes.ports import Liveness
from tests.support.nats_server import running_server

HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from mailboxes.liveness import FlockLiveness

    with FlockLiveness(Path(sys.argv[1])).hold(sys.argv[2]):
        print("held", flush=True)
        sys.stdin.read()  # until the parent closes stdin or kills us
    """
)

NATS_HOLDER = textwrap.dedent(
    """
    import sys
    from mailboxes.nats_liveness import NatsLiveness

    url, team, agent, ttl = sys.argv[1:5]
    with NatsLiveness(url, team, ttl=float(ttl)).hold(agent):
        print("held", flush=True)
        sys.stdin.read()  # until the parent closes stdin or kills us
    """
)

NATS_TTL = 1.0
"""Short, so that a dead holder's lease expires quickly."""


class Backend:
    """Opens ``Liveness`` stores that share one set of leases (as the processes of one team do),
    and knows how a separate holder process is started and how soon its death is seen."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.dead_within = 0.0 if kind == "flock" else NATS_TTL + 1.0
        self._servers: Iterator[Any] | None = None
        self.server: Any = None
        self._stores: list[Any] = []
        if kind == "nats":
            self._servers = running_server(tmp_path / "nats")
            self.server = next(self._servers)

    def open(self, contention_s: float = 0.05) -> Any:
        """A new store (its own connection, for JetStream); ``contention_s`` is flock's."""
        if self.kind == "flock":
            return FlockLiveness(self.tmp_path / "members", contention_s=contention_s)
        from mailboxes.nats_liveness import NatsLiveness

        store = NatsLiveness(self.server.url, "alpha", ttl=NATS_TTL)
        self._stores.append(store)
        return store

    def holder_argv(self, agent: str) -> list[str]:
        if self.kind == "flock":
            return [sys.executable, "-c", HOLDER, str(self.tmp_path / "members"), agent]
        return [sys.executable, "-c", NATS_HOLDER, self.server.url, "alpha", agent, str(NATS_TTL)]

    def close(self) -> None:
        for store in self._stores:
            store.close()
        if self._servers is not None:
            self._servers.close()  # stops the server


@pytest.fixture(params=["flock", "nats"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    opened = Backend(request.param, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def live(backend: Backend) -> Any:
    return backend.open(contention_s=0.01)


@pytest.fixture
def flock(tmp_path: Path) -> FlockLiveness:
    return FlockLiveness(tmp_path / "members", contention_s=0.01)


def test_is_a_liveness(live: Any) -> None:
    assert isinstance(live, Liveness)


def test_unknown_agent_is_not_alive(live: Any) -> None:
    assert not live.is_alive("bob")
    assert live.alive() == []


def test_flock_probe_creates_nothing(flock: FlockLiveness) -> None:
    assert not flock.is_alive("bob")
    assert not flock.members_dir.exists()


def test_flock_lock_file_is_kept(flock: FlockLiveness) -> None:
    with flock.hold("bob"):
        pass
    assert flock.lock_path("bob").exists()


def test_hold_in_this_process_is_detected(live: Any) -> None:
    with live.hold("bob"):
        assert live.is_alive("bob")
        assert not live.is_alive("carol")
        assert live.alive() == ["bob"]
        # A second hold, even from this process, has its own open file description.
        with pytest.raises(LeaseHeld, match="bob"), live.hold("bob"):
            pass
        assert live.is_alive("bob")  # the failed attempt did not drop the lease
    assert not live.is_alive("bob")
    with live.hold("bob"):  # reusable after release
        assert live.is_alive("bob")


def test_hold_from_another_thread_conflicts(live: Any) -> None:
    held, release, done = threading.Event(), threading.Event(), threading.Event()

    def host() -> None:
        with live.hold("bob"):
            held.set()
            release.wait(10)
        done.set()

    thread = threading.Thread(target=host)
    thread.start()
    assert held.wait(10)
    assert live.is_alive("bob")
    with pytest.raises(LeaseHeld), live.hold("bob"):
        pass
    release.set()
    assert done.wait(10)
    thread.join()
    assert not live.is_alive("bob")


def test_probes_never_make_a_hold_fail(backend: Backend) -> None:
    live = backend.open()
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            live.is_alive("bob")

    probers = [threading.Thread(target=probe) for _ in range(2)]
    for thread in probers:
        thread.start()
    seen = []
    try:
        for _ in range(100):
            with live.hold("bob"):
                seen.append(live.is_alive("bob"))
    finally:
        stop.set()
        for thread in probers:
            thread.join()
    assert seen == [True] * 100  # every hold was taken and, while held, shows bob alive
    assert not live.is_alive("bob")


def test_flock_hold_waits_out_a_probe_that_is_off_the_cpu(tmp_path: Path) -> None:
    """A prober descheduled between taking and dropping its shared lock (a loaded host) keeps
    the lock far longer than a probe's microseconds; the hold waits, it does not report bob
    hosted. CI once failed test_probes_never_make_a_hold_fail this way."""
    live = FlockLiveness(tmp_path / "members", contention_s=0.01)
    with live.hold("bob"):
        pass  # creates the lock file, as the first probe after a hold would find it
    stalled = os.open(live.lock_path("bob"), os.O_RDONLY)
    try:
        fcntl.flock(stalled, fcntl.LOCK_SH | fcntl.LOCK_NB)  # what is_alive takes
        timer = threading.Timer(0.3, fcntl.flock, (stalled, fcntl.LOCK_UN))
        timer.start()
        with live.hold("bob"):
            assert live.is_alive("bob")
        timer.join()
    finally:
        os.close(stalled)


def test_flock_hold_against_a_holder_does_not_wait_for_probe_patience(tmp_path: Path) -> None:
    """An exclusive lock is a holder, never a probe: the hold gives up after ``contention_s``,
    not after the (here half-minute) patience it has for probes."""
    live = FlockLiveness(tmp_path / "members", contention_s=0.01, probe_patience_s=30)
    with live.hold("bob"):
        other = FlockLiveness(tmp_path / "members", contention_s=0.01, probe_patience_s=30)
        started = time.monotonic()
        with pytest.raises(LeaseHeld, match="bob"), other.hold("bob"):
            pass
        assert time.monotonic() - started < 15


@pytest.mark.parametrize("name", ["../x", ".x", "a/b", ""])
def test_bad_agent_names(live: Any, name: str) -> None:
    with pytest.raises(InvalidAgentName):
        live.is_alive(name)
    with pytest.raises(InvalidAgentName), live.hold(name):
        pass


def test_sigkilled_holder_releases_the_lease(backend: Backend, live: Any) -> None:
    """flock: at once; JetStream: once the TTL passes (within TTL + 1 s)."""
    proc = subprocess.Popen(
        backend.holder_argv("bob"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        assert live.is_alive("bob")
        with pytest.raises(LeaseHeld), live.hold("bob"):
            pass
        proc.kill()  # SIGKILL: no cleanup code runs in the child
        killed = time.monotonic()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
    while live.is_alive("bob"):  # bounded: fails once the lease outlives its TTL + 1 s
        assert time.monotonic() - killed <= backend.dead_within, "dead holder still alive"
        time.sleep(0.05)
    with live.hold("bob"):
        assert live.is_alive("bob")
