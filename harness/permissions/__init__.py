"""Whether an agent may make a tool call: rules, modes, paths, shell commands, hooks, approver.

- ``checks``: ``Permissions``: the decision for one tool call (``CheckResult``).
- ``policy``: ``HarnessPolicy``: the ``ToolPolicy`` of an agent: hooks, permissions, approver.
- ``rules``: ``Rule``, ``parse_rules``: ``Tool`` and ``Tool(specifier)`` rules.
- ``paths``: ``resolve``, ``PathPattern``, ``protected_reason``: paths, confinement, protection.

Internal: ``shell`` (the checks of a shell command, part by part) and ``verdict`` (``Verdict``).
"""

__all__ = ["checks", "paths", "policy", "rules"]
