"""One agent: the loop, its model clients, tools, permissions and context; no team.

Subpackages:

- ``model``: ``ModelClient`` implementations: Anthropic, scripted, the local fake Messages API.
- ``tools``: the tool contract (``Tool``, ``ToolPolicy``), the executor and the built-in tools.
- ``permissions``: ``Permissions`` (rules, modes, paths, shell) and ``HarnessPolicy``.
- ``shell``: shell command analysis and the bubblewrap sandbox.
- ``context``: the system prompt, compaction, memory and skills.
- ``mcp``: MCP servers: configuration, client sessions, MCP tools.

Modules:

- ``ports``: every seam to the outside world (``ModelClient``, ``Clock``, ...) and its values.
- ``loop``: ``AgentLoop``: one turn as steps (a model call and its tool batch).
- ``agent``: ``Agent``/``AgentConfig``: one agent assembled from the parts above.
- ``hooks``: ``HookRunner``: command hooks from settings, and in-process ones.
- ``transcript``: ``Transcript``, ``load_transcript``: append-only conversation files, resume.
- ``settings``: the ``permissions``, ``hooks`` and ``sandbox`` settings the harness reads.
- ``host_setup``: ``open_mcp``, ``install_mcp_tools``, ``install_sandbox``: what a host adds.
- ``headless``: ``run_ask``: the logic of ``teamctl ask``.
- ``errors``: ``HarnessError`` and its family.

``harness`` never imports ``actors`` or ``mailboxes``. Like every ``__init__`` of the project,
this file imports nothing: import the modules themselves.
"""

__all__ = [
    "agent",
    "context",
    "errors",
    "headless",
    "hooks",
    "host_setup",
    "loop",
    "mcp",
    "model",
    "permissions",
    "ports",
    "settings",
    "shell",
    "tools",
    "transcript",
]
