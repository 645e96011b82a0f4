"""The team tools given to agents through the harness tool contract
(docs/ARCHITECTURE.md, "Add a tool").

``lead_tools(services, agent)`` and ``teammate_tools(services, agent)`` build the tool lists; the
runtime adds them to each agent's registry next to the harness's file and shell tools. Every
tool acts for ``agent`` through ``TeamServices`` (journal-backed board, durable mail) and answers
with short text, JSON where the answer is structured.

When the services run a Worktrees actor (``services.worktrees``, as ``TeamRuntime`` does unless
started with ``worktrees=False``), the lead also gets ``create_worktree`` and ``merge_worktree``
(``WORKTREE_TOOL_NAMES``, after the others); no tool removes a worktree.

``hooks`` runs the ``TaskCreated``/``TaskCompleted`` hooks (default: the team settings' hooks);
pass ``None`` explicitly via ``hooks=NO_HOOKS`` to run none.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors.tools.base import (
    GetTaskTool,
    ListTasksTool,
    Seat,
    SendMessageTool,
    TeamTool,
)
from actors.tools.hooks import hook_runner_for
from actors.tools.lead import (
    AnswerPermissionTool,
    CancelCronTool,
    CreateTaskTool,
    ListCronsTool,
    ListTeammatesTool,
    RequestPlanTool,
    RequestShutdownTool,
    ReviewPlanTool,
    ScheduleCronTool,
    SpawnTeammateTool,
    UpdateTaskTool,
    WorkflowTool,
)
from actors.tools.teammate import ClaimTaskTool, CompleteTaskTool, ReleaseTaskTool, SubmitPlanTool
from actors.tools.worktree import CreateWorktreeTool, MergeWorktreeTool, WorktreeOps, worktree_tools
from harness.hooks import HookRunner
from harness.tools.base import Tool

if TYPE_CHECKING:
    from actors.services import TeamServices

__all__ = [
    "LEAD_TOOL_NAMES",
    "NO_HOOKS",
    "TEAMMATE_TOOL_NAMES",
    "WORKTREE_TOOL_NAMES",
    "Seat",
    "TeamTool",
    "lead_tools",
    "teammate_tools",
]

NO_HOOKS = HookRunner()
"""A runner with no hooks: pass it to build tools that run no team hooks."""

_LEAD = (
    SpawnTeammateTool,
    ListTeammatesTool,
    SendMessageTool,
    RequestShutdownTool,
    RequestPlanTool,
    ReviewPlanTool,
    AnswerPermissionTool,
    CreateTaskTool,
    UpdateTaskTool,
    ListTasksTool,
    GetTaskTool,
    ScheduleCronTool,
    ListCronsTool,
    CancelCronTool,
    WorkflowTool,
)
_TEAMMATE = (
    ListTasksTool,
    GetTaskTool,
    ClaimTaskTool,
    CompleteTaskTool,
    ReleaseTaskTool,
    SubmitPlanTool,
    SendMessageTool,
)

LEAD_TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in _LEAD)
"""Names of the lead's team tools, in the order ``lead_tools`` returns them."""
TEAMMATE_TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in _TEAMMATE)
"""Names of a teammate's team tools, in the order ``teammate_tools`` returns them."""
WORKTREE_TOOL_NAMES: tuple[str, ...] = (CreateWorktreeTool.name, MergeWorktreeTool.name)
"""The lead's worktree tools, added after ``LEAD_TOOL_NAMES`` when the team runs worktrees."""


def worktree_ops(services: TeamServices) -> WorktreeOps | None:
    """The services' Worktrees actor handle, if they run one."""
    ops: WorktreeOps | None = services.worktrees
    return ops


def _seat(
    services: TeamServices,
    agent: str,
    hooks: HookRunner | None,
    now: Callable[[], float] | None,
) -> Seat:
    runner = hooks if hooks is not None else hook_runner_for(services.settings)
    return Seat(services, agent, runner, now or time.time)


def lead_tools(
    services: TeamServices,
    agent: str = "lead",
    *,
    hooks: HookRunner | None = None,
    now: Callable[[], float] | None = None,
) -> list[Tool[Any]]:
    """The lead's team tools, acting as ``agent`` (plus the worktree tools when the services
    run worktrees)."""
    seat = _seat(services, agent, hooks, now)
    tools: list[Tool[Any]] = [cls(seat) for cls in _LEAD]
    ops = worktree_ops(services)
    if ops is not None:
        tools.extend(worktree_tools(ops))
    return tools


def teammate_tools(
    services: TeamServices,
    agent: str,
    *,
    hooks: HookRunner | None = None,
    now: Callable[[], float] | None = None,
) -> list[Tool[Any]]:
    """A teammate's team tools, acting as ``agent``."""
    seat = _seat(services, agent, hooks, now)
    return [cls(seat) for cls in _TEAMMATE]
