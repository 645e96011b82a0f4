"""``TeamServices`` as the runtime implements it: spawning, members, shutdown requests, crons,
and task completions sharing commits with the members' other writes (``SharedCommits``).

``RuntimeServices`` is what the team tools of every hosted agent call (from the agents' actor
threads): it spawns teammates into ``MemberHosting`` (a task given at spawn is claimed for the
teammate, in a worktree of its own when asked or with ``team.worktree_per_task``), lists the
members with what this process knows of them, asks members to shut down (stopping them when
they do not answer in time) and schedules cron jobs on the runtime's Scheduler.

``TaskWorktrees`` is the runtime's side of worktrees. It starts the Worktrees actor
(``actors.worktrees.actor``) when the runtime runs worktrees and reconciles them on start. A
teammate that adopts a claimed task bound to a worktree locks it (``for_claim(name,
claimed=True)``) and works inside it; the worktrees locked this way are unlocked as soon as the
board shows the claim gone (completed, released, reaped as ``owner_dead``, or the member
stopped: ``unlock_unclaimed``). With ``team.worktree_per_task`` an idle teammate asks
``ensure_for_task`` before it claims a task: the worktree is created while the task is still
pending and unowned.

Every process that hosts teammates runs its own Worktrees actor: the runtime, and ``teamctl
join`` for the teammate it hosts (without the start-up reconcile, which is the runtime's). The
actors of all processes hold ``.team/worktrees.lock`` for each git write, so their git commands
never interleave; which worktree belongs to which task is decided under the journal lock
(docs/ARCHITECTURE.md, "Worktrees").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.board.board import acting_as
from actors.board.rules import Completion, check_new_member
from actors.errors import ClaimRefused, DuplicateMember, TeamError, UnknownMember
from actors.runtime.commits import SharedCommits
from actors.runtime.members import MemberPlan
from actors.runtime.process import hold_lease
from actors.services import MemberView, TeammateSpec
from mailboxes.events import MemberSpawned, ShutdownRequested
from mailboxes.messages import check_agent_name
from teamctl_base.clock import new_id

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.factory import Team
    from actors.jobs.cron import CronView
    from actors.runtime.background import Background
    from actors.runtime.hosting import MemberHosting
    from actors.runtime.process import Timer
    from actors.runtime.roster import Roster
    from actors.settings import Settings
    from actors.worktrees.actor import WorktreesHandle
    from actors.worktrees.remote import BranchSharing
    from mailboxes.messages import Envelope
    from mailboxes.ports import EventStore, OnHints, Watcher

__all__ = ["RuntimeServices", "TaskWorktrees"]

log = logging.getLogger(__name__)


class RuntimeServices:
    """The ``TeamServices`` of one runtime (thread-safe)."""

    def __init__(
        self,
        team: Team,
        settings: Settings,
        *,
        members: MemberHosting,
        roster: Roster,
        worktrees: TaskWorktrees,
        background: Background,
        lead: str,
        idle_timer: Timer | None,
        shutdown_timeout_s: float,
        commits: SharedCommits | None = None,
    ) -> None:
        self._team = team
        # Completions share commits with the members' other writes that meet them.
        self._commits = commits if commits is not None else SharedCommits(team.board)
        self._settings = settings
        self._members = members
        self._roster = roster
        self._worktrees = worktrees
        self._background = background
        self._lead = lead
        self._idle_timer = idle_timer
        self._shutdown_timeout_s = shutdown_timeout_s

    @property
    def repo_root(self) -> Path:
        return self._team.repo.root

    @property
    def board(self) -> Board:
        return self._team.board

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def worktrees(self) -> WorktreesHandle | None:
        return self._worktrees.handle

    @property
    def journal(self) -> EventStore:
        return self._team.journal

    def watch(self, on_hints: OnHints, rescan_s: float = 2.0, *, inboxes: bool = True) -> Watcher:
        return self._team.watch(on_hints, rescan_s, inboxes=inboxes)

    def complete_task(
        self,
        tid: str,
        owner: str,
        epoch: int,
        summary: str,
        *,
        commit: str | None = None,
        remote: str | None = None,
    ) -> Completion:
        return self._commits.complete(tid, owner, epoch, summary, commit=commit, remote=remote)

    # -- members -------------------------------------------------------------------------------

    def spawn_teammate(self, spec: TeammateSpec, *, by: str) -> MemberView:
        name = check_agent_name(spec.name)
        state = self.board.refresh()
        existing = state.members.get(name)
        if name == self._lead or (existing is not None and existing.status != "stopped"):
            raise DuplicateMember(name)
        check_new_member(state, name, lead=self._lead)  # again under the journal lock below
        alive = [m for m in state.members.values() if m.kind == "agent" and m.status != "stopped"]
        limit = self._settings.team.max_teammates
        if len(alive) - 1 >= limit:
            raise TeamError(f"the team already has {limit} teammates")
        lease = hold_lease(self._team.liveness, name)
        try:
            if spec.task_id is not None:
                self._worktrees.create_for(spec.task_id, asked=spec.worktree)
                result = self.board.claim(spec.task_id, name)
                if not result.ok:
                    raise ClaimRefused(spec.task_id, result.reason or "refused")
            model = spec.model or self._settings.models.teammate
            body = MemberSpawned(
                name=name,
                role=spec.role,
                model=model,
                prompt=spec.prompt,
                plan_required=spec.plan_required,
                tools=spec.tools,
            )
            with acting_as(by):
                self.board.add_member(body, lead=self._lead)
            self._team.mailbox.ensure_inbox(name)
            plan = MemberPlan(name, "teammate", model, spec.role, spec.tools, spec.prompt)
            self._members.host_member(plan, lease, resume=False)
        except BaseException:
            if spec.task_id is not None:
                self._members.release_claim(name, "spawn_failed")
            lease.close()
            raise
        return self._view(name)

    def members(self) -> list[MemberView]:
        state = self.board.refresh()
        return [self._view(name) for name in state.members]

    def _view(self, name: str) -> MemberView:
        state = self.board.state
        m = state.members[name]
        held = state.holding(name)
        presence = self._roster.presence(name)
        return MemberView(
            name=name,
            kind=m.kind,
            role=m.role,
            status=m.status,
            task_id=held.id if held is not None else None,
            worktree=held.worktree if held is not None else None,
            cwd=presence.cwd,
            model=m.model,
            last_activity=presence.last_activity,
            tokens_used=presence.tokens,
            hosted_here=presence.here,
        )

    def send(
        self,
        sender: str,
        to: str,
        type: str,
        body: Mapping[str, Any],
        *,
        in_reply_to: str | None = None,
    ) -> list[Envelope]:
        return self._members.send(sender, to, type, body, in_reply_to=in_reply_to)

    def request_shutdown(self, name: str, *, by: str) -> str:
        state = self.board.refresh()
        member = state.members.get(name)
        if member is None or member.kind != "agent" or name == self._lead:
            raise UnknownMember(name)
        if member.status == "stopped":
            raise TeamError(f"{name} has already stopped")
        request_id = new_id()
        self._members.journal(ShutdownRequested(name=name, request_id=request_id), actor=by)
        text = f"{by} asks you to shut down: finish your step, release or complete your task."
        self.send(by, name, "shutdown_request", {"text": text, "request_id": request_id})
        if self._idle_timer is not None:
            self._idle_timer(self._shutdown_timeout_s, lambda: self._shutdown_overdue(name))
        return request_id

    def _shutdown_overdue(self, name: str) -> None:
        if self._roster.stopping or self._roster.gone(name):
            return
        log.warning("%s did not answer its shutdown request in time: stopping it", name)
        self._members.stop_member(name, "shutdown_timeout", timeout_s=1.0)

    # -- crons ---------------------------------------------------------------------------------

    def schedule_cron(
        self, cron: str, prompt: str, *, recurring: bool, tz: str | None, owner: str
    ) -> CronView:
        scheduler = self._background.scheduler
        if scheduler is None:
            raise TeamError("no scheduler runs in this process")
        cron_id = scheduler.schedule(cron, prompt, recurring=recurring, tz=tz, owner=owner)
        for view in scheduler.list():
            if view.cron_id == cron_id:
                return view
        raise TeamError(f"cron {cron_id} vanished")

    def list_crons(self) -> list[CronView]:
        scheduler = self._background.scheduler
        return [] if scheduler is None else list(scheduler.list())

    def cancel_cron(self, cron_id: str, *, by: str) -> None:
        scheduler = self._background.scheduler
        if scheduler is None:
            raise TeamError("no scheduler runs in this process")
        scheduler.cancel(cron_id)


class TaskWorktrees:
    """The Worktrees actor of one runtime (none until ``start``, or when it failed to start)
    and the worktree locks this runtime holds for claims."""

    def __init__(
        self,
        root: Path,
        board: Board,
        settings: Settings,
        *,
        lock_path: Path | None = None,
        sharing: BranchSharing | None = None,
    ) -> None:
        self._root = root
        self._lock_path = lock_path
        self._sharing = sharing
        self._board = board
        self._settings = settings
        self._handle: WorktreesHandle | None = None
        self._lock = threading.Lock()
        self._locked: set[str] = set()
        self._unlocking = threading.Lock()

    @property
    def handle(self) -> WorktreesHandle | None:
        """The running Worktrees actor, or None (this runtime manages no worktrees)."""
        return self._handle

    @property
    def per_task(self) -> bool:
        """``team.worktree_per_task`` is on and the Worktrees actor runs."""
        return self._handle is not None and self._settings.team.worktree_per_task

    def start(self, *, reconcile: bool = True) -> None:
        """Start the Worktrees actor and (``reconcile``) report drift; a failure is logged
        (tasks bound to worktrees then run in the checkout)."""
        from actors.worktrees.actor import WorktreesHandle
        from actors.worktrees.verify import Verifier

        try:
            self._handle = WorktreesHandle.start(
                self._root,
                self._board,
                lock_path=self._lock_path,
                verifier=Verifier.from_settings(self._settings),
                sharing=self._sharing,  # worktree branches to the shared remote
            )
            for drift in self._handle.reconcile().drifts if reconcile else ():
                log.warning("worktree drift: %s", drift)
            unshared = self._handle.sharing_warning()
            if unshared:
                log.warning("%s", unshared)
        except Exception:
            log.exception("worktrees unavailable: tasks bound to worktrees run in the checkout")

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.stop()

    def create_for(self, task_id: str, *, asked: bool) -> None:
        """A teammate spawned for ``task_id``: bind it a worktree first when one is ``asked``
        for (or every task gets one) and it has none yet."""
        handle = self._handle
        wanted = asked or self._settings.team.worktree_per_task
        if wanted and handle is not None and self._board.state.task(task_id).worktree is None:
            handle.create_for_task(task_id)

    def ensure_for_task(self, task_id: str) -> bool:
        """Bind a worktree named after ``task_id`` (pending, unowned) before it is claimed. True
        when the task has a worktree now; False when none could be made (logged)."""
        handle = self._handle
        if handle is None:
            return False
        task = self._board.refresh().tasks.get(task_id)
        if task is None or task.worktree is not None:
            return task is not None
        try:
            handle.create_for_task(task_id)
        except TeamError as exc:
            task = self._board.refresh().tasks.get(task_id)
            if task is not None and task.worktree is not None:
                return True  # another teammate's create won the race
            log.warning("no worktree for %s: %s", task_id, exc)
            return False
        return True

    def for_claim(self, name: str, *, claimed: bool) -> Path | None:
        """Lock (``claimed``) or unlock the worktree ``name``; its path, or None when this
        runtime manages no worktrees."""
        handle = self._handle
        if handle is None:
            with self._lock:
                self._locked.discard(name)
            return None
        try:
            if claimed:
                handle.lock(name, "claimed")
            else:
                handle.unlock(name)
        except Exception:  # a lock is bookkeeping; the claim is what fences the task
            log.warning("worktree %s: %s failed", name, "lock" if claimed else "unlock")
        path = handle.path(name)
        with self._lock:
            if claimed:
                self._locked.add(name)
            else:
                self._locked.discard(name)
        return path

    def unlock_unclaimed(self) -> None:
        """Unlock the worktrees this runtime locked whose task is no longer claimed; returns
        once they are unlocked, also when another thread's pass unlocks them."""
        with self._unlocking:  # one pass at a time: none returns while another still unlocks
            self._unlock_unclaimed()

    def _unlock_unclaimed(self) -> None:
        handle = self._handle
        with self._lock:
            names = list(self._locked)
        if handle is None or not names:
            return
        state = self._board.state
        for name in names:
            record = state.worktrees.get(name)
            task = state.tasks.get(record.task_id) if record and record.task_id else None
            if task is not None and task.status == "in_progress":
                continue
            with self._lock:
                self._locked.discard(name)
            try:
                handle.unlock(name)
            except Exception as exc:  # bookkeeping only (reconcile unlocks it at the next start)
                log.warning("worktree %s: unlock failed: %s", name, exc)
