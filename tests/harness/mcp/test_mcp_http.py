"""A streamable HTTP MCP server on loopback, configured as ``{"type": "http", "url": ...}``."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.mcp.client import McpManager
from harness.mcp.config import load_mcp_servers
from harness.mcp.tools import render_result
from tests.harness.mcp_servers import BASIC

_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@pytest.fixture
def http_server() -> Iterator[int]:
    """The server binds port 0 itself (no free-port probe to race) and logs the port it got."""
    proc = subprocess.Popen(
        [sys.executable, str(BASIC), "--http-port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    listening = threading.Event()
    ports: list[int] = []

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            found = _LISTENING.search(line)
            if found and not listening.is_set():
                ports.append(int(found.group(1)))
                listening.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        assert listening.wait(timeout=30), "the HTTP MCP server did not start"
        assert ports[0] != 0
        yield ports[0]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        watcher.join(timeout=10)  # it ends at EOF, once the server is gone
        if proc.stderr is not None:
            proc.stderr.close()


def test_http_server_tools_and_calls(tmp_path: Path, http_server: int) -> None:
    servers = load_mcp_servers(
        tmp_path,
        {
            "web": {
                "type": "http",
                "url": "http://127.0.0.1:${MCP_PORT}/mcp",
                "headers": {"X-Test": "yes"},
            }
        },
    )
    manager = McpManager(servers, root=tmp_path, environ={"MCP_PORT": str(http_server)})
    try:
        status = manager.connect("web")
        assert status.transport == "http" and status.state == "ready"
        assert "echo" in {t.name for t in status.tools}
        out = render_result(manager.call_tool("web", "echo", {"text": "over http"}))
        assert (out.content, out.is_error) == ("over http", False)
    finally:
        manager.close()
