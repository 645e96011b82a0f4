"""The tool set of a workflow step's worker (docs/ARCHITECTURE.md, "Workflows").

A step's task names its tool set in ``metadata["workflow"]["tools"]``; the teammate holding it
runs under ``StepTools`` around its policy, which denies, before anything else is consulted:

- ``none``: every tool but the task tools (the worker answers from the prompt);
- ``read-only``: every call that could not run in plan mode (``PermissionRequest.read_only``:
  writes, shell commands, spawning), except the task tools;
- a list of names: every tool not named, except the task tools;
- ``all``: nothing (the teammate's own policy decides, as for any task).

The task tools (``complete_task``, ``release_task``, ``list_tasks``, ``get_task``,
``send_message``) stay usable: the worker must be able to answer.

A ``worktree=True`` step's task is created with ``metadata[AWAITS_WORKTREE]`` and is not
``claimable`` (both in ``actors.board.rules``) until its worktree is bound (teammates check it
before claiming), so its worker always works in that worktree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.tools.base import PolicyVerdict

if TYPE_CHECKING:
    from actors.board.state import Task
    from harness.ports import ToolUseBlock
    from harness.tools.base import PermissionRequest, ToolContext, ToolOutput, ToolPolicy

TASK_TOOLS = frozenset({"complete_task", "release_task", "list_tasks", "get_task", "send_message"})


def step_tools(task: Task | None) -> str | tuple[str, ...] | None:
    """The tool set of ``task`` when it is a workflow step, else None."""
    if task is None:
        return None
    meta = task.metadata.get("workflow")
    if not isinstance(meta, Mapping):
        return None
    tools: Any = meta.get("tools", "read-only")
    if isinstance(tools, list | tuple):
        return tuple(str(t) for t in tools)
    return str(tools)


class StepTools:
    """A ``ToolPolicy`` applying a step's tool set, then deferring to ``inner``."""

    def __init__(self, inner: ToolPolicy, tools: str | tuple[str, ...]) -> None:
        self.inner = inner
        self.tools = tools

    @classmethod
    def around(cls, policy: ToolPolicy, task: Task | None) -> ToolPolicy:
        """``policy`` unwrapped from any ``StepTools``, then wrapped for ``task``'s step."""
        base = policy.inner if isinstance(policy, StepTools) else policy
        tools = step_tools(task)
        if tools is None or tools == "all":
            return base
        return cls(base, tools)

    def why_denied(self, request: PermissionRequest) -> str | None:
        if request.tool in TASK_TOOLS:
            return None
        if self.tools == "none":
            return "this workflow step allows no tools: answer with complete_task"
        if self.tools == "read-only" and not request.read_only:
            return f"this workflow step is read-only: {request.tool} may change things"
        if isinstance(self.tools, tuple) and request.tool not in self.tools:
            return f"this workflow step allows only {', '.join(self.tools)}"
        return None

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        why = self.why_denied(request)
        if why is not None:
            return PolicyVerdict("deny", why)
        return self.inner.before(call, request, ctx)

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        return self.inner.after(call, output, ctx)
