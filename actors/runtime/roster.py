"""Who this process hosts, and what each of them is doing: the runtime's record book.

``Roster`` keeps one ``Hosted`` record per member hosted here (its plan, lease, current
incarnation and flags). It is plain synchronized state: one lock guards every record and one
condition tells ``wait_until`` of every change. ``MemberHosting`` changes it as members start,
fail and stop; the idleness test, the member list and ``Supervision`` read it. Records are
changed only through ``Roster`` methods, under its lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pykka

if TYPE_CHECKING:
    from actors.runtime.members import MemberPlan
    from harness.agent import Agent

__all__ = ["Hosted", "Presence", "Roster"]

ActorRef = pykka.ActorRef[Any]


@dataclass
class Hosted:
    """One member this process hosts (changed only by ``Roster``, under its lock)."""

    plan: MemberPlan
    lease: ExitStack
    generation: int = 0
    """The current incarnation; a report from an older one is stale."""
    agent: Agent | None = None
    ref: ActorRef | None = None
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
    abandoned: set[str] = field(default_factory=set)
    """Tasks it released unfinished after the reminders: it does not claim them again."""

    def quiet(self) -> bool:
        """No turn, nothing being started, no input in flight, not stalled."""
        return not (self.busy or self.starting or self.inputs or self.stalled)


@dataclass(frozen=True)
class Presence:
    """What the member list shows of a member's incarnation in this process."""

    here: bool
    tokens: int = 0
    cwd: str | None = None
    last_activity: float | None = None


