"""A team using a real published MCP server (``mcp-server-time`` from PyPI) configured in
``.mcp.json``: the lead calls it under an allow rule of the settings, a teammate restricted by
``tools=`` sees only the MCP tools its list names, one server process serves them both, and none
is left once the runtime stops."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from harness.ports import ModelRequest, ModelResponse, ToolResultBlock
from harness.transcript import load_transcript
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo
from tests.harness.mcp_servers import alive, children_of

__all__ = ["stop_actors"]

pytest.importorskip("mcp_server_time", reason="mcp-server-time is in the dev extra")


class Recording:
    """Forwards to a scripted model and keeps the tool names each agent was offered."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.tools: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def complete(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            self.tools[request.agent] = [t.name for t in request.tools]
        return self.inner.complete(request)


def configure(root: Path) -> None:
    """``.mcp.json`` with the time server, and an allow rule for one of its tools."""
    server = {
        "command": sys.executable,
        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    }
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"time": server}}))
    path = root / ".team" / "settings.json"
    settings = json.loads(path.read_text())
    settings["permissions"]["allow"] = ["mcp__time__convert_time"]
    path.write_text(json.dumps(settings))


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "steps": [
                {
                    "match": "noon UTC in Tokyo",
                    "tool_uses": [
                        {
                            "name": "mcp__time__convert_time",
                            "input": {
                                "source_timezone": "UTC",
                                "time": "12:00",
                                "target_timezone": "Asia/Tokyo",
                            },
                        }
                    ],
                },
                {"match": r"T21:00:00\+09:00", "text": "Noon UTC is 21:00 in Tokyo."},
            ]
        },
        "w1": {"rules": [{"match": "(?s).", "text": "Hello."}]},
    }
}


def test_a_team_uses_a_real_mcp_server_and_leaves_no_process(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    configure(root)
    before = children_of(os.getpid())
    model = Recording(ScriptedModel(SCRIPT))
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.submit("noon UTC in Tokyo?")
    assert rt.wait_idle(timeout=60)
    model.inner.assert_consumed()
    lead = load_transcript(root / ".team" / "transcripts" / "lead.jsonl").messages
    results = [b for m in lead for b in m.content if isinstance(b, ToolResultBlock)]
    assert len(results) == 1 and not results[0].is_error, results
    assert "Noon UTC is 21:00 in Tokyo." in str(lead[-1].content)
    assert {"mcp__time__convert_time", "mcp__time__get_current_time"} <= set(model.tools["lead"])

    # A teammate restricted to one MCP tool gets that one only, from the same server process.
    spec = TeammateSpec(name="w1", tools=("read_file", "mcp__time__get_current_time"))
    rt.services.spawn_teammate(spec, by="lead")
    rt.services.send("lead", "w1", "message", {"text": "say hello"})
    assert rt.wait_until(lambda: "w1" in model.tools, timeout=60)
    assert rt.wait_idle(timeout=60)
    offered = model.tools["w1"]
    assert "mcp__time__get_current_time" in offered and "read_file" in offered
    assert not [t for t in offered if t.startswith("mcp__") and t.endswith("convert_time")]
    assert "bash" not in offered

    started = children_of(os.getpid()) - before
    servers = [p for p in started if "mcp_server_time" in cmdline(p)]
    assert len(servers) == 1, [cmdline(p) for p in started]
    rt.stop()
    assert not any(alive(p) for p in started)
    assert children_of(os.getpid()) <= before


def test_without_servers_the_runtime_has_no_manager(tmp_path: Path, stop_actors: list[Any]) -> None:
    root = team_repo(tmp_path)
    rt = runtime(root, ScriptedModel({"agents": {}}))
    stop_actors.append(rt)
    rt.start()
    assert rt.background.mcp is None


def test_a_bad_mcp_json_entry_disables_only_that_server(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"time": {"args": ["x"]}}}))
    rt = runtime(root, ScriptedModel({"agents": {}}))
    stop_actors.append(rt)
    rt.start()  # the team starts; the bad entry is a failed server with its reason
    assert rt.background.mcp is not None
    status = rt.background.mcp.status("time")
    assert status.state == "failed"
    assert "needs `command`" in (status.error or "")
