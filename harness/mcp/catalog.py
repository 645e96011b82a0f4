"""The MCP tools one agent is offered, and deferred loading through ``search_tools``.

``McpToolset.build`` starts the agent's servers (in parallel; those already running for another
agent are reused), names every tool ``mcp__<server>__<tool>`` (pairs that collide after
normalisation are refused, with the error in the prompt section) and measures their specs. When
they fit in ``tool_budget_chars`` every tool is offered in full. Otherwise only a catalog (name and
one-line description per tool) goes into the system prompt, and ``search_tools(query)`` returns
the full schemas of matching tools and makes them callable from the next model call on.

``install_mcp(agent, manager)`` is the one call the runtime needs: it adds the tools to the
agent's registry, the "MCP servers" section to its system prompt, and re-loads deferred tools that
the agent's (resumed) conversation already used, so a resumed call still finds its tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from harness.mcp.client import McpManager, McpToolInfo
from harness.mcp.config import McpError, assign_names
from harness.mcp.tools import ListMcpResourcesTool, McpTool, ReadMcpResourceTool, make_tool
from harness.ports import ToolUseBlock
from harness.tools.base import Tool, ToolContext, ToolOutput
from harness.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from harness.agent import Agent

SEARCH_TOOL = "search_tools"
_WORD = re.compile(r"[a-z0-9]+")


def spec_size(tool: McpTool) -> int:
    """Characters the tool's spec costs in a request."""
    return len(json.dumps(tool.spec().model_dump(), ensure_ascii=False))


class McpToolset:
    """MCP tools for one agent: all of them, or a catalog plus the ones loaded by search."""

    def __init__(
        self,
        manager: McpManager,
        tools: Sequence[McpTool],
        *,
        servers: Sequence[str],
        errors: Sequence[str] = (),
        budget_chars: int | None = None,
    ) -> None:
        self.manager = manager
        self.servers = list(servers)
        self.errors = list(errors)
        self.tools = {t.name: t for t in sorted(tools, key=lambda t: t.name)}
        budget = manager.options.tool_budget_chars if budget_chars is None else budget_chars
        self.total_chars = sum(spec_size(t) for t in self.tools.values())
        self.deferred = self.total_chars > budget
        self.loaded: set[str] = set() if self.deferred else set(self.tools)
        self._registry: ToolRegistry | None = None
        self._section: str | None = None

    @classmethod
    def build(
        cls,
        manager: McpManager,
        servers: Sequence[str] | None = None,
        *,
        budget_chars: int | None = None,
        only: Callable[[str], bool] | None = None,
    ) -> McpToolset:
        """Start ``servers`` (default: all configured) and collect their tools (those whose
        model-facing name ``only`` accepts, when given); a server that fails to start is left out,
        with its error in ``errors`` (and the prompt section)."""
        names = list(servers) if servers is not None else manager.names()
        errors: list[str] = []

        def listing(name: str) -> tuple[McpToolInfo, ...] | McpError:
            try:
                return manager.tools(name)
            except McpError as exc:
                return exc

        infos: list[McpToolInfo] = []
        if names:
            with ThreadPoolExecutor(max_workers=min(8, len(names)), thread_name_prefix="mcp") as p:
                for name, found in zip(names, p.map(listing, names), strict=True):
                    if isinstance(found, McpError):
                        errors.append(f"{name}: unavailable: {found}")
                    else:
                        infos.extend(found)
        by_pair = {(i.server, i.name): i for i in infos}
        assigned, clashes = assign_names(list(by_pair))
        errors += clashes
        max_desc = manager.options.max_description_chars
        tools = [
            make_tool(manager, by_pair[pair], name, max_description=max_desc)
            for pair, name in assigned.items()
            if only is None or only(name)
        ]
        return cls(manager, tools, servers=names, errors=errors, budget_chars=budget_chars)

    # -- what the agent gets -----------------------------------------------------------------

    def initial_tools(self) -> list[Tool[Any]]:
        """Tools to register now: resource tools, and every MCP tool or ``search_tools``."""
        out: list[Tool[Any]] = []
        if self.servers:
            out += [
                ListMcpResourcesTool(self.manager, self.servers),
                ReadMcpResourceTool(self.manager, self.servers),
            ]
        if self.deferred:
            out.append(SearchToolsTool(self))
        else:
            out += list(self.tools.values())
        return out

    def bind(self, registry: ToolRegistry) -> None:
        """Where ``search_tools`` registers the tools it loads (the agent's registry)."""
        self._registry = registry

    def load(self, names: Sequence[str]) -> list[McpTool]:
        """Make ``names`` callable (already loaded or unknown names are skipped)."""
        added = []
        for name in names:
            tool = self.tools.get(name)
            if tool is None or name in self.loaded:
                continue
            if self._registry is not None and name not in self._registry:
                self._registry.add(tool)
            self.loaded.add(name)
            added.append(tool)
        return added

    def search(self, query: str, limit: int = 5) -> list[McpTool]:
        """Tools best matching ``query`` (``select:a,b`` picks exact names), best first."""
        if query.startswith("select:"):
            wanted = [n.strip() for n in query[len("select:") :].split(",") if n.strip()]
            return [self.tools[n] for n in wanted if n in self.tools][:limit]
        words = _WORD.findall(query.lower())
        if not words:
            return []
        scored = []
        for name, tool in self.tools.items():
            lname, ldesc = name.lower(), tool.description.lower()
            score = sum(3 * (w in lname) + (w in ldesc) for w in words)
            if query.strip() == name:
                score += 100
            if score:
                scored.append((-score, name, tool))
        return [t for _, _, t in sorted(scored)[:limit]]

    def prompt_section(self) -> str:
        """The "MCP servers" part of the system prompt (built once: the text stays byte-stable
        for the prompt cache)."""
        if self._section is None:
            self._section = self._render_section() if self.servers else ""
        return self._section

    def _render_section(self) -> str:
        lines = [
            "Tools of MCP servers are named mcp__<server>__<tool>. Server annotations (read-only, "
            "destructive) are the server's own hints: they are not verified and grant nothing."
        ]
        for name in self.servers:
            st = self.manager.status(name)
            count = sum(1 for t in self.tools.values() if t.server == name)
            about = f"{st.server_name} {st.server_version}".strip() if st.server_name else ""
            lines.append(f"- {name}{f' ({about})' if about else ''}: {count} tools")
        lines += [f"- error: {e}" for e in self.errors]
        lines.append(
            "Resources: list_mcp_resources lists them; read_mcp_resource reads one by URI."
        )
        if self.deferred:
            lines.append(
                f"There are too many MCP tools to load them all. Call {SEARCH_TOOL} with words "
                "from the catalog below (or `select:<name>,<name>`) to get their schemas; they "
                "are callable after that."
            )
            for name, tool in self.tools.items():
                lines.append(f"  {name}: {_one_line(tool.info.description)}")
        return "\n".join(lines)

    def restore(self, messages: Sequence[Any]) -> list[McpTool]:
        """Load the deferred tools a (resumed) conversation already called or searched."""
        used: list[str] = []
        for message in messages:
            for block in getattr(message, "content", ()):
                if isinstance(block, ToolUseBlock):
                    if block.name in self.tools:
                        used.append(block.name)
                    elif block.name == SEARCH_TOOL:
                        query = str(block.input.get("query", ""))
                        limit = int(block.input.get("max_results", 5) or 5)
                        used += [t.name for t in self.search(query, limit)]
        return self.load(used)


