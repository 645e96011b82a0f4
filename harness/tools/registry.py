"""The set of tools one agent can call, by the name the model sees."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from harness.errors import HarnessError
from harness.ports import ToolSpec
from harness.tools.base import Tool
from harness.tools.bash import BashTool
from harness.tools.files import file_tools
from harness.tools.todo import TodoStore, TodoWriteTool

AnyTool = Tool[Any]


class DuplicateToolError(HarnessError, ValueError):
    """A tool with this name is already registered."""


class ToolRegistry:
    """Tools by name. ``specs`` and ``names`` are sorted by name so the prompt prefix is stable.

    Not thread-safe for mutation: build it before the agent runs, then only read it.
    """

    def __init__(self, tools: Iterable[AnyTool] = ()) -> None:
        self._tools: dict[str, AnyTool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: AnyTool) -> None:
        """Register ``tool``; raises ``DuplicateToolError`` if its name is taken."""
        if tool.name in self._tools:
            raise DuplicateToolError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> AnyTool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Every tool name, sorted."""
        return sorted(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tool specs for a model request, sorted by name."""
        return tuple(self._tools[name].spec() for name in self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[AnyTool]:
        return iter(self._tools[name] for name in self.names())


def builtin_tools(todos: TodoStore | None = None) -> list[AnyTool]:
    """Fresh instances of the built-in tools: bash, the file tools and todo_write."""
    return [BashTool(), *file_tools(), TodoWriteTool(todos)]
