"""``TeamServices`` as the runtime implements it: spawning, members, shutdown requests, crons.

A mixin of ``TeamRuntime`` (``actors.runtime.runtime``) over ``Hosting``: the team tools call these from
actor threads.

Worktree bookkeeping lives here too: with ``team.worktree_per_task`` an idle teammate asks
``ensure_task_worktree`` before it claims a task (the worktree is created while the task is still
pending and unowned), and the worktrees this runtime locked for a claim are unlocked as soon as
the board shows the claim gone (completed, released, reaped as ``owner_dead``, or the member
stopped).
"""

from __future__ import annotations

import logging
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from actors.errors import ClaimRefused, DuplicateMember, TeamError, UnknownMember
from actors.runtime.members import MemberPlan
from actors.runtime.supervision import Supervising
from actors.services import CronView, MemberView, TeammateSpec
from mailboxes.events import MemberSpawned, ShutdownRequested
from mailboxes.messages import check_agent_name

log = logging.getLogger(__name__)


class RuntimeBusy(TeamError):
    """Another runtime already runs this team (or the member is hosted by a live process)."""


class Services(Supervising):
    """The ``TeamServices`` methods."""

    scheduler: Any
    shutdown_timeout_s: float

    def _init_hosting(self) -> None:
        super()._init_hosting()
        self._locked_worktrees: set[str] = set()

    def _lease(self, name: str) -> ExitStack:
        from mailboxes.errors import LeaseHeld

        lease = ExitStack()
        try:
            lease.enter_context(self.team.liveness.hold(name))
        except LeaseHeld:
            raise RuntimeBusy(f"{name} is already hosted by a live process") from None
        return lease

    # -- TeamServices --------------------------------------------------------------------------

    def spawn_teammate(self, spec: TeammateSpec, *, by: str) -> MemberView:
        name = check_agent_name(spec.name)
        state = self.board.refresh()
        existing = state.members.get(name)
        if name == self.lead_name or (existing is not None and existing.status != "stopped"):
            raise DuplicateMember(name)
        alive = [m for m in state.members.values() if m.kind == "agent" and m.status != "stopped"]
        if len(alive) - 1 >= self.settings.team.max_teammates:
            raise TeamError(f"the team already has {self.settings.team.max_teammates} teammates")
        lease = self._lease(name)
        try:
            tid = spec.task_id
            if (
                (spec.worktree or self.settings.team.worktree_per_task)
                and tid is not None
                and self.worktrees is not None
                and self.board.state.task(tid).worktree is None
            ):
                self.worktrees.create_for_task(tid)
            if spec.task_id is not None:
                result = self.board.claim(spec.task_id, name)
                if not result.ok:
                    raise ClaimRefused(spec.task_id, result.reason or "refused")
            model = spec.model or self.settings.models.teammate
            body = MemberSpawned(
                name=name,
                role=spec.role,
                model=model,
                prompt=spec.prompt,
                plan_required=spec.plan_required,
                tools=spec.tools,
            )
            self._journal(body, actor=by)
            self.mailbox.ensure_inbox(name)
            plan = MemberPlan(name, "teammate", model, spec.role, spec.tools, spec.prompt)
            self.host_member(plan, lease, resume=False)
        except BaseException:
            if spec.task_id is not None:
                self._release_claim(name, "spawn_failed")
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
        with self._lock:
            hosted = self._hosted.get(name)
            here = hosted is not None and not hosted.stopped
            agent = hosted.agent if here and hosted is not None else None
            last = hosted.last_activity if hosted is not None else None
        tokens = 0
        cwd = None
        if agent is not None:
            u = agent.loop.state.usage
            tokens = u.input_tokens + u.output_tokens + u.cache_read_input_tokens
            tokens += u.cache_creation_input_tokens
            cwd = str(agent.tool_context.cwd)
        return MemberView(
            name=name,
            kind=m.kind,
            role=m.role,
            status=m.status,
            task_id=held.id if held is not None else None,
            worktree=held.worktree if held is not None else None,
            cwd=cwd,
            model=m.model,
            last_activity=last,
            tokens_used=tokens,
            hosted_here=here,
        )

    # -- worktrees -----------------------------------------------------------------------------

    @property
    def worktree_per_task(self) -> bool:
        """``team.worktree_per_task`` is on and this runtime runs the Worktrees actor."""
        return self.worktrees is not None and self.settings.team.worktree_per_task

    def ensure_task_worktree(self, task_id: str) -> bool:
        """Bind a worktree named after ``task_id`` (pending, unowned) before it is claimed. True
        when the task has a worktree now; False when none could be made (logged)."""
        handle = self.worktrees
        if handle is None:
            return False
        task = self.board.refresh().tasks.get(task_id)
        if task is None or task.worktree is not None:
            return task is not None
        try:
            handle.create_for_task(task_id)
        except TeamError as exc:
            task = self.board.refresh().tasks.get(task_id)
            if task is not None and task.worktree is not None:
                return True  # another teammate's create won the race
            log.warning("no worktree for %s: %s", task_id, exc)
            return False
        return True

    def worktree(self, name: str, *, claimed: bool) -> Path | None:
        path = super().worktree(name, claimed=claimed)
        with self._lock:
            if claimed and self.worktrees is not None:
                self._locked_worktrees.add(name)
            else:
                self._locked_worktrees.discard(name)
        return path

    def board_changed(self) -> None:
        self._unlock_unclaimed()
        super().board_changed()

    def _release_claim(self, name: str, reason: str) -> None:
        super()._release_claim(name, reason)
        self._unlock_unclaimed()

    def _unlock_unclaimed(self) -> None:
        """Unlock the worktrees this runtime locked whose task is no longer claimed."""
        handle = self.worktrees
        with self._lock:
            names = list(self._locked_worktrees)
        if handle is None or not names:
            return
        state = self.board.state
        for name in names:
            record = state.worktrees.get(name)
            task = state.tasks.get(record.task_id) if record and record.task_id else None
            if task is not None and task.status == "in_progress":
                continue
            with self._lock:
                self._locked_worktrees.discard(name)
            try:
                handle.unlock(name)
            except Exception as exc:  # bookkeeping only (reconcile unlocks it at the next start)
                log.warning("worktree %s: unlock failed: %s", name, exc)

    def request_shutdown(self, name: str, *, by: str) -> str:
        state = self.board.refresh()
        member = state.members.get(name)
        if member is None or member.kind != "agent" or name == self.lead_name:
            raise UnknownMember(name)
        if member.status == "stopped":
            raise TeamError(f"{name} has already stopped")
        request_id = uuid.uuid4().hex
        self._journal(ShutdownRequested(name=name, request_id=request_id), actor=by)
        text = f"{by} asks you to shut down: finish your step, release or complete your task."
        self.send(by, name, "shutdown_request", {"text": text, "request_id": request_id})
        if self.idle_timer is not None:
            self.idle_timer(self.shutdown_timeout_s, lambda: self._shutdown_overdue(name))
        return request_id

    def _shutdown_overdue(self, name: str) -> None:
        if self._stopping:
            return
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped:
                return
        log.warning("%s did not answer its shutdown request in time: stopping it", name)
        self.stop_member(name, "shutdown_timeout", timeout_s=1.0)

    def force_stop(self, name: str) -> bool:
        """``teamctl stop --force``: stop a hosted member now (False if not hosted here)."""
        return self.stop_member(name, "forced", timeout_s=1.0)

    def schedule_cron(
        self, cron: str, prompt: str, *, recurring: bool, tz: str | None, owner: str
    ) -> CronView:
        if self.scheduler is None:
            raise TeamError("no scheduler runs in this process")
        cron_id = self.scheduler.schedule(cron, prompt, recurring=recurring, tz=tz, owner=owner)
        for view in self.list_crons():
            if view.cron_id == cron_id:
                return view
        raise TeamError(f"cron {cron_id} vanished")

    def list_crons(self) -> list[CronView]:
        if self.scheduler is None:
            return []
        out = []
        for v in self.scheduler.list():
            data = v.as_json()
            out.append(
                CronView(
                    cron_id=data["cron_id"],
                    cron=data["cron"],
                    prompt=data["prompt"],
                    recurring=bool(data["recurring"]),
                    tz=data.get("tz"),
                    next_fire=data.get("next_fire"),
                    owner=data.get("owner", "lead"),
                    extra={k: v for k, v in data.items() if k not in _CRON_KEYS},
                )
            )
        return out

    def cancel_cron(self, cron_id: str, *, by: str) -> None:
        if self.scheduler is None:
            raise TeamError("no scheduler runs in this process")
        self.scheduler.cancel(cron_id)


_CRON_KEYS = frozenset({"cron_id", "cron", "prompt", "recurring", "tz", "next_fire", "owner"})
