"""What every team tool shares: the seat it acts from, error handling, task views, and the
tools both the lead and teammates have (``list_tasks``, ``get_task``, ``send_message``).

Team tools follow the harness tool contract, fail-closed: a tool is ``read_only`` only when it
changes nothing (``list_tasks``, ``get_task``, ``list_teammates``, ``list_crons``), and may run
while its agent plans (``plan`` mode, or a plan waiting for approval) only when it is read-only or
says ``plan_safe``: the coordination a planning teammate needs (``claim_task``,
``release_task``, ``send_message``, ``submit_plan``). Everything else, such as ``complete_task``,
``create_task`` or ``spawn_teammate``, is refused while planning. Domain errors (``TeamError``,
``MailboxesError``) become a ``ToolError``: the model reads one clean line.
"""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, Field

from actors.board.board import acting_as
from actors.errors import TeamError
from harness.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolOutput
from mailboxes.errors import MailboxesError
from mailboxes.messages import BROADCAST
from teamctl_base.models import Frozen

if TYPE_CHECKING:
    from actors.board.state import Task, TeamState
    from actors.services import TeamServices
    from harness.hooks import HookRunner

Args = TypeVar("Args", bound=BaseModel)


@dataclass
class Seat:
    """Who the tools act for, and what they act through."""

    services: TeamServices
    agent: str
    hooks: HookRunner | None = None
    now: Callable[[], float] = field(default=time.time)


class Input(Frozen):
    """Base of every team tool input: strict, frozen."""


class TeamTool(Tool[Args]):
    """A tool acting for ``seat.agent``. Subclasses implement ``call``."""

    read_only: ClassVar[bool] = False
    """Changes nothing at all (a new tool that does not say so counts as changing things)."""
    plan_safe: ClassVar[bool] = False
    """Changes only what planning needs, so it may run while the agent plans."""
    concurrency_safe: ClassVar[bool] = False

    def __init__(self, seat: Seat) -> None:
        self.seat = seat

    @property
    def agent(self) -> str:
        return self.seat.agent

    @property
    def services(self) -> TeamServices:
        return self.seat.services

    def is_read_only(self, args: Args) -> bool:
        return self.read_only

    def is_concurrency_safe(self, args: Args) -> bool:
        return self.concurrency_safe

    def allowed_in_plan(self, args: Args) -> bool:
        return self.read_only or self.plan_safe

    def permission_request(self, args: Args, ctx: ToolContext) -> PermissionRequest:
        return PermissionRequest(tool=self.name, kind="other", read_only=self.allowed_in_plan(args))

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        try:
            with acting_as(self.agent):
                return self.call(args, ctx)
        except (TeamError, MailboxesError) as exc:
            raise ToolError(str(exc)) from None

    @abstractmethod
    def call(self, args: Args, ctx: ToolContext) -> ToolOutput:
        """Carry out the call; domain errors may propagate (they become tool errors)."""


