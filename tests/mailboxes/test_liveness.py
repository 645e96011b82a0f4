"""mailboxes/liveness.py: flock leases, across threads and real processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from mailboxes.errors import LeaseHeld
from mailboxes.liveness import FlockLiveness
from mailboxes.messages import InvalidAgentName
from mailboxes.ports import Liveness

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


@pytest.fixture
def live(tmp_path: Path) -> FlockLiveness:
    return FlockLiveness(tmp_path / "members", contention_s=0.01)


def test_is_a_liveness(live: FlockLiveness) -> None:
    assert isinstance(live, Liveness)


def test_unknown_agent_is_not_alive_and_probe_creates_nothing(live: FlockLiveness) -> None:
    assert not live.is_alive("bob")
    assert not live.members_dir.exists()
    assert live.alive() == []


def test_hold_in_this_process_is_detected(live: FlockLiveness) -> None:
    with live.hold("bob"):
        assert live.is_alive("bob")
        assert not live.is_alive("carol")
        assert live.alive() == ["bob"]
        # A second hold, even from this process, has its own open file description.
        with pytest.raises(LeaseHeld, match="bob"), live.hold("bob"):
            pass
        assert live.is_alive("bob")  # the failed attempt did not drop the lease
    assert not live.is_alive("bob")
    with live.hold("bob"):  # reusable after release; the lock file is kept
        assert live.is_alive("bob")
    assert live.lock_path("bob").exists()


def test_hold_from_another_thread_conflicts(live: FlockLiveness) -> None:
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


def test_probes_never_make_a_hold_fail(tmp_path: Path) -> None:
    live = FlockLiveness(tmp_path / "members")
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            live.is_alive("bob")

    probers = [threading.Thread(target=probe) for _ in range(2)]
    for thread in probers:
        thread.start()
    try:
        for _ in range(100):
            with live.hold("bob"):
                pass
    finally:
        stop.set()
        for thread in probers:
            thread.join()


@pytest.mark.parametrize("name", ["../x", ".x", "a/b", ""])
def test_bad_agent_names(live: FlockLiveness, name: str) -> None:
    with pytest.raises(InvalidAgentName):
        live.is_alive(name)
    with pytest.raises(InvalidAgentName), live.hold(name):
        pass


def test_sigkilled_holder_releases_the_lease(live: FlockLiveness) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(live.members_dir), "bob"],
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
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
    assert not live.is_alive("bob")
    with live.hold("bob"):
        assert live.is_alive("bob")
