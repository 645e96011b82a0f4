"""A teammate's task tools: claim, complete, release, submit a plan
(docs/ARCHITECTURE.md, "The task board").

Fencing: every write about the teammate's task carries the epoch of its current claim as the
board shows it now; the board checks it under the journal lock, so a teammate that lost its claim
(presumed dead, released, re-claimed by someone else) cannot complete or release it. A refused
claim is an ordinary answer, not an error.

Completing a task bound to a worktree first commits whatever the teammate left uncommitted there
on ``wt/<name>`` (through the Worktrees actor, with a message naming the task), pushes the branch
to the shared remote when the team shares branches (docs/SCALE-OUT.md, "Code across hosts"; a
failed push refuses the completion), then journals ``task.completed`` with the branch's commit
and remote, then unlocks the worktree: the branch the lead merges, on any host, holds all the
work. Claiming such a task where other hosts may join but this clone has no shared remote adds
one line saying that the branch cannot travel.

Verified tasks (docs/ARCHITECTURE.md, "Verified tasks"): a task with a ``verify`` command is
completed only once that command exits 0, run first (before the TaskCompleted hook) in the task's
worktree, or the main checkout when it has none, with the agent's sandbox and command
environment. Each run is journaled (``task.verified``); a failure is a tool error showing the
command's capped output, so the teammate's turn goes on and it can fix the work.

Terminal tools (``Tool.ends_turn``, docs/ARCHITECTURE.md "Fewer model calls"): ``complete_task``,
``release_task`` and ``submit_plan`` leave the model nothing to say, so a batch that ends with one
of them (and in which nothing failed) ends the teammate's turn without another model call; the
idle notification carries the outcome to the lead. ``claim_task`` is not terminal (work follows).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import Field

from actors.board.state import Task
from actors.errors import NotOwner
from actors.protocols import submit_plan
from actors.tools.base import Input, TeamTool, as_json, task_detail
from actors.tools.hooks import run_task_completed_hook
from actors.worktrees.git import WorktreeError
from actors.worktrees.messages import Shared, completion_message
from actors.worktrees.verify import Verifier
from harness.shell.sandbox import SANDBOX_KEY, Sandbox
from harness.tools.base import ToolContext, ToolError, ToolOutput

log = logging.getLogger(__name__)


def _held(tool: TeamTool[Any], tid: str) -> Task:
    """``tid`` if the tool's agent holds it now (fresh from the journal), else ``NotOwner``."""
    task = tool.services.board.refresh().task(tid)
    if task.status != "in_progress" or task.owner != tool.agent:
        raise NotOwner(tid, tool.agent, task.owner if task.status == "in_progress" else None)
    return task


class ClaimTaskInput(Input):
    task_id: str = Field(description="A ready task (see list_tasks).")


class ClaimTaskTool(TeamTool[ClaimTaskInput]):
    name = "claim_task"
    description = (
        "Claim a ready task so that you, and only you, work on it. You can hold one task at a "
        "time. If someone was faster, the answer says so: pick another."
    )
    input_model = ClaimTaskInput
    plan_safe = True

    def call(self, args: ClaimTaskInput, ctx: ToolContext) -> ToolOutput:
        board = self.services.board
        result = board.claim(args.task_id, self.agent)
        if not result.ok or result.task is None:
            return ToolOutput(f"Not claimed: {args.task_id} — {result.reason}.")
        task = result.task
        text = f"Claimed {task.id} (epoch {task.epoch}): {task.subject}"
        if task.plan.required:
            text += "\nThis task needs an approved plan: stay read-only and call submit_plan first."
        worktrees = self.services.worktrees
        if task.worktree is not None and worktrees is not None:
            warning = worktrees.sharing_warning()
            if warning:
                text += f"\nwarning: {warning}"
        return ToolOutput(f"{text}\n{as_json(task_detail(task, board.state))}")


class CompleteTaskInput(Input):
    task_id: str = Field(description="The task you hold.")
    summary: str = Field(
        min_length=1, description="What you did and the outcome (dependents will read it)."
    )


