"""What a host (``teamctl ask``, the team runtime) adds to the agents it builds: the repository's
MCP servers and the bash sandbox.

- ``open_mcp(root, settings_servers)``: one ``McpManager`` per host process for the servers of
  ``.mcp.json`` and the settings' ``mcpServers``, or ``None`` when neither configures one (then
  nothing of the ``mcp`` SDK, nor of the MCP client, is imported). The host owns it and calls
  ``close`` when it stops, which stops every server process.
- ``install_mcp_tools(agent, manager, tool_names)``: the MCP tools one agent gets. With
  ``tool_names=None`` (an unrestricted agent) every tool of every server. An agent restricted to
  a list of tool names gets only the MCP tools the list names: an exact ``mcp__<server>__<tool>``,
  a pattern (``mcp__<server>__*``, ``fnmatch`` syntax, as in permission rules) or a whole server
  (``mcp__<server>``); ``list_mcp_resources``/``read_mcp_resource`` only when named (they then
  cover the servers the list names). Servers the list does not name are not started for it. A
  list naming no MCP tool gets none, and no "MCP servers" prompt section.
- ``install_sandbox(agent, settings)``: the agent's ``Sandbox`` under ``SANDBOX_KEY`` in its tool
  context, where ``bash`` (and the agent's subagents, which inherit it) look for it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.mcp.config import TOOL_PREFIX, load_mcp_config, normalize_part
from harness.settings import SandboxSettings
from harness.shell.sandbox import SANDBOX_KEY, Sandbox

if TYPE_CHECKING:
    from harness.agent import Agent
    from harness.mcp.catalog import McpToolset
    from harness.mcp.client import McpManager
    from harness.shell.environment import CommandEnv

__all__ = ["McpSelection", "install_mcp_tools", "install_sandbox", "open_mcp"]

RESOURCE_TOOLS = ("list_mcp_resources", "read_mcp_resource")


def open_mcp(
    root: Path,
    settings_servers: Mapping[str, Any] | None = None,
    command_env: CommandEnv | None = None,
) -> McpManager | None:
    """The manager of the configured servers (none started yet; stdio ones get the environment
    ``command_env`` builds), or ``None`` when there are none; a bad entry disables that server
    only, ``McpConfigError`` for a file that is not JSON."""
    if not load_mcp_config(root, settings_servers).names:
        return None
    from harness.mcp.client import McpManager

    return McpManager.from_config(root, settings_servers, command_env=command_env)


@dataclass(frozen=True)
class McpSelection:
    """Which MCP tools an agent restricted to ``tool_names`` may have (``None``: all)."""

    patterns: tuple[str, ...] | None
    resources: bool = True

    @classmethod
    def of(cls, tool_names: Collection[str] | None) -> McpSelection:
        if tool_names is None:
            return cls(None)
        patterns = []
        for name in sorted(tool_names):
            if name.startswith(TOOL_PREFIX):
                rest = name[len(TOOL_PREFIX) :]
                patterns.append(name if "__" in rest else f"{name}__*")
        return cls(tuple(patterns), resources=any(n in RESOURCE_TOOLS for n in tool_names))

    def allows(self, tool: str) -> bool:
        """True when the agent may have the tool named ``tool``."""
        if self.patterns is None:
            return True
        if tool in RESOURCE_TOOLS:
            return self.resources
        return any(fnmatch.fnmatchcase(tool, p) for p in self.patterns)

    def servers(self, configured: Sequence[str]) -> list[str]:
        """The configured servers the selection can use (in ``configured`` order)."""
        if self.patterns is None:
            return list(configured)
        parts = [p[len(TOOL_PREFIX) :].split("__", 1)[0] for p in self.patterns]
        return [
            s for s in configured if any(fnmatch.fnmatchcase(normalize_part(s), p) for p in parts)
        ]


def install_mcp_tools(
    agent: Agent, manager: McpManager, tool_names: Collection[str] | None = None
) -> McpToolset | None:
    """Give ``agent`` the MCP tools ``tool_names`` allows (see the module docstring), sharing
    ``manager``'s servers; ``None`` when it allows none. Call before the agent's first turn."""
    from harness.mcp.catalog import install_mcp

    selection = McpSelection.of(tool_names)
    servers = selection.servers(manager.names())
    if not servers:
        return None
    return install_mcp(agent, manager, servers, only=selection.allows)


def install_sandbox(agent: Agent, settings: SandboxSettings | None = None) -> Sandbox:
    """Run ``agent``'s ``bash`` commands under a ``Sandbox`` with ``settings``."""
    sandbox = Sandbox(settings or SandboxSettings())
    agent.tool_context.extra[SANDBOX_KEY] = sandbox
    return sandbox