class Roster:
    """The members hosted by one runtime. Thread-safe."""

    def __init__(self, lead: str) -> None:
        self._lead = lead
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._hosted: dict[str, Hosted] = {}
        self._stopping = False
        self._version = 0  # counts the changes: a wait checks its predicate outside the lock

    # -- waiting -------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """The runtime winds down (no restart, no new incarnation)."""
        return self._stopping

    def begin_stop(self) -> bool:
        """From now on the runtime winds down; False when it already does."""
        with self._lock:
            if self._stopping:
                return False
            self._stopping = True
            return True

    def notify(self) -> None:
        """Wake ``wait_until``: something may have changed."""
        with self._lock:
            self._changed_locked()

    def _changed_locked(self) -> None:
        self._version += 1
        self._changed.notify_all()

    def wait_until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until ``predicate()`` holds (True), the timeout passes or the runtime stops
        (False); re-checked on every change. The predicate runs outside the roster's lock (it
        may read the board and the inboxes): the actors reporting changes never wait for it,
        and a change during a check is not missed (it is counted, and checked again)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                seen = self._version
            if predicate():
                return True
            with self._changed:
                if self._stopping:
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                if self._version == seen:
                    # The bound only guards against a missed notify; every change notifies.
                    self._changed.wait(timeout=min(left, 1.0) if left is not None else 1.0)

    # -- reading -------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every member hosted here (stopped ones included)."""
        with self._lock:
            return list(self._hosted)

    def live_names(self) -> list[str]:
        """The members hosted here and not stopped, teammates first, the lead last."""
        with self._lock:
            names = [n for n, h in self._hosted.items() if not h.stopped]
        names.sort(key=lambda n: n == self._lead)
        return names

    def flags(self) -> tuple[tuple[bool, bool, int, bool, bool], ...]:
        """Every record's idleness flags (compared before and after the idleness checks)."""
        with self._lock:
            return tuple(
                (h.busy, h.starting, h.inputs, h.stalled, h.stopped) for h in self._hosted.values()
            )

    def at_rest(self) -> tuple[list[str], list[str | None]] | None:
        """None while a live member is busy, starting, taking an input or stalled; else the
        live members that have an actor and the roles of those that are teammates."""
        with self._lock:
            live = [h for h in self._hosted.values() if not h.stopped]
            if not all(h.quiet() for h in live):
                return None
            names = [h.plan.name for h in live if h.ref is not None]  # crashed for good: skip
            roles = [h.plan.role for h in live if h.plan.kind == "teammate" and h.ref is not None]
        return names, roles

    def could_take(self, task_id: str, role: str | None) -> bool:
        """A live teammate with an actor may claim the ready task ``task_id`` (of ``role``):
        its role fits and it has not abandoned that task."""
        with self._lock:
            return any(
                h.plan.kind == "teammate"
                and not h.stopped
                and h.ref is not None
                and (role is None or role == h.plan.role)
                and task_id not in h.abandoned
                for h in self._hosted.values()
            )

    def quiet_teammates(self) -> list[tuple[str, str | None, ActorRef, frozenset[str]]]:
        """``(name, role, actor, abandoned tasks)`` of every live teammate with an actor and
        nothing to do (``Hosted.quiet``): who could take a ready task now."""
        with self._lock:
            return [
                (name, h.plan.role, h.ref, frozenset(h.abandoned))
                for name, h in self._hosted.items()
                if h.plan.kind == "teammate" and not h.stopped and h.ref is not None and h.quiet()
            ]

    def abandon(self, name: str, task_id: str) -> None:
        """``name`` gave ``task_id`` up unfinished and will not claim it again."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is not None:
                hosted.abandoned.add(task_id)
            self._changed_locked()

    def held(self, name: str) -> list[str]:
        """The user inputs kept for the next incarnation of a stalled member."""
        with self._lock:
            hosted = self._hosted.get(name)
            return list(hosted.held) if hosted is not None else []

    def presence(self, name: str) -> Presence:
        with self._lock:
            hosted = self._hosted.get(name)
            here = hosted is not None and not hosted.stopped
            agent = hosted.agent if here and hosted is not None else None
            last = hosted.last_activity if hosted is not None else None
        if agent is None:
            return Presence(here=here, last_activity=last)
        u = agent.loop.state.usage
        tokens = u.input_tokens + u.output_tokens + u.cache_read_input_tokens
        tokens += u.cache_creation_input_tokens
        return Presence(here, tokens, str(agent.tool_context.cwd), last)

    def gone(self, name: str) -> bool:
        """``name`` is not hosted here any more (never was, or stopped)."""
        with self._lock:
            hosted = self._hosted.get(name)
            return hosted is None or hosted.stopped

    def ref(self, name: str, *, live: bool = False) -> ActorRef | None:
        """The actor of ``name``'s current incarnation (of a member not stopped, if ``live``)."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or (live and hosted.stopped):
                return None
            return hosted.ref

    def refs(self, *, teammates_only: bool = False) -> list[ActorRef]:
        """The actors of every member not stopped."""
        with self._lock:
            return [
                h.ref
                for h in self._hosted.values()
                if h.ref is not None
                and not h.stopped
                and (not teammates_only or h.plan.kind == "teammate")
            ]

    def agent(self, name: str) -> Agent | None:
        with self._lock:
            hosted = self._hosted.get(name)
            return hosted.agent if hosted is not None else None

    # -- what the actors report ----------------------------------------------------------------

    def touch(self, name: str) -> bool:
        """``name`` reported a status: it is past starting. False when it is not hosted here
        or stopped (the report is dropped)."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped:
                return False
            hosted.starting = False
            hosted.last_activity = time.time()
            return True

    def set_busy(self, name: str, busy: bool) -> None:
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is not None:
                hosted.busy = busy and not hosted.stopped
                hosted.last_activity = time.time()
            self._changed_locked()

    def input_given(self, name: str) -> ActorRef | None:
        """A user input for ``name`` is on its way to its actor (returned; None when it has
        none): counted until taken."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.ref is None:
                return None
            hosted.inputs += 1
            return hosted.ref

    def input_taken(self, name: str) -> None:
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is not None and hosted.inputs > 0:
                hosted.inputs -= 1
            self._changed_locked()

    def hold(self, name: str, text: str) -> None:
        """Keep ``text`` for the next incarnation of the stalled ``name``."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is not None:
                hosted.held.append(text)

    # -- incarnations --------------------------------------------------------------------------

    def add(self, plan: MemberPlan, lease: ExitStack) -> Hosted:
        hosted = Hosted(plan=plan, lease=lease)
        with self._lock:
            self._hosted[plan.name] = hosted
        return hosted

    def discard(self, name: str) -> None:
        with self._lock:
            self._hosted.pop(name, None)

    def incarnated(self, hosted: Hosted, agent: Agent, ref: ActorRef) -> None:
        """``hosted`` runs as ``agent`` driven by ``ref`` now."""
        with self._lock:
            hosted.agent, hosted.ref = agent, ref

    def take_actor(self, hosted: Hosted) -> tuple[ActorRef | None, Agent | None]:
        """The current actor and agent of ``hosted``; no actor is told anything any more."""
        with self._lock:
            ref, hosted.ref = hosted.ref, None
            return ref, hosted.agent

    def retire(self, name: str, generation: int) -> Hosted | None:
        """Incarnation ``generation`` of ``name`` ends (it failed): the next one will have a new
        generation. None when the report is stale or the member stopped."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped or hosted.generation != generation:
                return None
            hosted.generation += 1
            hosted.busy = False
            return hosted

    def failed_with(self, hosted: Hosted, error: str) -> None:
        with self._lock:
            hosted.last_error = error

    def revive(self, name: str) -> Hosted | None:
        """``name`` is about to get a new incarnation; None when it stopped or the runtime
        stops."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped or self._stopping:
                return None
            hosted.starting = True
            return hosted

    def stall(self, name: str, generation: int) -> bool:
        """Incarnation ``generation`` of ``name`` hit a full disk and waits for space. False
        when it is stale, stopped or the runtime stops."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped or hosted.generation != generation:
                return False
            if self._stopping:
                return False
            hosted.stalled, hosted.busy = True, False
            return True

    def take_stalled(self) -> list[Hosted]:
        """The stalled members, each about to get a new incarnation (a late report of the old
        one is stale)."""
        with self._lock:
            stalled = [h for h in self._hosted.values() if h.stalled and not h.stopped]
            for hosted in stalled:
                hosted.generation += 1
                hosted.starting = True
            return stalled

    def unstall(self, hosted: Hosted) -> bool:
        """``hosted`` is stalled no more; True when it is to be brought back (not stopped, the
        runtime not stopping)."""
        with self._lock:
            hosted.stalled = False
            return not (hosted.stopped or self._stopping)

    def take_held(self, hosted: Hosted) -> list[str]:
        with self._lock:
            held, hosted.held = hosted.held, []
            return held

    def end(self, name: str) -> Hosted | None:
        """``name`` stops for good; None when it is not hosted here or already stopped."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped:
                return None
            hosted.stopped = True
            hosted.busy = False
            return hosted