class CompleteTaskTool(TeamTool[CompleteTaskInput]):
    name = "complete_task"
    description = (
        "Mark the task you hold as completed, with a summary of the outcome (the lead reads it). "
        "Call it last: it ends your turn. A task with a verify command is completed only once "
        "that command exits 0 (you see its output otherwise), and a TaskCompleted hook may "
        "refuse with feedback: address it and retry."
    )
    input_model = CompleteTaskInput
    ends_turn = True
    # not plan_safe: finishing work is not allowed while a plan is pending

    def call(self, args: CompleteTaskInput, ctx: ToolContext) -> ToolOutput:
        task = _held(self, args.task_id)
        if task.verify is not None:
            refused = self._verify(task, task.verify, ctx)
            if refused is not None:
                return refused
        feedback = run_task_completed_hook(
            self.seat.hooks, self.agent, task, args.summary, cwd=ctx.cwd, ctx=ctx
        )
        if feedback is not None:
            return ToolOutput(
                f"Completion of {task.id} refused by a TaskCompleted hook:\n{feedback}\n"
                "Address this, then call complete_task again.",
                is_error=True,
            )
        worktrees = self.services.worktrees
        commit = None
        shared: Shared | None = None
        if task.worktree is not None and worktrees is not None:
            message = completion_message(task.id, task.subject, self.agent)
            commit = worktrees.commit_all(task.worktree, message)  # a failure refuses completion
            try:
                shared = worktrees.share(task.worktree)
            except WorktreeError as exc:
                committed = f" (your changes were committed: {commit[:12]})" if commit else ""
                return ToolOutput(
                    f"Completion of {task.id} refused: {exc}\nYour work is on "
                    f"wt/{task.worktree}{committed}. The task is still yours: call complete_task "
                    "again to retry, or release_task saying what blocks it.",
                    is_error=True,
                )
        # In one commit with other teammates' writes that meet it (``TeamServices.complete_task``).
        done = self.services.complete_task(
            task.id,
            self.agent,
            task.epoch,
            args.summary,
            commit=shared.commit if shared else None,
            remote=shared.remote if shared else None,
        )
        text = f"Completed {task.id}."
        if commit is not None:
            text += (
                f" Your uncommitted changes were committed on wt/{task.worktree} ({commit[:12]})."
            )
        if shared is not None and shared.remote is not None:
            text += f" Pushed {shared.branch} ({shared.commit[:12]}) to {shared.remote}."
        if done.unblocked:
            text += " Now ready: " + ", ".join(done.unblocked) + "."
        if task.worktree is not None and worktrees is not None:
            try:
                worktrees.unlock(task.worktree)
            except Exception as exc:  # bookkeeping only: the completion stands
                log.warning("worktree %s: unlock failed: %s", task.worktree, exc)
        return ToolOutput(text)

    def _verify(self, task: Task, command: str, ctx: ToolContext) -> ToolOutput | None:
        """Run ``command`` where the task's work is and journal the run; the refusal when it
        failed (None: it passed)."""
        worktrees, where = self.services.worktrees, task.worktree
        if worktrees is not None and where is not None:
            cwd = worktrees.path(where)
        else:
            cwd, where = self.services.repo_root, None  # no Worktrees actor: work is here
        if not cwd.is_dir():
            raise ToolError(f"cannot verify {task.id}: {cwd} does not exist")
        sandbox = ctx.extra.get(SANDBOX_KEY)
        verifier = Verifier(timeout_s=self.services.settings.team.verify_timeout_s)
        outcome = verifier.run(
            command,
            cwd=cwd,
            sandbox=sandbox if isinstance(sandbox, Sandbox) else None,
            env=ctx.command_env().environment(),
        )
        self.services.board.record_verification(outcome.event(task.id, "complete", worktree=where))
        if outcome.passed:
            return None
        return ToolOutput(
            f"Completion of {task.id} refused: its {outcome.report()}\n"
            "The task is still yours: fix the work until the command passes, then call "
            "complete_task again.",
            is_error=True,
        )


class ReleaseTaskInput(Input):
    task_id: str = Field(description="The task you hold.")
    reason: str = Field(min_length=1, description="Why you give it back (others will read it).")


class ReleaseTaskTool(TeamTool[ReleaseTaskInput]):
    name = "release_task"
    description = (
        "Give back the task you hold, unfinished, so someone else can claim it. Ends your turn."
    )
    input_model = ReleaseTaskInput
    plan_safe = True
    ends_turn = True

    def call(self, args: ReleaseTaskInput, ctx: ToolContext) -> ToolOutput:
        task = _held(self, args.task_id)
        self.services.board.release(task.id, self.agent, task.epoch, args.reason)
        return ToolOutput(f"Released {task.id}; it is pending again.")


class SubmitPlanInput(Input):
    plan: str = Field(
        min_length=1, description="Your plan: the steps and the files you will change."
    )


class SubmitPlanTool(TeamTool[SubmitPlanInput]):
    name = "submit_plan"
    description = (
        "Submit your plan for the task you hold for review. Until it is approved you may only "
        "use read-only tools. The answer arrives as a plan_approval_response message. Ends your "
        "turn."
    )
    input_model = SubmitPlanInput
    plan_safe = True
    ends_turn = True

    def call(self, args: SubmitPlanInput, ctx: ToolContext) -> ToolOutput:
        task = self.services.board.refresh().holding(self.agent)
        if task is None:
            raise ToolError("you hold no task: claim one before submitting a plan")
        sub = submit_plan(self.services, self.agent, args.plan, epoch=task.epoch)
        who = "a human (teamctl plans)" if sub.reviewer == "human" else sub.reviewer
        return ToolOutput(
            f"Plan submitted for {sub.request.task_id} (request {sub.request.request_id}); "
            f"{who} will review it. End your turn and wait for the plan_approval_response."
        )
