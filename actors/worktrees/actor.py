"""The Worktrees actor: the one owner of every git write of a team
(docs/ARCHITECTURE.md, "Worktrees").

One ``pykka.ThreadingActor`` serialises create, lock/unlock, commit, merge and remove, so two
``git worktree add`` never race on ``.git/config.lock``; across processes git's own locks and the
journal lock (``Board.execute``) decide. Git runs hardened (``actors.worktrees.git``).

Create is two steps: the git step (``git worktree add --no-track -b wt/<name>``), then the journal
step (``worktree.created`` + ``worktree.bound`` in one append, decided under the journal lock
against caught-up state, so a task claimed meanwhile is refused). If the journal step refuses or
fails, the git step is undone; whatever could not be undone is named in the error. A crash in
between leaves an unjournaled worktree that ``reconcile`` reports (``unknown``) and repairs.

The runtime calls ``lock``/``unlock`` on claim/release and ``commit_all`` then ``share`` on
completion (see ``WorktreesHandle``). Removal is host-owned: no model tool sends
``RemoveWorktree``.

Across hosts (``actors.worktrees.remote``, docs/SCALE-OUT.md "Code across hosts"): ``share``
pushes the branch to the shared remote when the team shares branches (``BranchSharing``), and a
merge in a clone without the branch first fetches exactly the commit the completion recorded.

Several processes may each run a Worktrees actor on one repository (the runtime, ``teamctl join``,
the ``teamctl worktree`` commands). Given a ``lock_path`` (``.team/worktrees.lock``), an actor
holds that flock for each message but ``ListWorktrees``, so their git writes never interleave
either (docs/ARCHITECTURE.md, "Locks").
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pykka

from actors.board.board import Board
from actors.board.state import TeamState, WorktreeRecord, task_number
from actors.worktrees.git import WORKTREES_DIR, Git, GitError, WorktreeError, branch_of, check_name
from actors.worktrees.merge import merge_one, merge_target
from actors.worktrees.messages import (
    CommitAll,
    Created,
    CreateWorktree,
    DescribeSharing,
    ListWorktrees,
    LockWorktree,
    MergeAll,
    MergeResult,
    MergeWorktree,
    Reconcile,
    ReconcileReport,
    Removed,
    RemoveWorktree,
    ShareBranch,
    Shared,
    UnlockWorktree,
    WorktreeView,
)
from actors.worktrees.reconcile import reconcile
from actors.worktrees.remote import PUSH_TIMEOUT_S, BranchSharing, fetch_completed, push_branch
from actors.worktrees.verify import VERIFY_TIMEOUT_S, Verifier
from mailboxes.events import EventDraft, WorktreeBound, WorktreeCreated, WorktreeRemoved, draft
from teamctl_base.crashpoints import crash_point

R = TypeVar("R")

JobProbe = Callable[[Path], bool]
"""True while a background job runs with its cwd inside the given worktree path."""
Fault = Callable[[str], None]
"""Called at named points (``worktree.after_git``) so tests can crash the process there."""
FAULT_ENV = "TEAMCTL_FAULT"


def fault_from_env(point: str) -> None:
    """SIGKILL this process at ``point`` when ``$TEAMCTL_FAULT`` names it (fault tests only)."""
    if os.environ.get(FAULT_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
    crash_point(point)  # the same points under $TEAMCTL_CRASH_AT


def bind_refusal(state: TeamState, name: str, task_id: str) -> str:
    """Why ``name`` may not be created for ``task_id`` now ("" = it may)."""
    record = state.worktrees.get(name)
    if record is not None and not record.removed:
        return f"worktree {name!r} already exists"
    task = state.tasks.get(task_id)
    if task is None:
        return f"unknown task {task_id!r}"
    if task.status != "pending":
        return f"task {task_id} is {task.status}; a worktree is made for a pending task only"
    if task.owner is not None:
        return f"task {task_id} is claimed by {task.owner}"
    if task.worktree is not None:
        return f"task {task_id} is already bound to worktree {task.worktree!r}"
    return ""


class Worktrees(pykka.ThreadingActor):
    """Owns every git write of the team. Replies: see ``actors.worktrees.messages``."""

    def __init__(
        self,
        root: Path,
        board: Board,
        *,
        job_running: JobProbe | None = None,
        fault: Fault = fault_from_env,
        git: Git | None = None,
        lock_path: Path | None = None,
        verifier: Verifier | None = None,
        sharing: BranchSharing | None = None,
    ) -> None:
        super().__init__()
        self._lock_path = lock_path
        self._sharing = sharing or BranchSharing()
        self._verifier = verifier or Verifier()
        self._git = git or Git(root)
        self._root = self._git.root
        self._board = board
        self._job_running = job_running
        self._fault = fault

    def on_stop(self) -> None:
        self._git.close()

    def on_failure(self, *_: object) -> None:
        self._git.close()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, ListWorktrees):
            return self._list(message.include_removed)
        if isinstance(message, DescribeSharing):
            return self._sharing.warning(self._git)
        with self._across_processes():
            return self._handle(message)

    @contextlib.contextmanager
    def _across_processes(self) -> Iterator[None]:
        """Hold ``lock_path`` (flock, exclusive; released by the kernel if we die)."""
        if self._lock_path is None:
            yield
            return
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _handle(self, message: Any) -> Any:
        match message:
            case CreateWorktree(name=name, task_id=task_id, base=base):
                return self._create(name, task_id, base)
            case MergeWorktree(name=name, squash=squash):
                return self._merge(self._board.refresh(), name, squash)
            case MergeAll(squash=squash):
                return self._merge_all(squash)
            case RemoveWorktree(name=name, force=force, delete_branch=delete):
                return self._remove(name, force=force, delete_branch=delete)
            case LockWorktree(name=name, reason=reason):
                return self._lock(name, reason)
            case UnlockWorktree(name=name):
                return self._unlock(name)
            case CommitAll(name=name, message=text):
                return self._commit_all(name, text)
            case ShareBranch(name=name):
                return self._share(name)
            case Reconcile(prune=prune, repair=repair):
                return reconcile(self._git, self._board, prune=prune, repair=repair)
            case _:
                raise TypeError(f"Worktrees cannot handle {message!r}")

    # --- helpers -------------------------------------------------------------------------------

    def _path(self, name: str) -> Path:
        return self._root / WORKTREES_DIR / name

    def _record(self, name: str) -> WorktreeRecord:
        record = self._board.refresh().worktrees.get(name)
        if record is None or record.removed:
            raise WorktreeError(f"no worktree named {name!r}")
        return record

    def _what_exists(self, name: str) -> list[str]:
        found = []
        if self._git.branch_exists(branch_of(name)):
            found.append(f"branch {branch_of(name)}")
        if os.path.lexists(self._path(name)):
            found.append(f"directory {WORKTREES_DIR}/{name}")
        return found

    # --- create --------------------------------------------------------------------------------

    def _create(self, name: str, task_id: str, base: str | None) -> Created:
        check_name(name)
        why = bind_refusal(self._board.refresh(), name, task_id)
        if why:
            raise WorktreeError(why)
        branch, path = branch_of(name), self._path(name)
        if self._git.branch_exists(branch):
            raise WorktreeError(f"branch {branch} already exists")
        if os.path.lexists(path):
            raise WorktreeError(f"{path} already exists")
        base_commit = self._git.rev(base or "HEAD")
        if base_commit is None:
            raise WorktreeError(f"base {base or 'HEAD'!r} does not name a commit")
        if base is None:
            label = self._git.current_branch() or base_commit
        else:
            label = base if self._git.branch_exists(base) else base_commit
        path.parent.mkdir(exist_ok=True)
        rel = f"{WORKTREES_DIR}/{name}"
        try:
            self._git.run(
                "worktree", "add", "--quiet", "--no-track", "-b", branch, rel, base_commit
            )
        except GitError as exc:
            raise WorktreeError(str(exc), exists=self._what_exists(name)) from None
        self._fault("worktree.after_git")

        def decision(state: TeamState) -> Sequence[EventDraft]:
            refused = bind_refusal(state, name, task_id)
            if refused:
                raise WorktreeError(refused)
            actor = self._board.actor
            created = WorktreeCreated(name=name, branch=branch, base=label, path=rel)
            bound = WorktreeBound(name=name, task_id=task_id)
            return (draft(created.TYPE, actor, created), draft(bound.TYPE, actor, bound))

        try:
            self._board.execute(decision)
        except Exception as exc:
            left = self._undo_create(name)
            if isinstance(exc, WorktreeError) and not left:
                raise
            raise WorktreeError(f"could not journal worktree {name!r}: {exc}", exists=left) from exc
        return Created(name, branch, label, base_commit, str(path), task_id)

    def _undo_create(self, name: str) -> list[str]:
        """Remove what the git step made; returns what is still there."""
        self._git.run("worktree", "remove", "--force", str(self._path(name)), check=False)
        if self._git.branch_exists(branch_of(name)):
            self._git.run("branch", "-D", branch_of(name), check=False)
        return self._what_exists(name)

    # --- claim / release / complete ------------------------------------------------------------

    def _locked(self, path: Path) -> bool:
        return any(w.path == path and w.locked for w in self._git.worktrees())

    def _lock(self, name: str, reason: str) -> None:
        self._record(name)
        path = self._path(name)
        if not self._locked(path):
            self._git.run("worktree", "lock", "--reason", reason or "claimed", str(path))

    def _unlock(self, name: str) -> None:
        self._record(name)
        path = self._path(name)
        if self._locked(path):
            self._git.run("worktree", "unlock", str(path))

    def _commit_all(self, name: str, message: str) -> str | None:
        self._record(name)
        path = self._path(name)
        if not path.is_dir():
            raise WorktreeError(f"worktree directory {path} is missing")
        if not self._git.dirty(path):
            return None
        self._git.run("add", "--all", cwd=path)
        return self._git.commit(message, cwd=path)

    def _share(self, name: str) -> Shared:
        record = self._record(name)
        commit = self._git.rev(record.branch)
        if commit is None:
            raise WorktreeError(f"branch {record.branch} does not exist in this clone")
        remote = self._sharing.target(self._git)
        if remote is not None:
            push_branch(self._git, remote, record.branch)
        return Shared(name, record.branch, commit, remote)

    # --- merge ---------------------------------------------------------------------------------

    def _merge(self, state: TeamState, name: str, squash: bool) -> MergeResult:
        record = state.worktrees.get(name)
        if record is None or record.removed:
            raise WorktreeError(f"no worktree named {name!r}")
        path = self._path(name)
        task = state.tasks.get(record.task_id) if record.task_id else None
        fetched = False
        if task is not None and task.status == "completed" and not path.is_dir():
            fetched = fetch_completed(self._git, record)  # worked in another clone
        result = merge_one(
            self._git, self._board, state, record, path, squash=squash, verifier=self._verifier
        )
        return dataclasses.replace(result, fetched_from=record.remote) if fetched else result

    def _merge_all(self, squash: bool) -> tuple[MergeResult, ...]:
        state = self._board.refresh()
        chosen = sorted(
            (
                r
                for r in state.worktrees.values()
                if not r.removed
                and r.task_id is not None
                and r.task_id in state.tasks
                and state.tasks[r.task_id].status == "completed"
            ),
            key=lambda r: task_number(r.task_id or ""),
        )
        results = []
        for record in chosen:
            result = self._merge(self._board.refresh(), record.name, squash)
            if not result.already_merged:
                results.append(result)
        return tuple(results)

    # --- remove --------------------------------------------------------------------------------

    def _remove(self, name: str, *, force: bool, delete_branch: bool) -> Removed:
        record = self._record(name)
        state = self._board.state
        path, branch = self._path(name), record.branch
        task = state.tasks.get(record.task_id) if record.task_id else None
        problems = []
        if task is not None and task.status == "in_progress":
            problems.append(f"task {task.id} is claimed by {task.owner}")
        if self._job_running is not None and self._job_running(path):
            problems.append("a background job is running in it")
        if path.is_dir():
            dirty = self._git.dirty(path)
            if dirty:
                problems.append(f"{len(dirty)} uncommitted change(s)")
        if self._git.branch_exists(branch):
            target = merge_target(self._git, record)
            if target is not None and not self._git.contains_changes(target, branch):
                problems.append(f"{branch} has work not merged into {target}")
        if problems and not force:
            raise WorktreeError(
                f"refusing to remove worktree {name!r}: " + "; ".join(problems) + " (use --force)"
            )
        if self._locked(path):
            self._git.run("worktree", "unlock", str(path))
        if path.is_dir():
            self._git.run("worktree", "remove", "--force", str(path))
        else:
            self._git.run("worktree", "prune")
        deleted = False
        if delete_branch and self._git.branch_exists(branch):
            self._git.run("branch", "-D", branch)
            deleted = True

        def decision(st: TeamState) -> Sequence[EventDraft]:
            current = st.worktrees.get(name)
            if current is None or current.removed:
                return ()
            body = WorktreeRemoved(name=name, branch_deleted=deleted)
            return (draft(body.TYPE, self._board.actor, body),)

        self._board.execute(decision)
        return Removed(name, branch, deleted, bool(problems))

    # --- list ----------------------------------------------------------------------------------

    def _list(self, include_removed: bool) -> tuple[WorktreeView, ...]:
        state = self._board.refresh()
        entries = {w.path: w for w in self._git.worktrees()}
        views = []
        for record in state.worktrees.values():
            if record.removed and not include_removed:
                continue
            path = self._root / record.path
            task = state.tasks.get(record.task_id) if record.task_id else None
            entry = entries.get(path)
            views.append(
                WorktreeView(
                    name=record.name,
                    branch=record.branch,
                    base=record.base,
                    path=str(path),
                    task_id=record.task_id,
                    task_status=task.status if task else None,
                    owner=task.owner if task else None,
                    exists=path.is_dir(),
                    locked=bool(entry and entry.locked),
                    removed=record.removed,
                    merged_commit=record.merged_commit,
                )
            )
        return tuple(views)


class WorktreesHandle:
    """Typed calls to a running ``Worktrees`` actor (each waits for the reply; errors raised by
    the actor are raised here).

    What the team runtime calls:

    - on claim of a task bound to worktree ``w``: ``lock(w, reason)``, then run the teammate with
      ``cwd = root = path(w)`` and the policy from ``actors.worktrees.confine.confine_policy``;
    - on release: ``unlock(w)``;
    - on completion: ``commit_all(w, completion_message(task))`` and ``share(w)`` (before
      journaling ``task.completed`` with the shared commit and remote), then ``unlock(w)``;
    - on claim, ``sharing_warning()``: the line to show when the branch cannot reach other hosts;
    - on start: ``reconcile()`` and report its drifts.
    """

    def __init__(
        self,
        ref: pykka.ActorRef[Worktrees],
        root: Path,
        *,
        timeout_s: float = 120.0,
        verify_timeout_s: float = VERIFY_TIMEOUT_S,
    ):
        self.ref = ref
        self.root = Path(os.path.realpath(root))
        self.timeout_s = timeout_s
        self.verify_timeout_s = verify_timeout_s
        """Added to the wait for a merge: a verified task's command runs inside it."""

    @classmethod
    def start(cls, root: Path, board: Board, **kwargs: Any) -> WorktreesHandle:
        """Start a ``Worktrees`` actor (keyword arguments as for ``Worktrees``)."""
        verifier = kwargs.get("verifier") or Verifier()
        ref = Worktrees.start(root, board, **kwargs)
        return cls(ref, root, verify_timeout_s=verifier.timeout_s)

    def path(self, name: str) -> Path:
        """Where worktree ``name`` lives (whether or not it exists)."""
        return self.root / WORKTREES_DIR / check_name(name)

    def create(self, name: str, task_id: str, base: str | None = None) -> Created:
        return self._ask_for(Created, CreateWorktree(name=name, task_id=task_id, base=base))

    def create_for_task(self, task_id: str, base: str | None = None) -> Created:
        """``worktree_per_task``: a worktree named after the task (call before claiming it)."""
        return self.create(task_id, task_id, base)

    def merge(self, name: str, *, squash: bool = False) -> MergeResult:
        answer = self._ask(MergeWorktree(name=name, squash=squash), self._merge_timeout())
        if not isinstance(answer, MergeResult):
            raise TypeError(f"MergeWorktree answered {type(answer).__name__}")
        return answer

    def merge_all(self, *, squash: bool = False) -> tuple[MergeResult, ...]:
        return tuple(self._ask(MergeAll(squash=squash), self._merge_timeout()))

    def _merge_timeout(self) -> float:
        return self.timeout_s + self.verify_timeout_s

    def remove(self, name: str, *, force: bool = False, delete_branch: bool = False) -> Removed:
        msg = RemoveWorktree(name=name, force=force, delete_branch=delete_branch)
        return self._ask_for(Removed, msg)

    def lock(self, name: str, reason: str = "claimed") -> None:
        self._ask(LockWorktree(name=name, reason=reason))

    def unlock(self, name: str) -> None:
        self._ask(UnlockWorktree(name=name))

    def commit_all(self, name: str, message: str) -> str | None:
        result = self._ask(CommitAll(name=name, message=message))
        return None if result is None else str(result)

    def share(self, name: str) -> Shared:
        """The branch's tip, pushed to the shared remote when the team shares branches (a
        failed push raises ``WorktreeError``); waits up to the push timeout."""
        answer = self._ask(ShareBranch(name=name), self.timeout_s + PUSH_TIMEOUT_S)
        if not isinstance(answer, Shared):
            raise TypeError(f"ShareBranch answered {type(answer).__name__}")
        return answer

    def sharing_warning(self) -> str | None:
        """One line when other hosts may join but worktree branches cannot reach them."""
        answer = self._ask(DescribeSharing())
        return None if answer is None else str(answer)

    def reconcile(self, *, prune: bool = False, repair: bool = False) -> ReconcileReport:
        return self._ask_for(ReconcileReport, Reconcile(prune=prune, repair=repair))

    def list(self, *, include_removed: bool = False) -> tuple[WorktreeView, ...]:
        return tuple(self._ask(ListWorktrees(include_removed=include_removed)))

    def stop(self) -> None:
        """Stop the actor (idempotent)."""
        self.ref.stop(block=True, timeout=self.timeout_s)

    def _ask(self, message: object, timeout_s: float | None = None) -> Any:
        return self.ref.ask(message, timeout=timeout_s or self.timeout_s)

    def _ask_for(self, reply: type[R], message: object) -> R:
        """The actor's answer to ``message``, which is a ``reply`` (``TypeError`` otherwise)."""
        answer = self._ask(message)
        if not isinstance(answer, reply):
            raise TypeError(f"{type(message).__name__} answered {type(answer).__name__}")
        return answer
