"""The ``teamctl`` command line: thin click commands over the other subpackages.

- ``main``: ``cli``, the root group (one place where domain errors become one line) and ``main``.
- ``team``, ``tasks``, ``messages``, ``journal``, ``approvals``, ``ops``, ``worktree``: commands
  on the durable team state (``init``/``status``, ``task ...``, ``send``/``inbox``, ``events``,
  ``approve``/``reject``, ``jobs``/``cron``, ``worktree ...``).
- ``run``: ``run``, ``resume``, ``join``, ``stop``: the commands that host the team runtime.
- ``watch``, ``demo``, ``scenario``: the live view, the demo, scripted scenarios.
- ``ask``, ``mcp``: ``teamctl ask`` (one agent, no team) and ``teamctl mcp list|call``.
- ``common``: helpers shared by the commands (open the team, print JSON and tables).

Command modules import only click and light modules at load time (``tests/actors/cli``).
"""

__all__ = ["main"]
