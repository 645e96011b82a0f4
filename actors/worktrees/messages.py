"""The Worktrees actor's messages and the values it answers with.

Messages are frozen pydantic models with a ``kind`` tag (as in ``actors.messages``; kept here so
the worktree family reads on one screen). Answers are frozen dataclasses; refusals that are a
normal outcome (a merge conflict) are values, commands that cannot be carried out raise
``WorktreeError`` through the reply future.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from teamctl_base.models import Frozen


class CreateWorktree(Frozen):
    """Make ``.worktrees/<name>`` on ``wt/<name>`` and bind it to a pending task → ``Created``."""

    kind: Literal["create_worktree"] = "create_worktree"
    name: str
    task_id: str
    base: str | None = None
    """A ref (branch, tag, commit); None = the main checkout's current ``HEAD``."""


class MergeWorktree(Frozen):
    """Merge a completed task's branch into the main checkout's branch → ``MergeResult``."""

    kind: Literal["merge_worktree"] = "merge_worktree"
    name: str
    squash: bool = False


class MergeAll(Frozen):
    """Merge every completed, unmerged worktree branch in task-id order → ``tuple[MergeResult]``."""

    kind: Literal["merge_all"] = "merge_all"
    squash: bool = False


class RemoveWorktree(Frozen):
    """Remove a worktree (host-owned; no model tool sends this) → ``Removed``."""

    kind: Literal["remove_worktree"] = "remove_worktree"
    name: str
    force: bool = False
    """Remove even while claimed, with a running job, or with uncommitted or unmerged work."""
    delete_branch: bool = False
    """Also delete ``wt/<name>`` (kept by default)."""


class LockWorktree(Frozen):
    """``git worktree lock`` (idempotent) → None."""

    kind: Literal["lock_worktree"] = "lock_worktree"
    name: str
    reason: str = ""


class UnlockWorktree(Frozen):
    """``git worktree unlock`` (idempotent) → None."""

    kind: Literal["unlock_worktree"] = "unlock_worktree"
    name: str


class CommitAll(Frozen):
    """Commit every leftover change in the worktree → the new commit id, or None if clean."""

    kind: Literal["commit_all"] = "commit_all"
    name: str
    message: str


class ShareBranch(Frozen):
    """At completion: the branch's tip, pushed to the shared remote when the team shares
    branches (``actors.worktrees.remote``) → ``Shared``; a failed push raises."""

    kind: Literal["share_branch"] = "share_branch"
    name: str


class DescribeSharing(Frozen):
    """The one-line warning when this clone's worktree branches cannot reach other hosts that
    may join the team → ``str | None`` (read-only)."""

    kind: Literal["describe_sharing"] = "describe_sharing"


class Reconcile(Frozen):
    """Compare git with the journal → ``ReconcileReport`` (changes nothing unless asked)."""

    kind: Literal["reconcile"] = "reconcile"
    prune: bool = False
    """Run ``git worktree prune`` for entries whose directory is gone."""
    repair: bool = False
    """Remove half-created worktrees (on disk, not in the journal, no work of their own) and
    journal ``worktree.removed`` for journaled worktrees git no longer has."""


class ListWorktrees(Frozen):
    """Every worktree the journal knows (removed ones when asked) → ``tuple[WorktreeView]``."""

    kind: Literal["list_worktrees"] = "list_worktrees"
    include_removed: bool = False


WorktreeMessage = Annotated[
    CreateWorktree
    | MergeWorktree
    | MergeAll
    | RemoveWorktree
    | LockWorktree
    | UnlockWorktree
    | CommitAll
    | ShareBranch
    | DescribeSharing
    | Reconcile
    | ListWorktrees,
    Field(discriminator="kind"),
]
WORKTREE_MESSAGE: TypeAdapter[WorktreeMessage] = TypeAdapter(WorktreeMessage)


@dataclass(frozen=True)
class Created:
    """A new worktree, bound to ``task_id``."""

    name: str
    branch: str
    base: str
    base_commit: str
    path: str
    """Absolute path of the worktree."""
    task_id: str


@dataclass(frozen=True)
class MergeResult:
    """The outcome of one merge. ``ok`` False: nothing changed; ``conflicts`` or ``reason``."""

    name: str
    ok: bool
    into: str = ""
    commit: str | None = None
    """The base branch's commit after the merge."""
    fast_forward: bool = False
    squash: bool = False
    already_merged: bool = False
    conflicts: tuple[str, ...] = ()
    reason: str = ""
    task_id: str | None = None
    verified: bool | None = None
    """The task's ``verify`` command on the merge result: passed, failed (``reason`` has its
    output), or None when the task has none or it did not run."""
    fetched_from: str | None = None
    """The remote the branch's recorded commit was fetched from first (it was worked in another
    clone); None = this clone had it."""


@dataclass(frozen=True)
class Shared:
    """A worktree branch's tip when its task completed, and the remote it was pushed to (None:
    it stays in this clone)."""

    name: str
    branch: str
    commit: str
    remote: str | None = None


@dataclass(frozen=True)
class Removed:
    name: str
    branch: str
    branch_deleted: bool
    forced: bool


@dataclass(frozen=True)
class WorktreeView:
    """One journaled worktree as ``teamctl worktree list`` shows it."""

    name: str
    branch: str
    base: str
    path: str
    task_id: str | None
    task_status: str | None
    owner: str | None
    exists: bool
    locked: bool
    removed: bool
    merged_commit: str | None


DriftKind = Literal["missing_directory", "unknown", "wrong_branch", "unbound", "not_registered"]


@dataclass(frozen=True)
class Drift:
    """One difference between git and the journal."""

    kind: DriftKind
    name: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.name}: {self.detail}"


@dataclass(frozen=True)
class ReconcileReport:
    drifts: tuple[Drift, ...] = ()
    pruned: bool = False
    repaired: tuple[str, ...] = ()
    """One line per repair made."""

    @property
    def clean(self) -> bool:
        return not self.drifts


def completion_message(task_id: str, subject: str, owner: str | None = None) -> str:
    """The message of the runtime's commit of a teammate's leftover changes."""
    by = f" by {owner}" if owner else ""
    return f"{task_id}: {subject}\n\nUncommitted changes left{by} when {task_id} completed."
