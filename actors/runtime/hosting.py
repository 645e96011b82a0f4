"""The members a runtime hosts: starting, stopping, crashing and restarting them.

``Hosting`` is the part of ``TeamRuntime`` that owns the hosted members (their leases, agents and
actors) and answers the agent actors (``AgentHost``) and the Supervisor (``Supervised``). Every
method is thread-safe: actors call in from their own threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pykka

from actors.errors import TeamError
from actors.messages import AgentFailed, BoardChanged, Wake
from actors.runtime.lead import Lead, team_state_text
from actors.runtime.members import MemberPlan, build_agent, client_for, policy_for
from actors.runtime.teammate import Teammate
from mailboxes.events import (
    EventDraft,
    MemberStatusChanged,
    MemberStopped,
    draft,
)

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import TeamState
    from actors.factory import Team
    from actors.runtime.permission_requests import JournalDecisions
    from actors.settings import Settings
    from harness.agent import Agent
    from harness.hooks import HookRunner
    from harness.mcp.client import McpManager
    from harness.tools.base import Approver, JobRunner
    from mailboxes.maildir import Maildir
    from mailboxes.messages import Envelope

log = logging.getLogger(__name__)

RUNTIME = "runtime"
FORCED = frozenset({"forced", "shutdown_timeout"})
"""Stop reasons of a member stopped by the runtime: its own background jobs are killed too."""


@dataclass
class Hosted:
    """One member this process hosts."""

    plan: MemberPlan
    lease: ExitStack
    generation: int = 0
    agent: Agent | None = None
    ref: pykka.ActorRef[Any] | None = None
    busy: bool = False
    inputs: int = 0
    """User inputs told to the actor and not yet taken (the team is not idle meanwhile)."""
    starting: bool = True
    stopped: bool = False
    stalled: bool = False
    """Its incarnation hit a full disk: brought back from its transcript when space returns."""
    held: list[str] = field(default_factory=list)  # user inputs told to it while stalled
    last_error: str = ""
    last_activity: float = field(default_factory=time.time)


class Hosting:
    """Hosted members and the callbacks their actors and the Supervisor use."""

    team: Team
    settings: Settings
    model_source: Any
    tools_factory: Callable[..., Any]
    hook_runner: HookRunner | None
    job_runner: JobRunner | None
    permission_mode: str | None
    lead_name: str
    on_event: Callable[[Mapping[str, Any]], None] | None
    fsync_transcripts: bool
    supervisor: pykka.ActorRef[Any] | None
    idle_timer: Callable[..., Any] | None
    decisions: JournalDecisions
    worktrees: Any
    jobs: Any
    lead_approver: Approver | None
    mcp: McpManager | None

    def _init_hosting(self) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._hosted: dict[str, Hosted] = {}
        self._supervising: set[str] = set()
        self._emit_lock = threading.Lock()
        self._stopping = False
        self._permission_waits: set[str] = set()
        self.mcp = None

    # -- AgentHost -----------------------------------------------------------------------------

    @property
    def mailbox(self) -> Maildir:
        return self.team.mailbox

    @property
    def board(self) -> Board:
        return self.team.board

    def _journal(self, body: Any, actor: str = RUNTIME, op_id: str | None = None) -> None:
        def decision(state: TeamState) -> list[EventDraft]:
            return [draft(body.TYPE, actor, body, op_id)]

        self.board.execute(decision)

    def set_status(self, name: str, status: str, reason: str = "") -> None:
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped:
                return
            hosted.starting = False
            hosted.last_activity = time.time()

        def decision(state: TeamState) -> list[EventDraft]:
            member = state.members.get(name)
            if member is not None and member.status == status:
                return []
            body = MemberStatusChanged(name=name, status=status, reason=reason)
            return [draft(body.TYPE, name, body)]

        self.board.execute(decision)
        self.emit({"type": "status", "agent": name, "status": status, "reason": reason})
        self._notify()

    def set_busy(self, name: str, busy: bool) -> None:
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is not None:
                hosted.busy = busy and not hosted.stopped
                hosted.last_activity = time.time()
            self._changed.notify_all()

    def input_taken(self, name: str) -> None:
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is not None and hosted.inputs > 0:
                hosted.inputs -= 1
            self._changed.notify_all()

    def worktree(self, name: str, *, claimed: bool) -> Path | None:
        handle = self.worktrees
        if handle is None:
            return None
        try:
            if claimed:
                handle.lock(name, "claimed")
            else:
                handle.unlock(name)
        except Exception:  # a lock is bookkeeping; the claim is what fences the task
            log.warning("worktree %s: %s failed", name, "lock" if claimed else "unlock")
        path: Path = handle.path(name)
        return path

    def emit(self, event: Mapping[str, Any]) -> None:
        if self.on_event is None:
            return
        with self._emit_lock:
            try:
                self.on_event(event)
            except Exception:
                log.exception("event sink failed")

    def failed(self, name: str, error: str, generation: int) -> None:
        with self._lock:
            if self._stopping:
                return  # winding down: an interrupted turn is not a crash
            self._supervising.add(name)
        if self.supervisor is None:  # no Supervisor runs: nobody will restart it
            log.error("%s failed with no supervisor running: %s", name, error)
            with self._lock:
                self._supervising.discard(name)
            return
        self.supervisor.tell(AgentFailed(name=name, error=error, generation=generation))

    def send(
        self,
        sender: str,
        to: str,
        type: str,
        body: Mapping[str, Any],
        *,
        in_reply_to: str | None = None,
    ) -> list[Envelope]:
        from mailboxes.messages import BROADCAST, MessageDraft

        if to not in (BROADCAST, self.lead_name):
            member = self.board.state.members.get(to)
            if member is not None and member.status == "stopped" and member.kind == "agent":
                raise TeamError(f"{to} has stopped; messages to it would never be read")
        draft_ = MessageDraft.model_validate(
            {"to": to, "type": type, "body": dict(body), "in_reply_to": in_reply_to}
        )
        sent = self.mailbox.deliver(sender, draft_)
        for envelope in sent:
            self.wake(envelope.to)
        return sent

    def member_done(self, name: str, reason: str) -> None:
        threading.Thread(
            target=self.stop_member, args=(name, reason), name=f"stop-{name}", daemon=True
        ).start()

    # -- waking --------------------------------------------------------------------------------

    def wake(self, name: str, reason: str = "mail") -> None:
        with self._lock:
            hosted = self._hosted.get(name)
            ref = hosted.ref if hosted is not None and not hosted.stopped else None
        if ref is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(Wake(reason=reason))

    def board_changed(self) -> None:
        for ref in self._refs(teammates_only=True):
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(BoardChanged())

    def _refs(self, *, teammates_only: bool = False) -> list[pykka.ActorRef[Any]]:
        with self._lock:
            return [
                h.ref
                for h in self._hosted.values()
                if h.ref is not None
                and not h.stopped
                and (not teammates_only or h.plan.kind == "teammate")
            ]

    def _notify(self) -> None:
        with self._lock:
            self._changed.notify_all()

    # -- starting members ----------------------------------------------------------------------

    def host_member(self, plan: MemberPlan, lease: ExitStack, *, resume: bool) -> None:
        """Build and start ``plan``'s agent actor (the lease is already held)."""
        hosted = Hosted(plan=plan, lease=lease)
        with self._lock:
            self._hosted[plan.name] = hosted
        try:
            self._start_actor(hosted, resume=resume)
        except BaseException:
            with self._lock:
                self._hosted.pop(plan.name, None)
            raise

    def _start_actor(self, hosted: Hosted, *, resume: bool) -> None:
        root, member = self.team.repo.root, hosted.plan
        hooks = self.hook_runner
        agent = build_agent(
            member,
            root=root,
            client=client_for(self.model_source, member.name, member.model),
            policy=policy_for(
                self.settings,
                hooks,
                mode=self.permission_mode,
                approver=self._approver(member),
                board=self.board,
                agent=member.name,
            ),
            team_tools=self.tools_factory(self, member.name, member.kind),
            settings=self.settings,
            hook_runner=hooks,
            state_provider=self._state_text if member.kind == "lead" else None,
            job_runner=self.job_runner,
            resume=resume,
            session_id=uuid.uuid4().hex,
            fsync=self.fsync_transcripts,
            mcp=self.mcp,
        )
        batch = self.settings.mailbox.batch_max_messages
        ref: pykka.ActorRef[Any]
        try:
            if member.kind == "lead":
                ref = Lead.start(
                    agent, self, generation=hosted.generation, batch_max=batch, resumed=resume
                )
            else:
                ref = Teammate.start(
                    agent,
                    self,
                    role=member.role,
                    lead=self.lead_name,
                    hook_runner=hooks,
                    idle_timeout_s=self.settings.team.idle_timeout_s,
                    idle_timer=self.idle_timer,
                    generation=hosted.generation,
                    batch_max=batch,
                    resumed=resume,
                )
        except BaseException:
            agent.close()
            raise
        with self._lock:
            hosted.agent, hosted.ref = agent, ref
        ref.tell(Wake(reason="start"))
        if member.kind == "teammate":
            ref.tell(BoardChanged())

    def _approver(self, member: MemberPlan) -> Approver | None:
        """Teammates route ``ask`` permissions (to a human or the lead, bounded wait)."""
        if member.kind == "lead":
            return self.lead_approver
        from actors.runtime.permission_requests import PermissionRouter

        name = member.name

        def on_wait(waiting: bool) -> None:
            self.set_status(name, "waiting_permission" if waiting else "working")

        return PermissionRouter(self, self._wait_decision, on_wait=on_wait)  # type: ignore[arg-type]

    def _wait_decision(self, request_id: str, timeout_s: float) -> Any:
        """The journal's answer, or a denial when the runtime stops meanwhile."""
        from actors.board.protocols import PermissionAnswer

        with self._lock:
            if self._stopping:
                return PermissionAnswer(request_id, "deny", RUNTIME, "the team is stopping")
            self._permission_waits.add(request_id)
        try:
            return self.decisions.wait(request_id, timeout_s)
        finally:
            with self._lock:
                self._permission_waits.discard(request_id)

    def _deny_waiting_permissions(self) -> None:
        from actors.board.protocols import PermissionAnswer

        with self._lock:
            waiting = list(self._permission_waits)
        for rid in waiting:
            self.decisions.notify(PermissionAnswer(rid, "deny", RUNTIME, "the team is stopping"))

    def _state_text(self) -> str:
        return team_state_text(self.board.state, lead=self.lead_name)

    # -- stopping ------------------------------------------------------------------------------

    def _halt(self, hosted: Hosted, timeout_s: float) -> None:
        """Interrupt and stop the actor; close the agent when the actor has really stopped."""
        ref, agent = hosted.ref, hosted.agent
        hosted.ref = None
        if agent is not None:
            agent.interrupt()
        stopped = True
        if ref is not None:
            try:
                ref.stop(block=True, timeout=timeout_s)
            except pykka.Timeout:
                stopped = False
                log.warning(
                    "%s did not stop within %.1f s (stuck in a tool)", hosted.plan.name, timeout_s
                )
            except pykka.ActorDeadError:
                pass
        if agent is not None and stopped:
            agent.close()

    def stop_member(self, name: str, reason: str, *, timeout_s: float = 10.0) -> bool:
        """Stop a hosted member: actor stopped, claim released, ``member.stopped`` journaled,
        lease freed. False when it is not hosted here (or already stopped)."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped:
                return False
            hosted.stopped = True
            hosted.busy = False
        self._halt(hosted, timeout_s)
        if reason in FORCED and self.jobs is not None:
            try:
                self.jobs.stop_jobs_of(name)
            except Exception:
                log.exception("killing the background jobs of %s failed", name)
        self._release_claim(name, reason)
        hosted.lease.close()  # before the record: whoever sees "stopped" sees no holder
        self._journal(MemberStopped(name=name, reason=reason), actor=name)
        self.emit({"type": "status", "agent": name, "status": "stopped", "reason": reason})
        self._notify()
        return True

    def _release_claim(self, name: str, reason: str) -> None:
        state = self.board.refresh()
        held = state.holding(name)
        if held is not None and not held.human:
            with contextlib.suppress(TeamError):
                self.board.release(held.id, name, held.epoch, reason)