def as_json(value: Any) -> str:
    """Structured tool output."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def task_state(task: Task, state: TeamState) -> str:
    """``ready``/``blocked`` for pending tasks, else the status."""
    if task.status == "pending":
        return "ready" if state.is_ready(task) else "blocked"
    return task.status


def task_brief(task: Task, state: TeamState) -> dict[str, Any]:
    """One line of ``list_tasks``."""
    brief: dict[str, Any] = {
        "id": task.id,
        "subject": task.subject,
        "status": task_state(task, state),
        "owner": task.owner,
    }
    if task.blocked_by:
        brief["blocked_by"] = list(task.blocked_by)
    if task.role:
        brief["role"] = task.role
    if task.plan.required:
        brief["plan"] = task.plan.status
    if task.worktree:
        brief["worktree"] = task.worktree
    return brief


def task_detail(task: Task, state: TeamState) -> dict[str, Any]:
    """Everything ``get_task`` shows."""
    detail = task_brief(task, state) | {
        "description": task.description,
        "blocked_by": list(task.blocked_by),
        "blocks": list(task.blocks),
        "epoch": task.epoch,
        "created_by": task.created_by,
    }
    if task.summary:
        detail["summary"] = task.summary
    if task.verify is not None:
        detail["verify"] = task.verify  # complete_task runs it; it must exit 0
    if task.plan.required:
        detail["plan"] = {
            "status": task.plan.status,
            "request_id": task.plan.request_id,
            "plan": task.plan.plan,
            "feedback": task.plan.feedback,
            "reviewer": task.plan.reviewer,
        }
    deps = [state.tasks[b] for b in task.blocked_by if b in state.tasks]
    outcomes = {d.id: d.summary for d in deps if d.status == "completed" and d.summary}
    if outcomes:
        detail["dependency_outcomes"] = outcomes
    if task.metadata:
        detail["metadata"] = dict(task.metadata)
    return detail


# --- shared tools --------------------------------------------------------------------------------

StatusFilter = Literal["all", "open", "ready", "pending", "in_progress", "completed"]


class ListTasksInput(Input):
    status: StatusFilter = Field(
        "open",
        description=(
            "Which tasks: open (pending or in progress, the default), ready, pending, "
            "in_progress, completed, or all (deleted tasks are never shown)."
        ),
    )


class ListTasksTool(TeamTool[ListTasksInput]):
    name = "list_tasks"
    description = (
        "List tasks on the team's board as JSON: id, subject, status (ready, blocked, "
        "in_progress, completed), owner, dependencies."
    )
    input_model = ListTasksInput
    read_only = True
    concurrency_safe = True

    def call(self, args: ListTasksInput, ctx: ToolContext) -> ToolOutput:
        state = self.services.board.refresh()
        rows = []
        for task in state.tasks.values():
            if task.status == "deleted":
                continue
            shown = task_state(task, state)
            keep = {
                "all": True,
                "open": task.status in ("pending", "in_progress"),
                "ready": shown == "ready",
                "pending": task.status == "pending",
                "in_progress": task.status == "in_progress",
                "completed": task.status == "completed",
            }[args.status]
            if keep:
                rows.append(task_brief(task, state))
        if not rows:
            return ToolOutput(f"No {args.status} tasks." if args.status != "all" else "No tasks.")
        return ToolOutput(as_json(rows))


class GetTaskInput(Input):
    task_id: str = Field(description="The task id, e.g. task_3.")


class GetTaskTool(TeamTool[GetTaskInput]):
    name = "get_task"
    description = (
        "Show one task as JSON: description, status, owner, dependencies and their outcomes, "
        "plan state and summary."
    )
    input_model = GetTaskInput
    read_only = True
    concurrency_safe = True

    def call(self, args: GetTaskInput, ctx: ToolContext) -> ToolOutput:
        state = self.services.board.refresh()
        return ToolOutput(as_json(task_detail(state.task(args.task_id), state)))


class SendMessageInput(Input):
    to: str = Field(description='A member name, or "*" to broadcast to every member.')
    text: str = Field(min_length=1, description="The message.")


class SendMessageTool(TeamTool[SendMessageInput]):
    name = "send_message"
    description = (
        'Send a message to a team member (or "*" for everyone). It is delivered durably to their '
        "inbox and wakes them. Your final answer is NOT seen by others: use this to tell them."
    )
    input_model = SendMessageInput
    plan_safe = True

    def call(self, args: SendMessageInput, ctx: ToolContext) -> ToolOutput:
        if args.to == self.agent:
            raise ToolError("you cannot send a message to yourself")
        kind = "broadcast" if args.to == BROADCAST else "message"
        sent = self.services.send(self.agent, args.to, kind, {"text": args.text})
        if args.to == BROADCAST:
            names = ", ".join(e.to for e in sent) or "nobody (no other members)"
            return ToolOutput(f"Broadcast delivered to {names}.")
        return ToolOutput(f"Message delivered to {args.to} (id {sent[0].id}).")
