"""Shared fixtures of the web dashboard tests: a team in a real git repository and the real
``teamctl web`` server, started as a subprocess on a free loopback port.

Interface (stable; the API tests and the browser tests both use it):

- ``team_repo``: a fresh git repository in ``tmp_path`` with ``teamctl init`` done (``Path``);
- ``teamctl(repo, *args)``: run the real CLI as a subprocess in ``repo`` (``CompletedProcess``,
  checked: a non-zero exit fails the test with its stderr);
- ``start_web``: a factory ``start_web(repo, *extra_args) -> WebServer``; every server it started
  is stopped (SIGINT) after the test;
- ``web``: ``start_web(team_repo)``.

``WebServer`` has ``url`` (the tokened URL, the first stdout line), ``token``, ``base``
(``http://127.0.0.1:PORT``), ``repo``, ``process`` (the ``Popen``), ``client()`` (an
``httpx.Client`` on ``base`` sending ``Authorization: Bearer``), ``csrf()`` (the CSRF value of
``GET /api/state``) and ``stop()`` (SIGINT, bounded wait; returns the exit code).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

TEAMCTL = str(Path(sys.executable).parent / "teamctl")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


def cli_env() -> dict[str, str]:
    """The environment of a ``teamctl`` subprocess: no model, settings or browser from outside."""
    drop = ("ANTHROPIC_", "TEAMCTL_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"):
        env.pop(name, None)
    return env


def teamctl(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``teamctl ARGS`` in ``repo`` as a real subprocess."""
    done = subprocess.run(
        [TEAMCTL, *args],
        cwd=repo,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert done.returncode == 0, (args, done.returncode, done.stdout, done.stderr)
    return done


@dataclass
class WebServer:
    """A running ``teamctl web``."""

    url: str
    token: str
    base: str
    repo: Path
    process: subprocess.Popen[str]
    stderr_text: str = field(default="")

    def client(self, *, auth: bool = True, **kw: Any) -> httpx.Client:
        headers = dict(kw.pop("headers", {}))
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        return httpx.Client(base_url=self.base, headers=headers, timeout=30.0, **kw)

    def csrf(self) -> str:
        with self.client() as http:
            response = http.get("/api/state")
            response.raise_for_status()
            return str(response.json()["csrf"])

    def stop(self) -> int:
        """Ctrl-C (SIGINT), then wait (bounded); returns the exit code. Idempotent."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError("teamctl web did not stop on SIGINT") from None
        if self.process.stderr is not None and not self.process.stderr.closed:
            self.stderr_text = self.process.stderr.read()
            self.process.stderr.close()
        if self.process.stdout is not None and not self.process.stdout.closed:
            self.process.stdout.close()
        return self.process.returncode


def _first_line(process: subprocess.Popen[str]) -> str:
    """The first stdout line, waited for with a deadline (a reader thread; no sleeping)."""
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=START_TIMEOUT_S)
    except queue.Empty:
        process.kill()
        raise AssertionError("teamctl web printed no URL in time") from None


def launch_web(repo: Path, *args: str, env: dict[str, str] | None = None) -> WebServer:
    """Start ``teamctl web --no-open --port 0 ARGS`` in ``repo`` and read its URL."""
    process = subprocess.Popen(
        [TEAMCTL, "web", "--no-open", "--port", "0", *args],
        cwd=repo,
        env=cli_env() if env is None else env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = _first_line(process).strip()
    if not line.startswith("http://"):
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"teamctl web did not start: {line!r} {err}")
    parts = urlsplit(line)
    token = parse_qs(parts.query)["token"][0]
    return WebServer(line, token, f"{parts.scheme}://{parts.netloc}", repo, process)


@pytest.fixture
def team_repo(tmp_path: Path) -> Path:
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    teamctl(root, "init")
    return root


@pytest.fixture
def start_web() -> Iterator[Callable[..., WebServer]]:
    servers: list[WebServer] = []

    def start(repo: Path, *args: str, env: dict[str, str] | None = None) -> WebServer:
        server = launch_web(repo, *args, env=env)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def web(team_repo: Path, start_web: Callable[..., WebServer]) -> WebServer:
    server: WebServer = start_web(team_repo)
    return server


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Browser tests skipped for want of Chromium end the run with a loud line
    (``tests/web/test_browser.py``; CI fails them instead, ``TEAMCTL_REQUIRE_BROWSER=1``)."""
    skipped = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if "BROWSER TESTS SKIPPED" in str(report.longrepr)
    ]
    if skipped:
        longrepr = skipped[0].longrepr
        why = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        terminalreporter.write_line(
            f"WARNING: {len(skipped)} browser tests were SKIPPED ({why})",
            red=True,
            bold=True,
        )
