"""The lead's team tools: members, tasks, plans, permission answers and cron
(docs/ARCHITECTURE.md, "Add a tool")."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from actors.board.protocols import decide_permission
from actors.protocols import lead_review_plan, request_plan
from actors.services import MemberView, TeammateSpec
from actors.tools.base import Input, TeamTool, as_json, task_state
from actors.tools.hooks import run_task_created_hook
from harness.tools.base import ToolContext, ToolError, ToolOutput

# --- members -------------------------------------------------------------------------------------


class SpawnTeammateInput(Input):
    name: str = Field(description="Unique name: letters, digits, '-', '_'.")
    role: str = Field("general", description="Its kind of work (a task's role limits claims).")
    prompt: str = Field(description="Its instructions: goal, constraints, how to report.")
    model: str | None = Field(None, description="Model id (default: the team's).")
    task_id: str | None = Field(
        None, description="A ready task to claim for it first; if taken, no teammate starts."
    )
    plan_required: bool = Field(False, description="Needs a plan approved before any change.")
    tools: list[str] | None = Field(None, description="Restrict its tools to these names.")
    worktree: bool = Field(False, description="Give its task its own git worktree.")


def member_json(m: MemberView, now: float) -> dict[str, object]:
    """One member as ``list_teammates`` shows it."""
    view: dict[str, object] = {"name": m.name, "status": m.status, "role": m.role}
    if m.kind != "agent":
        view["kind"] = m.kind
    view["task"] = m.task_id
    if m.worktree:
        view["worktree"] = m.worktree
    if m.last_activity is not None:
        view["last_activity_s_ago"] = round(max(0.0, now - m.last_activity), 1)
    view["tokens_used"] = m.tokens_used
    return view


class SpawnTeammateTool(TeamTool[SpawnTeammateInput]):
    name = "spawn_teammate"
    description = (
        "Start a teammate working in parallel. It reports back by message and an idle "
        "notification when it finishes a turn."
    )
    input_model = SpawnTeammateInput

    def call(self, args: SpawnTeammateInput, ctx: ToolContext) -> ToolOutput:
        spec = TeammateSpec(
            name=args.name,
            role=args.role,
            prompt=args.prompt,
            model=args.model,
            task_id=args.task_id,
            plan_required=args.plan_required,
            tools=tuple(args.tools) if args.tools is not None else None,
            worktree=args.worktree,
        )
        view = self.services.spawn_teammate(spec, by=self.agent)
        parts = [f"Spawned teammate {view.name}"]
        if view.task_id:
            parts.append(f"working on {view.task_id}")
        if view.worktree:
            parts.append(f"in worktree {view.worktree}")
        if args.plan_required:
            parts.append("plan approval required before it writes")
        return ToolOutput(", ".join(parts) + ".")


class ListTeammatesInput(Input):
    pass


class ListTeammatesTool(TeamTool[ListTeammatesInput]):
    name = "list_teammates"
    description = (
        "List team members as JSON: status (starting, working, idle, waiting_plan_approval, "
        "waiting_permission, stalled, stopped, crashed), task, worktree, last activity, "
        "tokens used."
    )
    input_model = ListTeammatesInput
    read_only = True
    concurrency_safe = True

    def call(self, args: ListTeammatesInput, ctx: ToolContext) -> ToolOutput:
        now = self.seat.now()
        rows = [member_json(m, now) for m in self.services.members() if m.name != self.agent]
        return ToolOutput(as_json(rows) if rows else "No teammates yet.")


class RequestShutdownInput(Input):
    name: str = Field(description="The teammate to stop.")


class RequestShutdownTool(TeamTool[RequestShutdownInput]):
    name = "request_shutdown"
    description = (
        "Ask a teammate to finish its step, release or complete its task and stop; it answers "
        "with a shutdown_response message."
    )
    input_model = RequestShutdownInput

    def call(self, args: RequestShutdownInput, ctx: ToolContext) -> ToolOutput:
        if args.name == self.agent:
            raise ToolError("you cannot request your own shutdown")
        rid = self.services.request_shutdown(args.name, by=self.agent)
        return ToolOutput(f"Shutdown requested from {args.name} (request {rid}).")


# --- plans and permissions ----------------------------------------------------------------------


class RequestPlanInput(Input):
    name: str = Field(description="The teammate.")
    task_id: str = Field(description="The task it holds.")


class RequestPlanTool(TeamTool[RequestPlanInput]):
    name = "request_plan"
    description = (
        "Make a teammate submit a plan for its task; it stays read-only until you approve it "
        "with review_plan."
    )
    input_model = RequestPlanInput

    def call(self, args: RequestPlanInput, ctx: ToolContext) -> ToolOutput:
        req = request_plan(self.services, args.name, args.task_id, by=self.agent)
        return ToolOutput(
            f"Asked {args.name} for a plan on {args.task_id} (request {req.request_id})."
        )


class ReviewPlanInput(Input):
    request_id: str = Field(description="The plan_approval_request's request_id.")
    approve: bool = Field(description="True approves, false rejects.")
    feedback: str = Field("", description="What to change (required to reject).")


class ReviewPlanTool(TeamTool[ReviewPlanInput]):
    name = "review_plan"
    description = (
        "Approve or reject a submitted plan: approval lets the teammate write for its current "
        "claim; a rejection sends it your feedback to revise and resubmit."
    )
    input_model = ReviewPlanInput

    def call(self, args: ReviewPlanInput, ctx: ToolContext) -> ToolOutput:
        if not args.approve and not args.feedback.strip():
            raise ToolError("say what to change: a rejection needs feedback")
        review = lead_review_plan(
            self.services, args.request_id, args.approve, args.feedback, reviewer=self.agent
        )
        who, tid = review.request.teammate, review.request.task_id
        if args.approve:
            return ToolOutput(f"Approved the plan of {who} for {tid}; it may now make changes.")
        return ToolOutput(f"Rejected the plan of {who} for {tid}; your feedback was sent.")


class AnswerPermissionInput(Input):
    request_id: str = Field(description="The permission_request's request_id.")
    allow: bool = Field(description="True allows the call, false denies it.")
    reason: str = Field("", description="Why (shown to the teammate on a denial).")


class AnswerPermissionTool(TeamTool[AnswerPermissionInput]):
    name = "answer_permission"
    description = "Allow or deny the tool call a teammate's permission_request waits on."
    input_model = AnswerPermissionInput

    def call(self, args: AnswerPermissionInput, ctx: ToolContext) -> ToolOutput:
        route = self.services.settings.approvals.permissions
        if route != "lead":
            raise ToolError(
                f"permission requests are answered by the {route} in this team "
                "(settings approvals.permissions), not by the lead"
            )
        answer = decide_permission(
            self.services.board, args.request_id, args.allow, by=self.agent, reason=args.reason
        )
        if not answer.first:
            return ToolOutput(
                f"Request {args.request_id} was already decided: {answer.decision} by "
                f"{answer.by}" + (f" ({answer.reason})." if answer.reason else ".")
            )
        return ToolOutput(f"Request {args.request_id}: {answer.decision}.")


# --- tasks ---------------------------------------------------------------------------------------


class CreateTaskInput(Input):
    subject: str = Field(min_length=1, description="Short imperative title (max 500 chars).")
    description: str = Field("", description="What done looks like; context the worker needs.")
    blocked_by: list[str] = Field(
        default_factory=list, description="Ids of tasks that must complete first."
    )
    plan_required: bool = Field(False, description="Its claimer needs a plan approved first.")
    role: str | None = Field(None, description="Only teammates of this role may claim it.")
    verify: str | None = Field(
        None,
        min_length=1,
        description=(
            "Shell command that must exit 0 (in its worktree or the checkout) before it can "
            "complete, and on the merge result before merge_worktree lands it; e.g. 'pytest -q'."
        ),
    )


class CreateTaskTool(TeamTool[CreateTaskInput]):
    name = "create_task"
    description = (
        "Add a task; idle teammates claim ready ones (dependencies completed), lowest id first."
    )
    input_model = CreateTaskInput

    def call(self, args: CreateTaskInput, ctx: ToolContext) -> ToolOutput:
        refusal = run_task_created_hook(
            self.seat.hooks,
            self.agent,
            subject=args.subject,
            description=args.description,
            blocked_by=args.blocked_by,
            role=args.role,
            cwd=ctx.cwd,
            ctx=ctx,
        )
        if refusal is not None:
            raise ToolError(f"task refused by a TaskCreated hook: {refusal}")
        board = self.services.board
        task = board.create(
            args.subject,
            args.description,
            blocked_by=args.blocked_by,
            plan_required=args.plan_required,
            role=args.role,
            verify=args.verify,
        )
        return ToolOutput(f"Created {task.id} ({task_state(task, board.state)}).")


class UpdateTaskInput(Input):
    task_id: str = Field(description="The task to change.")
    subject: str | None = Field(None, description="New subject.")
    description: str | None = Field(None, description="New description.")
    add_blocked_by: list[str] = Field(default_factory=list, description="Dependencies to add.")
    remove_blocked_by: list[str] = Field(
        default_factory=list, description="Dependencies to remove."
    )


class UpdateTaskTool(TeamTool[UpdateTaskInput]):
    name = "update_task"
    description = "Change a task's subject, description or dependencies (cycles are refused)."
    input_model = UpdateTaskInput

    def call(self, args: UpdateTaskInput, ctx: ToolContext) -> ToolOutput:
        board = self.services.board
        before = board.refresh().task(args.task_id)
        task = board.update(
            args.task_id,
            subject=args.subject,
            description=args.description,
            add_blocked_by=args.add_blocked_by,
            remove_blocked_by=args.remove_blocked_by,
        )
        if task == before:
            return ToolOutput(f"{task.id} unchanged.")
        deps = ", ".join(task.blocked_by) or "none"
        return ToolOutput(f"Updated {task.id} (blocked by: {deps}).")


# --- cron ----------------------------------------------------------------------------------------


class ScheduleCronInput(Input):
    cron: str = Field(description="Five fields: minute hour day month weekday.")
    prompt: str = Field(min_length=1, description="What you are told when it fires.")
    recurring: bool = Field(True, description="False: fire once, at the next slot.")
    tz: str | None = Field(None, description="IANA time zone (default: local).")


class ScheduleCronTool(TeamTool[ScheduleCronInput]):
    name = "schedule_cron"
    description = "Wake you with a prompt (a cron_fired message) on a cron schedule."
    input_model = ScheduleCronInput

    def call(self, args: ScheduleCronInput, ctx: ToolContext) -> ToolOutput:
        view = self.services.schedule_cron(
            args.cron, args.prompt, recurring=args.recurring, tz=args.tz, owner=self.agent
        )
        kind = "recurring" if view.recurring else "one-shot"
        return ToolOutput(f"Scheduled {kind} cron {view.cron_id}; next fire {view.next_fire}.")


class ListCronsInput(Input):
    pass


class ListCronsTool(TeamTool[ListCronsInput]):
    name = "list_crons"
    description = "List scheduled cron jobs as JSON."
    input_model = ListCronsInput
    read_only = True
    concurrency_safe = True

    def call(self, args: ListCronsInput, ctx: ToolContext) -> ToolOutput:
        crons = self.services.list_crons()
        if not crons:
            return ToolOutput("No cron jobs scheduled.")
        rows = [
            {
                "cron_id": c.cron_id,
                "cron": c.cron,
                "prompt": c.prompt,
                "recurring": c.recurring,
                "tz": c.tz,
                "next_fire": c.next_fire,
            }
            for c in crons
        ]
        return ToolOutput(as_json(rows))


class CancelCronInput(Input):
    cron_id: str = Field(description="The cron job to cancel.")


class CancelCronTool(TeamTool[CancelCronInput]):
    name = "cancel_cron"
    description = "Cancel a scheduled cron job."
    input_model = CancelCronInput

    def call(self, args: CancelCronInput, ctx: ToolContext) -> ToolOutput:
        self.services.cancel_cron(args.cron_id, by=self.agent)
        return ToolOutput(f"Cancelled cron {args.cron_id}.")


# --- workflows -----------------------------------------------------------------------------------


class WorkflowInput(Input):
    name: str | None = Field(
        None, description="Workflow to run: `.team/workflows/<name>.py` or a packaged one."
    )
    args: Any = Field(None, description="Its args (any JSON value).")
    resume_from_run_id: str | None = Field(
        None, description="Resume this run instead; recorded steps are not redone."
    )


class WorkflowTool(TeamTool[WorkflowInput]):
    name = "workflow"
    description = (
        "Run a saved workflow of the project (its steps become tasks for teammates) and wait "
        "for its JSON result, or resume an unfinished run."
    )
    input_model = WorkflowInput

    def call(self, args: WorkflowInput, ctx: ToolContext) -> ToolOutput:
        from actors.workflows.engine import WorkflowEngine

        engine = WorkflowEngine(self.services, actor=self.agent)
        if args.resume_from_run_id is not None:
            outcome = engine.resume(args.resume_from_run_id)
        elif args.name is not None:
            outcome = engine.start(args.name, args.args)
        else:
            raise ToolError("give the workflow's name, or resume_from_run_id")
        for worker in outcome.spawned:  # the run's own workers: asked to leave
            self.services.request_shutdown(worker, by=self.agent)
        text = as_json(outcome.as_json())
        if outcome.status != "completed":
            return ToolOutput(text, is_error=True)
        return ToolOutput(text)
