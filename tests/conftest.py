"""Test-wide guards: no network except loopback; sandbox tests that cannot hide a missing bwrap.

Tests marked ``sandbox`` need a working bubblewrap. Where it cannot run they are skipped on a
developer machine, and the run ends with a loud summary line saying how many were skipped and
why; with ``TEAMCTL_REQUIRE_SANDBOX=1`` (set by ``.ci/run``) they fail instead, so CI can never
pass without having run them.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from harness.shell.sandbox import probe_bwrap

REQUIRE_SANDBOX_ENV = "TEAMCTL_REQUIRE_SANDBOX"

# The developer's own ~/.claude (settings, skills, CLAUDE.md) must not change what tests see:
# every test, and every process it starts, reads an empty Claude Code user folder instead.
# Tests of the user scope pass HOME explicitly and drop this variable.
os.environ["CLAUDE_CONFIG_DIR"] = tempfile.mkdtemp(prefix="teamctl-tests-claude-")
_sandbox_skips: list[str] = []

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        return host in ("localhost", "::1") or host.startswith("127.")
    return True  # AF_UNIX paths and the like are local


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any connection outside loopback fails the test at once."""

    def guarded_connect(self: socket.socket, address: Any) -> Any:
        if not _is_loopback(address):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return _real_connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> Any:
        if not _is_loopback(address):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return _real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
    yield


@pytest.fixture(autouse=True)
def _cpu_policy_kept() -> Iterator[None]:
    """A test that runs ``teamctl run`` or ``join`` in this process puts it under
    ``SCHED_BATCH`` (``actors.runtime.process.batch_scheduling``): put the policy the suite
    started with back, so no later test (nor what it starts) runs under another one."""
    if not hasattr(os, "sched_getscheduler"):
        yield
        return
    before = os.sched_getscheduler(0)
    yield
    if os.sched_getscheduler(0) != before:
        os.sched_setscheduler(0, before, os.sched_param(0))


@pytest.fixture(autouse=True)
def _sandbox_available(request: pytest.FixtureRequest) -> None:
    """Tests marked ``sandbox``: skip loudly, or fail under ``TEAMCTL_REQUIRE_SANDBOX=1``."""
    if request.node.get_closest_marker("sandbox") is None:
        return
    probe = probe_bwrap()
    if probe.available:
        return
    if os.environ.get(REQUIRE_SANDBOX_ENV) == "1":
        pytest.fail(f"bubblewrap is required ({REQUIRE_SANDBOX_ENV}=1) but {probe.reason}")
    _sandbox_skips.append(request.node.nodeid)
    pytest.skip(f"bubblewrap cannot run on this machine: {probe.reason}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _sandbox_skips:
        terminalreporter.write_line(
            f"WARNING: {len(_sandbox_skips)} sandbox tests were SKIPPED because bubblewrap "
            f"cannot run here: {probe_bwrap().reason}. CI runs them "
            f"({REQUIRE_SANDBOX_ENV}=1); install bubblewrap to run them locally.",
            red=True,
            bold=True,
        )
