"""``harness.host_setup``: which MCP tools an agent gets (restricted lists), the manager only when
servers are configured, and the sandbox reaching ``bash`` in an agent and its subagents."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.agent import Agent, AgentConfig
from harness.host_setup import McpSelection, install_mcp_tools, install_sandbox, open_mcp
from harness.mcp.client import McpManager
from harness.mcp.config import load_mcp_servers
from harness.model.scripted import ScriptedModel
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolResultBlock
from harness.settings import SandboxSettings
from harness.shell.sandbox import SANDBOX_KEY, Sandbox
from tests.harness.mcp_servers import basic_server

needs_bwrap = pytest.mark.sandbox


# -- the selection (plain data) -----------------------------------------------------------------


def test_an_unrestricted_agent_gets_every_tool_of_every_server() -> None:
    sel = McpSelection.of(None)
    assert sel.allows("mcp__a__x") and sel.allows("list_mcp_resources")
    assert sel.servers(["a", "b"]) == ["a", "b"]


def test_a_restricted_list_names_tools_patterns_or_whole_servers() -> None:
    sel = McpSelection.of(["bash", "mcp__docs__search", "mcp__time__*", "mcp__git"])
    assert sel.allows("mcp__docs__search") and not sel.allows("mcp__docs__fetch")
    assert sel.allows("mcp__time__convert_time") and sel.allows("mcp__git__log")
    assert not sel.allows("mcp__other__x")
    assert not sel.allows("list_mcp_resources")  # not named
    assert sel.servers(["docs", "git", "other", "time"]) == ["docs", "git", "time"]


def test_server_names_are_matched_after_normalisation() -> None:
    sel = McpSelection.of(["mcp__my_server__ping", "read_mcp_resource"])
    assert sel.servers(["my.server", "my-server"]) == ["my.server"]
    assert sel.allows("read_mcp_resource") and sel.allows("list_mcp_resources")


def test_a_list_without_mcp_names_starts_no_server() -> None:
    assert McpSelection.of(["bash", "read_file"]).servers(["a"]) == []


# -- installing into a real agent with a real server ----------------------------------------------


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpManager]:
    root = tmp_path_factory.mktemp("mcp-host")
    m = McpManager(
        load_mcp_servers(root, {"basic": basic_server(), "spare": basic_server()}), root=root
    )
    yield m
    m.close()


def agent_on(root: Path, script: dict[str, Any] | None = None, **kw: Any) -> Agent:
    steps = script or {"steps": []}
    return Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=root,
        model=ScriptedModel({"agents": {"lead": steps}}),
        policy=HarnessPolicy(Permissions(allow=["Bash", "Write", "Edit"]), mode="acceptEdits"),
        **kw,
    )


def mcp_names(agent: Agent) -> set[str]:
    return {n for n in agent.registry.names() if n.startswith("mcp__") or "mcp_res" in n}


def test_an_unrestricted_agent_gets_all_tools(manager: McpManager, tmp_path: Path) -> None:
    agent = agent_on(tmp_path)
    toolset = install_mcp_tools(agent, manager)
    assert toolset is not None and toolset.servers == ["basic", "spare"]
    names = mcp_names(agent)
    assert {"mcp__basic__echo", "mcp__spare__add", "list_mcp_resources"} <= names


def test_a_restricted_agent_gets_only_what_its_list_names(
    manager: McpManager, tmp_path: Path
) -> None:
    agent = agent_on(tmp_path, tool_names={"read_file"})
    toolset = install_mcp_tools(agent, manager, ["read_file", "mcp__basic__echo", "mcp__spare__a*"])
    assert toolset is not None
    assert mcp_names(agent) == {"mcp__basic__echo", "mcp__spare__add"}
    section = "\n".join(b.text for b in agent.system.blocks())
    assert "- basic (test-basic 1.2.3): 1 tools" in section


def test_a_list_naming_no_mcp_tool_installs_nothing(manager: McpManager, tmp_path: Path) -> None:
    agent = agent_on(tmp_path)
    assert install_mcp_tools(agent, manager, ["bash"]) is None
    assert mcp_names(agent) == set()


def test_no_configured_server_means_no_manager_and_no_mcp_import(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from harness.host_setup import open_mcp; "
        f"assert open_mcp(Path({str(tmp_path)!r}), {{}}) is None; "
        "assert 'mcp' not in sys.modules and 'harness.mcp.client' not in sys.modules, "
        "sorted(m for m in sys.modules if 'mcp' in m)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"b": basic_server()}}))
    m = open_mcp(tmp_path)
    assert m is not None
    try:
        assert m.names() == ["b"] and m.status("b").state == "idle"  # nothing started yet
    finally:
        m.close()


# -- the sandbox --------------------------------------------------------------------------------


def bash_call(command: str) -> dict[str, Any]:
    return {"tool_uses": [{"name": "bash", "input": {"command": command}}]}


def results(agent: Agent) -> list[ToolResultBlock]:
    return [b for m in agent.messages for b in m.content if isinstance(b, ToolResultBlock)]


def test_install_sandbox_puts_it_where_bash_looks(tmp_path: Path) -> None:
    agent = agent_on(tmp_path)
    sandbox = install_sandbox(agent, SandboxSettings(enabled=False))
    assert agent.tool_context.extra[SANDBOX_KEY] is sandbox
    assert isinstance(sandbox, Sandbox) and sandbox.settings.enabled is False


def escape(outside: Path) -> str:
    """A command the permission rules cannot see writing outside the root (only the sandbox
    stops it), then a write inside it."""
    return f"{sys.executable} -c \"open('{outside}/escaped', 'w')\"; echo y > inside"


BYPASS = HarnessPolicy(Permissions(mode="bypassPermissions"), mode="bypassPermissions")


@needs_bwrap
@pytest.mark.parametrize("enabled", ["auto", False])
def test_a_subagent_runs_bash_under_its_parents_sandbox(tmp_path: Path, enabled: Any) -> None:
    root, outside = tmp_path / "repo", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    task = {"name": "task", "input": {"description": "write", "prompt": "write it"}}
    script = {
        "lead": {"steps": [{"tool_uses": [task]}, {"text": "done"}]},
        "lead.task-1": {"steps": [bash_call(escape(outside)), {"text": "ok"}]},
    }
    model = ScriptedModel({"agents": script})
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"), root=root, model=model, policy=BYPASS
    )
    install_sandbox(agent, SandboxSettings(enabled=enabled))
    assert agent.run_turn("go").transition == "completed"
    model.assert_consumed()
    assert (root / "inside").read_text() == "y\n"
    assert (outside / "escaped").exists() is (enabled is False)


def test_a_subagent_is_confined_to_its_parents_root(tmp_path: Path) -> None:
    """A teammate confined to a worktree (its tool context's root moved) passes that on."""
    worktree = tmp_path / "wt"
    worktree.mkdir()
    task = {"name": "task", "input": {"description": "write", "prompt": "write it"}}
    write = {"name": "write_file", "input": {"path": "../escaped.txt", "content": "x"}}
    script = {
        "lead": {"steps": [{"tool_uses": [task]}, {"text": "done"}]},
        "lead.task-1": {"steps": [{"tool_uses": [write]}, {"text": "tried"}]},
    }
    model = ScriptedModel({"agents": script})
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"), root=tmp_path, model=model, policy=BYPASS
    )
    agent.relocate(worktree, worktree, BYPASS)
    assert agent.run_turn("go").transition == "completed"
    model.assert_consumed()
    assert not (tmp_path / "escaped.txt").exists()
