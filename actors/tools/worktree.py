"""The lead's worktree tools: ``create_worktree`` and ``merge_worktree`` (no tool removes one).

Both go through the Worktrees actor (``WorktreeOps`` is the slice of ``WorktreesHandle`` they
use). ``merge_worktree`` changes the main checkout, so its permission request is a destructive
write with no path: with no rule naming it the harness asks (an allow rule such as
``merge_worktree`` in ``permissions.allow`` lifts that). A conflict is returned to the model as an
error listing the conflicting files, so the lead can create a follow-up task.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from pydantic import BaseModel, Field

from actors.errors import TeamError
from actors.worktrees.messages import Created, MergeResult
from harness.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolOutput
from harness.tools.registry import AnyTool
from teamctl_base.models import Frozen


class WorktreeOps(Protocol):
    """What the tools need from the Worktrees actor (``WorktreesHandle`` provides it)."""

    def create(self, name: str, task_id: str, base: str | None = None) -> Created: ...

    def merge(self, name: str, *, squash: bool = False) -> MergeResult: ...


class CreateWorktreeInput(Frozen):
    name: str = Field(
        min_length=1,
        max_length=64,
        description="Letters, digits, '.', '_', '-'; the branch is wt/<name>.",
    )
    task_id: str = Field(description="A pending, unclaimed task to bind it to.")
    base: str | None = Field(
        None, description="Branch, tag or commit to start from (default: HEAD)."
    )


class MergeWorktreeInput(Frozen):
    name: str = Field(min_length=1, description="The worktree to merge.")
    squash: bool = Field(False, description="One squash commit instead of a merge commit.")


class CreateWorktreeTool(Tool[CreateWorktreeInput]):
    name: ClassVar[str] = "create_worktree"
    description: ClassVar[str] = (
        "Create a git worktree .worktrees/<name> on a new branch, bound to a pending task: "
        "whoever claims the task works only there, apart from other teammates' files. Merge it "
        "with merge_worktree once the task is completed."
    )
    input_model: ClassVar[type[BaseModel]] = CreateWorktreeInput

    def __init__(self, ops: WorktreeOps) -> None:
        self._ops = ops

    def run(self, args: CreateWorktreeInput, ctx: ToolContext) -> ToolOutput:
        try:
            made = self._ops.create(args.name, args.task_id, args.base)
        except TeamError as exc:
            raise ToolError(str(exc)) from None
        return ToolOutput(
            f"Created worktree {made.name} at {made.path} on branch {made.branch} "
            f"(from {made.base}, {made.base_commit[:12]}), bound to {made.task_id}. "
            f"The teammate that claims {made.task_id} will work there."
        )


class MergeWorktreeTool(Tool[MergeWorktreeInput]):
    name: ClassVar[str] = "merge_worktree"
    description: ClassVar[str] = (
        "Merge a worktree's branch, once its task is completed, into the main checkout's branch "
        "(fast-forward when possible). A conflict changes nothing and lists the files: create "
        "a follow-up task to resolve them. A task's verify command must pass on the merge result "
        "(its output is shown otherwise)."
    )
    input_model: ClassVar[type[BaseModel]] = MergeWorktreeInput

    def __init__(self, ops: WorktreeOps) -> None:
        self._ops = ops

    def is_destructive(self, args: MergeWorktreeInput) -> bool:
        return True

    def permission_request(self, args: MergeWorktreeInput, ctx: ToolContext) -> PermissionRequest:
        # A write with no path: the harness default for it is "ask".
        return PermissionRequest(tool=self.name, kind="write", destructive=True)

    def run(self, args: MergeWorktreeInput, ctx: ToolContext) -> ToolOutput:
        try:
            result = self._ops.merge(args.name, squash=args.squash)
        except TeamError as exc:
            raise ToolError(str(exc)) from None
        return merge_output(result)


def merge_output(result: MergeResult) -> ToolOutput:
    """What the model is told about one merge."""
    if result.already_merged:
        return ToolOutput(f"{result.name} is already merged into {result.into}; nothing to do.")
    if result.ok:
        how = "fast-forward" if result.fast_forward else ("squash" if result.squash else "merge")
        if result.verified:
            how += " (its verify command passed on the merge result)"
        return ToolOutput(
            f"Merged {result.name} ({result.task_id}) into {result.into} by {how}; "
            f"{result.into} is now at {(result.commit or '')[:12]}."
        )
    if result.conflicts:
        files = "\n".join(f"- {path}" for path in result.conflicts)
        return ToolOutput(
            f"Merging {result.name} ({result.task_id}) into {result.into} conflicts; nothing "
            f"was changed. Conflicting files:\n{files}\nCreate a follow-up task to resolve them.",
            is_error=True,
        )
    return ToolOutput(f"{result.name} was not merged: {result.reason}", is_error=True)


def worktree_tools(ops: WorktreeOps) -> list[AnyTool]:
    """The lead's worktree tools over ``ops``."""
    return [CreateWorktreeTool(ops), MergeWorktreeTool(ops)]
