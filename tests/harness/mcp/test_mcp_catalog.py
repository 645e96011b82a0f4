"""Deferred loading (catalog + search_tools), collisions, and MCP tools inside the agent loop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.agent import Agent, AgentConfig
from harness.mcp.catalog import McpToolset, install_mcp
from harness.mcp.client import McpManager
from harness.mcp.config import load_mcp_servers
from harness.model.scripted import ScriptedModel
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ModelRequest, ModelResponse, ToolResultBlock, ToolUseBlock
from tests.harness.mcp_servers import basic_server


class Recording:
    """A ModelClient that records every request it forwards."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return self.inner.complete(request)


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpManager]:
    root = tmp_path_factory.mktemp("mcp-many")
    m = McpManager(load_mcp_servers(root, {"many": basic_server("--many", "50")}), root=root)
    yield m
    m.close()


def make_agent(
    root: Path, steps: list[dict[str, Any]], allow: list[str]
) -> tuple[Agent, Recording]:
    model = Recording(ScriptedModel({"agents": {"lead": {"steps": steps}}}))
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=root,
        model=model,
        policy=HarnessPolicy(Permissions(allow=allow)),
        transcript_dir=root / ".team" / "transcripts",
        session_id="s1",
    )
    return agent, model


def tool_names(request: ModelRequest) -> list[str]:
    return [t.name for t in request.tools]


def test_small_toolsets_are_offered_in_full(many: McpManager) -> None:
    toolset = McpToolset.build(many, budget_chars=10**9)
    assert not toolset.deferred
    names = [t.name for t in toolset.initial_tools()]
    assert "mcp__many__tool_049" in names and "search_tools" not in names


def test_over_budget_only_a_catalog_is_offered(many: McpManager) -> None:
    toolset = McpToolset.build(many, budget_chars=2_000)
    assert toolset.deferred and toolset.total_chars > 2_000
    assert len(toolset.tools) == 59  # 50 generated + the 9 basic ones
    names = [t.name for t in toolset.initial_tools()]
    assert names == ["list_mcp_resources", "read_mcp_resource", "search_tools"]
    section = toolset.prompt_section()
    assert "mcp__many__tool_007: Generated tool number 7 (topic music)." in section
    assert "search_tools" in section
    assert section == toolset.prompt_section()  # byte-stable for the prompt cache
    lines = [line.strip() for line in section.splitlines() if line.startswith("  mcp__")]
    assert lines == sorted(lines)


def test_search_ranks_by_name_and_description(many: McpManager) -> None:
    toolset = McpToolset.build(many, budget_chars=0)
    hits = [t.name for t in toolset.search("weather", limit=20)]
    assert hits == [f"mcp__many__tool_{i:03d}" for i in range(0, 50, 5)]
    assert toolset.search("mcp__many__echo")[0].name == "mcp__many__echo"
    assert [t.name for t in toolset.search("select:mcp__many__add,mcp__many__nope")] == [
        "mcp__many__add"
    ]
    assert toolset.search("zzz-nothing") == []


def test_search_tools_makes_matches_callable_in_the_agent_loop(
    many: McpManager, tmp_path: Path
) -> None:
    steps = [
        {"tool_uses": [{"name": "mcp__many__tool_012", "input": {"query": "too early"}}]},
        {
            "match": "Unknown tool 'mcp__many__tool_012'",
            "tool_uses": [
                {"name": "search_tools", "input": {"query": "select:mcp__many__tool_012"}}
            ],
        },
        {
            "match": "1 tool\\(s\\) loaded",
            "tool_uses": [{"name": "mcp__many__tool_012", "input": {"query": "now"}}],
        },
        {"match": "tool 12 got 'now'", "text": "done"},
    ]
    agent, model = make_agent(tmp_path, steps, allow=["mcp__many"])
    toolset = install_mcp(agent, many, budget_chars=2_000)
    assert toolset.deferred
    result = agent.run_turn("use tool 12")
    assert (result.transition, result.text) == ("completed", "done")
    model.inner.assert_consumed()
    first, _, third, _ = model.requests
    assert "mcp__many__tool_012" not in tool_names(first)
    assert "search_tools" in tool_names(first)
    assert "mcp__many__tool_012" in tool_names(third)
    assert "mcp__many__tool_013" not in tool_names(third)
    system = "\n".join(b.text for b in first.system)
    assert "# MCP servers" in system and "mcp__many__tool_049" in system
    # a fixed order: the agent's own tools, then MCP's; a tool loaded later goes last
    assert tool_names(third) == [*tool_names(first), "mcp__many__tool_012"]
    own = [n for n in tool_names(first) if "mcp" not in n and n != "search_tools"]
    assert tool_names(first) == [
        *sorted(own),
        "list_mcp_resources",
        "read_mcp_resource",
        "search_tools",
    ]
    agent.close()


def test_a_resumed_agent_gets_back_the_tools_it_had_loaded(
    many: McpManager, tmp_path: Path
) -> None:
    steps = [
        {"tool_uses": [{"name": "search_tools", "input": {"query": "select:mcp__many__tool_003"}}]},
        {"text": "loaded"},
    ]
    agent, _ = make_agent(tmp_path, steps, allow=["mcp__many"])
    install_mcp(agent, many, budget_chars=2_000)
    agent.run_turn("load tool 3")
    agent.close()
    resumed = Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=tmp_path,
        model=ScriptedModel({"agents": {}}),
        policy=HarnessPolicy(Permissions(allow=["mcp__many"])),
        transcript_dir=tmp_path / ".team" / "transcripts",
        session_id="s1",
        resume=True,
    )
    toolset = install_mcp(resumed, many, budget_chars=2_000)
    assert toolset.loaded == {"mcp__many__tool_003"}
    assert "mcp__many__tool_003" in resumed.registry
    out = resumed.executor.run_one(
        ToolUseBlock(id="x", name="mcp__many__tool_003", input={"query": "q"}),
        resumed.tool_context,
    )
    assert out == ToolResultBlock(tool_use_id="x", content="tool 3 got 'q'")
    resumed.close()


def test_colliding_tools_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    manager = McpManager(
        load_mcp_servers(tmp_path, {"dup": basic_server("--collide")}), root=tmp_path
    )
    try:
        toolset = McpToolset.build(manager)
        assert "mcp__dup__get_item" not in toolset.tools
        assert "mcp__dup__echo" in toolset.tools
        assert any("'get.item'" in e and "'get_item'" in e for e in toolset.errors)
        assert "normalise to mcp__dup__get_item" in toolset.prompt_section()
    finally:
        manager.close()


def test_a_server_that_fails_is_left_out_and_named_in_the_prompt(tmp_path: Path) -> None:
    servers = {"ok": basic_server(), "bad": basic_server("--crash-on-start")}
    manager = McpManager(
        load_mcp_servers(tmp_path, servers), root=tmp_path, log_dir=tmp_path / "logs"
    )
    try:
        toolset = McpToolset.build(manager)
        assert {t.server for t in toolset.tools.values()} == {"ok"}
        section = toolset.prompt_section()
        assert "- error: bad: unavailable: MCP server 'bad' did not start" in section
        assert "configuration broken" in section  # the tail of its stderr
    finally:
        manager.close()
