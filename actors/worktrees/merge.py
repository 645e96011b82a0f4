"""Merging a completed task's worktree branch into the main checkout's branch.

The merge is first computed in memory (``git merge-tree --write-tree``), which touches no
checkout: a conflict is reported with its files and the main checkout is never modified. Only a
clean merge is then carried out for real (fast-forward when possible, else a merge commit, or one
squash commit), and if that still fails the main checkout is put back to its previous ``HEAD``.
Called only from the Worktrees actor.

A verified task (docs/ARCHITECTURE.md, "Verified tasks") is checked on the merge result before
it lands: the commit the merge would make is built without touching any branch (the branch tip
for a fast-forward, else ``git commit-tree`` of the in-memory merge), checked out detached in a
scratch worktree outside the repository, and the task's ``verify`` command runs there. Only when
it exits 0 is the base branch fast-forwarded to exactly that commit; otherwise nothing on the
base branch or in the main checkout changes and the result carries the command's output. Every
run is journaled (``task.verified``, stage ``merge``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from actors.board.board import Board
from actors.board.state import TeamState, WorktreeRecord
from actors.worktrees.git import Git, GitError, WorktreeError
from actors.worktrees.messages import MergeResult
from actors.worktrees.verify import Verifier, VerifyOutcome
from mailboxes.events import EventDraft, WorktreeMerged, draft


def _checks(git: Git, state: TeamState, record: WorktreeRecord, path: Path) -> tuple[str, str]:
    """(into branch, task id) after the refusals that are errors, not merge outcomes."""
    task = state.tasks.get(record.task_id) if record.task_id else None
    if task is None:
        raise WorktreeError(f"worktree {record.name!r} is not bound to a task")
    if task.status != "completed":
        raise WorktreeError(
            f"task {task.id} is {task.status}; only a completed task's branch is merged"
        )
    into = git.current_branch()
    if into is None:
        raise WorktreeError("the main checkout is on a detached HEAD; check out a branch first")
    if git.branch_exists(record.base) and record.base != into:
        raise WorktreeError(
            f"worktree {record.name!r} was made from {record.base} but the main checkout is on "
            f"{into}; check out {record.base} first"
        )
    dirty = git.dirty(untracked=False)
    if dirty:
        shown = ", ".join(line[3:] for line in dirty[:5])
        raise WorktreeError(
            f"the main checkout has uncommitted changes ({shown}); commit or stash them first"
        )
    if path.is_dir() and git.dirty(path):
        raise WorktreeError(
            f"worktree {record.name!r} has uncommitted changes; commit them on "
            f"{record.branch} first"
        )
    if not git.branch_exists(record.branch):
        raise WorktreeError(f"branch {record.branch} no longer exists")
    return into, task.id


def merge_one(
    git: Git,
    board: Board,
    state: TeamState,
    record: WorktreeRecord,
    path: Path,
    *,
    squash: bool,
    verifier: Verifier | None = None,
) -> MergeResult:
    """Merge ``record``'s branch into the main checkout's branch; journal ``worktree.merged``.
    A task with a ``verify`` command is merged only if the command passes on the merge result
    (run by ``verifier``, default: unsandboxed, this process's environment)."""
    into, tid = _checks(git, state, record, path)
    name, branch = record.name, record.branch
    head = git.out("rev-parse", "HEAD")
    tip = git.out("rev-parse", branch)
    if git.contains_changes(head, tip):
        return MergeResult(name, True, into, head, already_merged=True, squash=squash, task_id=tid)
    tree, conflicts = git.merge_tree(head, tip)
    if conflicts or tree is None:
        return MergeResult(
            name,
            False,
            into,
            squash=squash,
            conflicts=tuple(conflicts),
            reason=f"merging {branch} into {into} conflicts in: {', '.join(conflicts)}",
            task_id=tid,
        )
    subject = state.tasks[tid].subject
    message = f"Merge {branch} ({tid}: {subject})"
    squashed = f"{tid}: {subject} (squashed {branch})"
    fast = not squash and git.is_ancestor(head, tip)
    command = state.tasks[tid].verify
    candidate: str | None = None
    if command is not None:
        if fast:
            candidate = tip
        elif squash:
            candidate = _commit_tree(git, tree, (head,), squashed)
        else:
            candidate = _commit_tree(git, tree, (head, tip), message)
        outcome = _verify_commit(git, verifier or Verifier(), candidate, command)
        board.record_verification(outcome.event(tid, "merge", worktree=name, commit=candidate))
        if not outcome.passed:
            reason = f"the merge result fails its {outcome.report()}\n{into} was not changed"
            return MergeResult(
                name, False, into, squash=squash, reason=reason, task_id=tid, verified=False
            )
    try:
        if candidate is not None:
            git.run("merge", "--ff-only", "--quiet", candidate)  # exactly the verified commit
        elif fast:
            git.run("merge", "--ff-only", "--quiet", tip)
        elif squash:
            git.run("merge", "--squash", "--quiet", tip)
            git.commit(squashed)
        else:
            ident = git.identity_args()
            git.run(*ident, "merge", "--no-ff", "--no-edit", "--quiet", "-m", message, tip)
    except GitError as exc:
        _restore(git, head, merging=not squash and candidate is None)
        return MergeResult(name, False, into, squash=squash, reason=str(exc), task_id=tid)
    commit = git.out("rev-parse", "HEAD")

    def decision(_: TeamState) -> Sequence[EventDraft]:
        body = WorktreeMerged(name=name, into=into, commit=commit, squash=squash)
        return (draft(body.TYPE, board.actor, body),)

    board.execute(decision)
    verified = None if command is None else True
    return MergeResult(
        name, True, into, commit, fast_forward=fast, squash=squash, task_id=tid, verified=verified
    )


def _commit_tree(git: Git, tree: str, parents: tuple[str, ...], message: str) -> str:
    """A commit of ``tree`` on ``parents`` (the first is the base branch's ``HEAD``), written
    to the object store only: no ref and no checkout changes."""
    flags = [arg for parent in parents for arg in ("-p", parent)]
    return git.out(*git.identity_args(), "commit-tree", tree, *flags, "-m", message)


def _verify_commit(git: Git, verifier: Verifier, commit: str, command: str) -> VerifyOutcome:
    """Run ``command`` in a clean detached checkout of ``commit`` (removed afterwards)."""
    with _scratch_worktree(git, commit) as path:
        return verifier.run(command, cwd=path)


@contextmanager
def _scratch_worktree(git: Git, commit: str) -> Iterator[Path]:
    """A detached worktree of ``commit`` in a temporary directory outside the repository."""
    tmp = Path(tempfile.mkdtemp(prefix="teamctl-verify-"))
    path = tmp / "merge"
    try:
        git.run("worktree", "add", "--quiet", "--detach", str(path), commit)
        yield path
    finally:
        git.run("worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        git.run("worktree", "prune", check=False)


def _restore(git: Git, head: str, *, merging: bool) -> None:
    """Put the main checkout back to ``head`` after a failed merge (it was clean before)."""
    if merging:
        git.run("merge", "--abort", check=False)
    else:
        git.run("reset", "--quiet", "--merge", check=False)
    if git.out("rev-parse", "HEAD") != head or git.dirty(untracked=False):
        git.run("reset", "--quiet", "--hard", head)


def merge_target(git: Git, record: WorktreeRecord) -> str | None:
    """The branch a worktree's work should end up in: its base when that is a branch, else the
    main checkout's current branch (None when detached)."""
    if git.branch_exists(record.base):
        return record.base
    return git.current_branch()
