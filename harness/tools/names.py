"""Our built-in tools under the names and input fields Claude Code gives them.

Hooks and permission rules written for Claude Code name ``Bash``, ``Read``, ``Write``, ``Edit``,
``Glob``, ``Grep``, ``Task``/``Agent``, ``Skill`` and ``TodoWrite``, and read ``file_path`` where
our file tools take ``path``. ``claude_call`` turns one of our calls into Claude Code's shape (for
hook payloads); ``our_input`` turns an input in Claude Code's shape back into ours (a hook's
``updatedInput``). Tools without a Claude Code twin (team tools, ``mcp__*``) keep their names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CLAUDE_NAMES: Mapping[str, str] = {
    "bash": "Bash",
    "read_file": "Read",
    "write_file": "Write",
    "edit_file": "Edit",
    "glob": "Glob",
    "grep": "Grep",
    "task": "Task",
    "load_skill": "Skill",
    "todo_write": "TodoWrite",
}
"""Our tool name → Claude Code's name for the same tool."""

OUR_NAMES: Mapping[str, str] = {claude: ours for ours, claude in CLAUDE_NAMES.items()} | {
    "Agent": "task",  # Claude Code's newer name for Task
    "MultiEdit": "edit_file",
}
"""Claude Code's tool names (including aliases) → our tool name."""

_FIELDS: Mapping[str, Mapping[str, str]] = {
    "read_file": {"path": "file_path"},
    "write_file": {"path": "file_path"},
    "edit_file": {"path": "file_path"},
    "load_skill": {"name": "skill"},
}
"""Per tool, our input field → Claude Code's field (fields not listed keep their name)."""


def claude_name(tool: str) -> str:
    """Claude Code's name for ``tool`` (itself when there is no twin)."""
    return CLAUDE_NAMES.get(tool, tool)


def claude_call(tool: str, tool_input: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(name, input)`` of one of our calls as Claude Code would show it to a hook."""
    fields = _FIELDS.get(tool, {})
    return claude_name(tool), {fields.get(k, k): v for k, v in tool_input.items()}


def our_input(tool: str, claude_input: Mapping[str, Any]) -> dict[str, Any]:
    """An input in Claude Code's shape (``updatedInput``) back in our tool's field names."""
    back = {claude: ours for ours, claude in _FIELDS.get(tool, {}).items()}
    return {back.get(k, k): v for k, v in claude_input.items()}
