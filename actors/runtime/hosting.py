"""The members a runtime hosts: their leases, agents and actors, from start to stop.

``MemberHosting`` starts a member's incarnation (the harness ``Agent`` built by ``MemberBuilder``,
driven by a ``Lead`` or a ``Teammate`` actor), halts and stops it, delivers mail and wakes, and
is the ``AgentHost``/``TeammateHost`` of every actor it starts: statuses, the busy flag, output
events, mail, worktrees. A failure or a disk-full stall is handed to ``Supervision``
(``actors.runtime.supervision``), which records it and brings the member back through
``start_again`` and ``bring_back_stalled``. What is hosted, and in which state, is kept in the
``Roster`` (``actors.runtime.roster``). Every method is thread-safe: actors call in from their
own threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pykka

from actors.errors import TeamError
from actors.messages import BoardChanged, UserInput, Wake
from actors.runtime.commits import SharedCommits
from actors.runtime.lead import Lead
from actors.runtime.members import MemberPlan
from actors.runtime.roster import Hosted, Roster
from actors.runtime.teammate import Teammate
from mailboxes.events import (
    MemberSpawned,
    MemberStatusChanged,
    MemberStopped,
    Payload,
    draft,
)

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import Task, TeamState
    from actors.factory import Team
    from actors.runtime.background import Background
    from actors.runtime.members import MemberBuilder
    from actors.runtime.process import EventSink, Timer
    from actors.runtime.services import TaskWorktrees
    from actors.runtime.supervision import Supervision
    from actors.runtime.usage import UsageMeter
    from actors.settings import Settings
    from mailboxes.messages import Envelope
    from mailboxes.ports import Mailbox

__all__ = ["FORCED", "PAUSED", "RUNTIME", "MemberHosting"]

log = logging.getLogger(__name__)

RUNTIME = "runtime"
"""The journal actor of what the runtime records itself."""
PAUSED = "paused"
"""The status of a member whose runtime stopped politely: resumable, its claim kept."""
FORCED = frozenset({"forced", "shutdown_timeout"})
"""Stop reasons of a member stopped by the runtime: its own background jobs are killed too."""


class MemberHosting:
    """Starts and stops the members of one runtime; the host of their actors."""

    def __init__(
        self,
        team: Team,
        settings: Settings,
        *,
        roster: Roster,
        events: EventSink,
        worktrees: TaskWorktrees,
        background: Background,
        lead: str,
        idle_timer: Timer | None,
        usage: UsageMeter,
        commits: SharedCommits | None = None,
    ) -> None:
        self._team = team
        # The members' status changes and claims share commits when they meet (the usage
        # records too, when the meter is given the same ``SharedCommits``).
        self._commits = commits if commits is not None else SharedCommits(team.board)
        self._settings = settings
        self._roster = roster
        self._events = events
        self._worktrees = worktrees
        self._background = background
        self._lead = lead
        self._idle_timer = idle_timer
        self._usage = usage
        self._builder: MemberBuilder | None = None
        self._supervision: Supervision | None = None
        self._stops_lock = threading.Lock()
        self._stops: list[threading.Thread] = []  # members stopping on their own
        self._notices_lock = threading.Lock()
        self._notices: dict[str, int] = {}  # per teammate: notices to the lead being delivered
        self._wakes_lock = threading.Lock()
        self._mail_wakes: set[str] = set()  # members told a mail ``Wake`` they have not taken

    def connect(self, builder: MemberBuilder, supervision: Supervision) -> None:
        """The two collaborators that are built over this object (call once, before any
        member is hosted)."""
        self._builder, self._supervision = builder, supervision

    def _supervisor(self) -> Supervision:
        if self._supervision is None:
            raise TeamError("member hosting is not connected to a supervision")
        return self._supervision

    # -- AgentHost, TeammateHost ---------------------------------------------------------------

    @property
    def mailbox(self) -> Mailbox:
        return self._team.mailbox

    @property
    def board(self) -> Board:
        return self._team.board

    def set_status(self, name: str, status: str, reason: str = "") -> None:
        if not self._roster.touch(name):
            return
        member = self.board.state.members.get(name)
        if member is not None and member.status == status:
            # Already so as this process last wrote or read the board (e.g. journaled with the
            # claim that opened the turn): no journal round trip. A member's status is written by
            # the process hosting it, so the state folded here is not behind on it.
            appended = False
        else:
            appended = self._commits.set_status(name, status, reason)
        self.emit({"type": "status", "agent": name, "status": status, "reason": reason})
        self._roster.notify()
        if appended and name != self._lead:  # the lead may hold notices until this change
            self.tell(self._lead, BoardChanged())

    def set_busy(self, name: str, busy: bool) -> None:
        self._roster.set_busy(name, busy)

    def claim_next(
        self,
        name: str,
        *,
        role: str | None,
        exclude: Collection[str] = (),
        also: Sequence[Payload] = (),
    ) -> Task | None:
        return self._commits.claim_next(name, role=role, exclude=exclude, also=also)

    def input_taken(self, name: str) -> None:
        self._roster.input_taken(name)

    def emit(self, event: Mapping[str, Any]) -> None:
        self._events.emit(event)

    def failed(self, name: str, error: str, generation: int, *, restart: bool = True) -> None:
        self._supervisor().failed(name, error, generation, restart=restart)

    def paused(self) -> bool:
        return self._supervisor().paused()

    def winding_down(self) -> bool:
        return self._roster.stopping

    def over_cap(self, name: str, turn: object) -> bool:
        return self._usage.check(name, turn) is not None

    def storage_failed(self, name: str, error: str, generation: int) -> None:
        self._supervisor().storage_failed(name, error, generation)

    def hold_input(self, name: str, text: str) -> None:
        self._roster.hold(name, text)

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

        if to not in (BROADCAST, self._lead):
            member = self.board.state.members.get(to)
            if member is not None and member.status == "stopped" and member.kind == "agent":
                raise TeamError(f"{to} has stopped; messages to it would never be read")
        message = MessageDraft.model_validate(
            {"to": to, "type": type, "body": dict(body), "in_reply_to": in_reply_to}
        )
        sent = self.mailbox.deliver(sender, message)
        for envelope in sent:
            self.wake(envelope.to)
        return sent

    def member_done(self, name: str, reason: str) -> None:
        stop = threading.Thread(
            target=self.stop_member, args=(name, reason), name=f"stop-{name}", daemon=True
        )
        with self._stops_lock:  # started under the lock: whoever joins it sees it started
            self._stops = [t for t in self._stops if t.is_alive()] + [stop]
            stop.start()

    def worktree(self, name: str, *, claimed: bool) -> Path | None:
        return self._worktrees.for_claim(name, claimed=claimed)

    @property
    def worktree_per_task(self) -> bool:
        return self._worktrees.per_task

    def ensure_task_worktree(self, task_id: str) -> bool:
        return self._worktrees.ensure_for_task(task_id)

    def abandoned(self, name: str, task_id: str) -> None:
        self._roster.abandon(name, task_id)

    # -- telling the actors --------------------------------------------------------------------

    def submit(self, text: str) -> None:
        """User input for the lead: told to its actor (counted until taken), or kept durably
        in its inbox while it is being restarted."""
        ref = self._roster.input_given(self._lead)
        if ref is None:
            raise TeamError("the lead is not hosted by this runtime")
        try:
            ref.tell(UserInput(text=text))
        except pykka.ActorDeadError:  # being restarted: keep it durably for the next incarnation
            self.input_taken(self._lead)
            self.send("user", self._lead, "message", {"text": text})

    def tell(self, name: str, message: object) -> None:
        """Tell ``name``'s current actor (nothing when it has none)."""
        ref = self._roster.ref(name)
        if ref is not None:
            ref.tell(message)

    def wake(self, name: str, reason: str = "mail") -> None:
        ref = self._roster.ref(name, live=True)
        if ref is None:
            return
        if reason == "mail":
            # One mail wake not taken yet covers every later delivery (its inbox listing comes
            # after ``wake_taken``): each notice both wakes its reader directly and shows up at
            # the watcher, and a lead holding notices would list and parse its inbox twice each.
            with self._wakes_lock:
                if name in self._mail_wakes:
                    return
                self._mail_wakes.add(name)
        with contextlib.suppress(pykka.ActorDeadError):
            ref.tell(Wake(reason=reason))

    def wake_taken(self, name: str) -> None:
        with self._wakes_lock:
            self._mail_wakes.discard(name)

    def wake_all(self, reason: str) -> None:
        for ref in self._roster.refs():
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(Wake(reason=reason))

    def hosts(self, name: str) -> bool:
        """``name`` has a live actor in this process."""
        return self._roster.ref(name, live=True) is not None

    def notice_begins(self, name: str) -> None:
        with self._notices_lock:
            self._notices[name] = self._notices.get(name, 0) + 1

    def notice_ends(self, name: str) -> None:
        with self._notices_lock:
            left = self._notices.get(name, 0) - 1
            if left > 0:
                self._notices[name] = left
            else:
                self._notices.pop(name, None)
        # The lead may hold its notices for this one (it counted ``name`` at work until now).
        self.tell(self._lead, BoardChanged())

    def notice_on_its_way(self, name: str) -> bool:
        """A notice of ``name``'s to the lead is being delivered (``notice_begins``)."""
        return name in self._notices

    def board_changed(self) -> None:
        """The board changed: unlock worktrees whose claim is gone, tell every member (the
        teammates look for work, the lead at the status notices it holds)."""
        self._worktrees.unlock_unclaimed()
        for ref in self._roster.refs():
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(BoardChanged())

    def interrupt(self, names: list[str]) -> None:
        """Interrupt the turns of ``names`` (they then wind down in parallel)."""
        for name in names:
            agent = self._roster.agent(name)
            if agent is not None:
                agent.interrupt()

    # -- starting ------------------------------------------------------------------------------

    def resume(
        self, plan: MemberPlan, lease: ExitStack, state: TeamState, *, fresh: bool = False
    ) -> None:
        """Host a member a starting runtime brings back (the lead is recorded on its first
        start), from its transcript when it has one (``fresh``: on a new conversation)."""
        if plan.kind == "lead" and plan.name not in state.members:
            self.journal(MemberSpawned(name=plan.name, role="lead", model=plan.model))
        elif plan.name in state.members and state.members[plan.name].status != "starting":
            self.journal(MemberStatusChanged(name=plan.name, status="starting"), plan.name)
        path = self._team.repo.team_dir / "transcripts" / f"{plan.name}.jsonl"
        resume = not fresh and path.exists() and path.stat().st_size > 0
        self.host_member(plan, lease, resume=resume)

    def host_member(self, plan: MemberPlan, lease: ExitStack, *, resume: bool) -> None:
        """Build and start ``plan``'s agent actor (the lease is already held)."""
        hosted = self._roster.add(plan, lease)
        try:
            self._start_actor(hosted, resume=resume)
        except BaseException:
            self._roster.discard(plan.name)
            raise

    def _start_actor(self, hosted: Hosted, *, resume: bool) -> None:
        if self._builder is None:
            raise TeamError("member hosting is not connected to a member builder")
        member = hosted.plan
        name = member.name

        def on_wait(waiting: bool) -> None:
            self.set_status(name, "waiting_permission" if waiting else "working")

        agent = self._builder.build(member, resume=resume, on_permission_wait=on_wait)
        batch = self._settings.mailbox.batch_max_messages
        ref: pykka.ActorRef[Any]
        try:
            if member.kind == "lead":
                ref = Lead.start(
                    agent,
                    self,
                    generation=hosted.generation,
                    batch_max=batch,
                    resumed=resume,
                    notify_window_s=self._settings.team.notify_window_s,
                    timer=self._idle_timer,
                )
            else:
                ref = Teammate.start(
                    agent,
                    self,
                    role=member.role,
                    lead=self._lead,
                    hook_runner=agent.hook_runner,
                    idle_timeout_s=self._settings.team.idle_timeout_s,
                    idle_timer=self._idle_timer,
                    generation=hosted.generation,
                    batch_max=batch,
                    resumed=resume,
                    task_reminders=self._settings.team.task_reminders,
                    stall_timeout_s=self._settings.team.stall_timeout_s,
                    max_repeated_tool_calls=self._settings.team.max_repeated_tool_calls,
                )
        except BaseException:
            agent.close()
            raise
        self._roster.incarnated(hosted, agent, ref)
        self.wake_taken(name)  # a mail wake told to the incarnation before is nobody's now
        ref.tell(Wake(reason="start"))
        if member.kind == "teammate":
            ref.tell(BoardChanged())

    # -- incarnations ending and coming back ---------------------------------------------------

    def crashed(self, name: str, generation: int, error: str) -> bool:
        """End incarnation ``generation`` of ``name`` after a failure (actor halted, ``error``
        kept for the restart note); False when it is stale or the member stopped."""
        hosted = self._roster.retire(name, generation)
        if hosted is None:
            return False
        self._halt(hosted, 10.0)
        self._roster.failed_with(hosted, error)
        return True

    def start_again(self, name: str) -> Hosted | None:
        """A new incarnation of ``name`` from its transcript (raises on failure); None when it
        stopped or the runtime stops."""
        hosted = self._roster.revive(name)
        if hosted is not None:
            self._start_actor(hosted, resume=True)
        return hosted

    def bring_back_stalled(self) -> list[tuple[str, str, int]]:
        """Space is back: restart every stalled member from its transcript and tell it the
        inputs held meanwhile. Returns ``(name, error, generation)`` of those that failed."""
        failures = []
        for hosted in self._roster.take_stalled():
            with contextlib.suppress(OSError):  # closing flushes what the full disk refused
                self._halt(hosted, 10.0)
            if not self._roster.unstall(hosted):
                continue
            try:
                self._start_actor(hosted, resume=True)
                for text in self._roster.take_held(hosted):
                    self.tell(hosted.plan.name, UserInput(text=text))
            except Exception as exc:  # a real failure now: the Supervisor's business
                name = hosted.plan.name
                log.exception("bringing %s back after the disk was full failed", name)
                failures.append((name, f"{type(exc).__name__}: {exc}", hosted.generation))
        return failures

    # -- stopping ------------------------------------------------------------------------------

    def _halt(self, hosted: Hosted, timeout_s: float) -> None:
        """Interrupt and stop the actor; close the agent when the actor has really stopped."""
        self._halting(hosted)(time.monotonic() + timeout_s)

    def _halting(self, hosted: Hosted) -> Callable[[float], None]:
        """Interrupt the actor and ask it to stop without waiting; returns the wait (until a
        ``time.monotonic()`` deadline), which closes the agent once the actor really stopped.
        Asking several actors first and waiting for them next stops them in parallel."""
        ref, agent = self._roster.take_actor(hosted)
        if agent is not None:
            agent.interrupt()
        asked: pykka.Future[bool] | None = None
        if ref is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                stopping = ref.stop(block=False)
                asked = stopping if isinstance(stopping, pykka.Future) else None

        def wait(deadline: float) -> None:
            if asked is not None:
                timeout_s = max(0.0, deadline - time.monotonic())
                try:
                    asked.get(timeout=timeout_s)
                except pykka.Timeout:
                    log.warning("%s did not stop in time (stuck in a tool)", hosted.plan.name)
                    return
                except pykka.ActorDeadError:
                    pass
            if agent is not None:
                agent.close()

        return wait

    def stop_member(self, name: str, reason: str, *, timeout_s: float = 10.0) -> bool:
        """Stop a hosted member: actor stopped, claim released, ``member.stopped`` journaled,
        lease freed. False when it is not hosted here (or already stopped)."""
        hosted = self._roster.end(name)
        if hosted is None:
            return False
        self._halt(hosted, timeout_s)
        if reason in FORCED:
            self._background.kill_jobs_of(name)
        self.release_claim(name, reason)
        hosted.lease.close()  # before the record: whoever sees "stopped" sees no holder
        self.journal(MemberStopped(name=name, reason=reason), actor=name)
        self.emit({"type": "status", "agent": name, "status": "stopped", "reason": reason})
        self._roster.notify()
        return True

    def pause_members(self, names: list[str], reason: str, *, timeout_s: float = 10.0) -> list[str]:
        """The runtime stops politely (Ctrl-C, SIGTERM, ``/quit``, the end of a headless run):
        stop the actors but keep the members. Their claims, transcripts and unread mail stay;
        every actor is stopped first (asked in ``names``' order, all at once, then waited for with
        one deadline), then all are recorded ``paused`` in
        ONE journal commit while their leases are still held, so no reaper ever sees a free
        lease on a claim meant to wait for ``teamctl resume`` (docs/RELIABILITY.md, "Stop and
        resume"); then the leases are freed. Returns the members paused (those hosted here and
        not stopped yet)."""
        ended = [(name, h) for name in names if (h := self._roster.end(name)) is not None]
        try:
            waits = []
            for _name, hosted in ended:  # all asked first: they stop in parallel
                with contextlib.suppress(Exception):  # one stuck actor must not keep the others
                    waits.append(self._halting(hosted))
            deadline = time.monotonic() + timeout_s
            for wait in waits:
                with contextlib.suppress(Exception):
                    wait(deadline)
            bodies = [MemberStatusChanged(name=n, status=PAUSED, reason=reason) for n, _ in ended]
            if bodies:
                self.board.execute(lambda state: [draft(b.TYPE, b.name, b) for b in bodies])
        finally:
            for _name, hosted in ended:
                hosted.lease.close()
        for name, _hosted in ended:
            self.emit({"type": "status", "agent": name, "status": PAUSED, "reason": reason})
        self._roster.notify()
        return [name for name, _hosted in ended]

    def finish_stops(self, timeout_s: float) -> None:
        """Wait (bounded) for the members stopping on their own to be recorded as stopped
        (the runtime stops: the journal closes next)."""
        with self._stops_lock:
            stops = list(self._stops)
        for stop in stops:
            stop.join(timeout_s)

    def release_claim(self, name: str, reason: str) -> None:
        """Release the task ``name`` holds (not a human's claim), then unlock worktrees whose
        claim is gone."""
        state = self.board.refresh()
        held = state.holding(name)
        if held is not None and not held.human:
            with contextlib.suppress(TeamError):
                self.board.release(held.id, name, held.epoch, reason)
        self._worktrees.unlock_unclaimed()

    def journal(self, body: Payload, actor: str = RUNTIME) -> None:
        """Record ``body`` as done by ``actor``."""
        self.board.execute(lambda state: [draft(body.TYPE, actor, body)])
