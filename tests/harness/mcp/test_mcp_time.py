"""A real published MCP server from PyPI (``mcp-server-time``): connect, list, call, agent loop."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.agent import Agent, AgentConfig
from harness.mcp.catalog import install_mcp
from harness.mcp.client import McpManager
from harness.mcp.config import load_mcp_servers
from harness.mcp.tools import render_result
from harness.model.scripted import ScriptedModel
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolResultBlock
from tests.harness.mcp_servers import alive, children_of

pytest.importorskip("mcp_server_time", reason="mcp-server-time is in the dev extra")


def time_manager(root: Path) -> McpManager:
    (root / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {
                        "command": sys.executable,
                        "args": ["-m", "mcp_server_time", "--local-timezone", "${TZ_NAME:-UTC}"],
                    }
                }
            }
        )
    )
    return McpManager(load_mcp_servers(root), root=root, log_dir=root / ".team" / "mcp")


def test_connect_list_and_call(tmp_path: Path) -> None:
    before = children_of(os.getpid())
    manager = time_manager(tmp_path)
    try:
        status = manager.connect("time")
        assert status.state == "ready"
        assert {"get_current_time", "convert_time"} <= {t.name for t in status.tools}
        started = children_of(os.getpid()) - before
        assert len(started) == 1
        result = manager.call_tool(
            "time",
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        out = render_result(result)
        assert not out.is_error
        data = json.loads(out.content)
        assert data["target"]["timezone"] == "Asia/Tokyo"
        assert data["target"]["datetime"].endswith("T21:00:00+09:00")
    finally:
        manager.close()
    assert not any(alive(p) for p in started)
    assert children_of(os.getpid()) == before


def test_through_the_agent_loop_with_the_scripted_model(tmp_path: Path) -> None:
    script = {
        "lead": {
            "steps": [
                {
                    "tool_uses": [
                        {
                            "name": "mcp__time__convert_time",
                            "input": {
                                "source_timezone": "Europe/London",
                                "time": "09:30",
                                "target_timezone": "UTC",
                            },
                        }
                    ]
                },
                {
                    "match": '"timezone": "UTC",\\s*"datetime": "[0-9-]+T(?P<hm>\\d\\d:\\d\\d)',
                    "text": "It is {hm} in UTC.",
                },
            ]
        }
    }
    model = ScriptedModel({"agents": script})
    manager = time_manager(tmp_path)
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=tmp_path,
        model=model,
        policy=HarnessPolicy(Permissions(allow=["mcp__time__*"])),
        transcript_dir=tmp_path / ".team" / "transcripts",
    )
    try:
        toolset = install_mcp(agent, manager)
        assert "mcp__time__convert_time" in agent.registry
        assert not toolset.deferred
        result = agent.run_turn("what time is 09:30 London in UTC?")
        model.assert_consumed()
        assert result.transition == "completed"
        assert result.text in ("It is 09:30 in UTC.", "It is 08:30 in UTC.")  # BST or GMT
        results = [b for m in agent.messages for b in m.content if isinstance(b, ToolResultBlock)]
        assert len(results) == 1 and not results[0].is_error
    finally:
        agent.close()
        manager.close()


def test_teamctl_ask_uses_servers_from_mcp_json_under_the_settings_rules(tmp_path: Path) -> None:
    """`teamctl ask` picks up `.mcp.json`; an allow rule in settings.json lets the call through."""
    import io

    from actors.cli.ask import default_policy_factory
    from harness.headless import EXIT_OK, run_ask

    time_manager(tmp_path).close()  # writes .mcp.json
    (tmp_path / ".team").mkdir(exist_ok=True)
    (tmp_path / ".team" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["mcp__time__convert_time"]}})
    )
    model = ScriptedModel(
        {
            "agents": {
                "ask": {
                    "steps": [
                        {
                            "tool_uses": [
                                {
                                    "name": "mcp__time__convert_time",
                                    "input": {
                                        "source_timezone": "UTC",
                                        "time": "12:00",
                                        "target_timezone": "Asia/Tokyo",
                                    },
                                }
                            ]
                        },
                        {"match": "T21:00:00\\+09:00", "text": "Noon UTC is 21:00 in Tokyo."},
                    ]
                }
            }
        }
    )
    before = children_of(os.getpid())
    out, err = io.StringIO(), io.StringIO()
    code = run_ask(
        tmp_path,
        "noon UTC in Tokyo?",
        model_client=model,
        policy_factory=default_policy_factory,
        out=out,
        err=err,
    )
    assert (code, out.getvalue()) == (EXIT_OK, "Noon UTC is 21:00 in Tokyo.\n"), err.getvalue()
    model.assert_consumed()
    assert children_of(os.getpid()) == before
