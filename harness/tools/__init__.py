"""The tool contract, the tool pipeline and the built-in tools.

- ``base``: ``Tool``, ``ToolContext``, ``ToolOutput``, ``ToolError``, ``PermissionRequest``,
  ``ToolPolicy``: the contract shared by built-in, team and MCP tools.
- ``registry``: ``ToolRegistry``, ``builtin_tools``: the tools one agent can call.
- ``executor``: ``ToolExecutor``: a batch of ``tool_use`` blocks in, one result per call out.
- ``bash``, ``files``, ``search``, ``todo``, ``subagent``, ``skill_tool``, ``compact_tool``:
  the built-in tools.
- ``outputs``, ``paths``: bounded output with spill files; path confinement of file tools.
"""

__all__ = [
    "base",
    "bash",
    "compact_tool",
    "executor",
    "files",
    "outputs",
    "paths",
    "registry",
    "search",
    "skill_tool",
    "subagent",
    "todo",
]