def _one_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no description)"
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


class SearchToolsInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(
        min_length=1,
        description="Words to look for in tool names and descriptions, or `select:<name>,...`.",
    )
    max_results: int = Field(default=5, ge=1, le=20, description="Most tools to return.")


class SearchToolsTool(Tool[SearchToolsInput]):
    name = SEARCH_TOOL
    description = (
        "Find MCP tools from the catalog in the system prompt and load them: returns the full "
        "schema of each match, and the matches can be called from your next message on."
    )
    input_model = SearchToolsInput

    def __init__(self, toolset: McpToolset) -> None:
        self.toolset = toolset

    def is_read_only(self, args: SearchToolsInput) -> bool:
        return True

    def run(self, args: SearchToolsInput, ctx: ToolContext) -> ToolOutput:
        found = self.toolset.search(args.query, args.max_results)
        if not found:
            return ToolOutput(
                f"No MCP tool matches {args.query!r}. The catalog in the system prompt lists them."
            )
        self.toolset.load([t.name for t in found])
        specs = [t.spec().model_dump() for t in found]
        head = f"{len(found)} tool(s) loaded; you can call them now:"
        return ToolOutput(head + "\n" + json.dumps(specs, ensure_ascii=False, indent=1))


def install_mcp(
    agent: Agent,
    manager: McpManager,
    servers: Sequence[str] | None = None,
    *,
    budget_chars: int | None = None,
    only: Callable[[str], bool] | None = None,
) -> McpToolset:
    """Give ``agent`` the MCP tools of ``servers`` (default: all), sharing ``manager``'s
    sessions; adds the "MCP servers" prompt section. ``only`` (a predicate on tool names) keeps
    the agent to some of the tools, ``search_tools`` excepted. Call once, before the agent's
    first turn."""
    toolset = McpToolset.build(manager, servers, budget_chars=budget_chars, only=only)
    for tool in toolset.initial_tools():
        if only is not None and tool.name != SEARCH_TOOL and not only(tool.name):
            continue
        if tool.name not in agent.registry:
            agent.registry.add(tool)
    toolset.bind(agent.registry)
    agent.system.add_section("MCP servers", toolset.prompt_section)
    toolset.restore(agent.messages)
    return toolset
