"""Supervision of the hosted members: crashes, restarts and the disk-full pause
(docs/ARCHITECTURE.md, "Actors and threads"; docs/RELIABILITY.md, "What is guaranteed").

pykka has no supervision, so agent actors never let an exception escape; they report failures to
their host, which hands them to ``Supervision`` and so to the ``Supervisor`` actor, one at a time.
For each failure of a live incarnation the Supervisor asks ``Supervision`` (its ``Supervised``)
to record the crash (``member.status_changed(status="crashed")``, the claim released, an
``error`` message to the lead, the actor stopped), then restarts the agent from its transcript
when ``settings.team.restart`` is ``on-crash`` and the member has restarts left.

The degraded mode (issue 8 item 6): a durable write that fails for lack of space (``ENOSPC``,
``EFBIG``, ``EDQUOT``) is rolled back by the store (``mailboxes.errors.WriteFailed``) or leaves a
torn transcript line that resume drops, so nothing it was about is acknowledged. It is not a
crash of the member that hit it: the member is kept (claim, lease, restarts), the runtime goes
degraded (one event, one log line) and stops starting model calls, and ``DiskWatch`` probes for
space with a timer (1, 2, then every 5 s) until a small write + fsync succeeds; then the stalled
members come back from their transcripts and the parked ones make their held-back model call.
With a grace period (``disk_grace_s``: a headless run, ``team.disk_full_grace_s``) a disk still
full that long later is given up on: ``out_of_space`` names it and the run stops, pausing the
team (docs/RELIABILITY.md, "Damage you can survive").
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pykka

from actors.messages import AgentFailed, UserInput
from actors.runtime.process import Timer
from mailboxes.events import MemberStatusChanged
from mailboxes.fsutil import Fsync, write_all

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.runtime.hosting import MemberHosting
    from actors.runtime.process import EventSink
    from actors.runtime.roster import Roster
    from mailboxes.ports import Mailbox

__all__ = [
    "BACKOFF_S",
    "DISK_FULL",
    "DiskWatch",
    "Supervised",
    "Supervision",
    "Supervisor",
    "disk_full",
    "probe_space",
]

log = logging.getLogger(__name__)


# -- crashes and restarts ------------------------------------------------------------------------


class Supervised(Protocol):
    """What the Supervisor asks of the runtime."""

    def record_crash(self, name: str, error: str, generation: int) -> bool:
        """Record the crash of incarnation ``generation``; False if it is stale (already
        handled, or the member was stopped meanwhile)."""
        ...

    def restart(self, name: str) -> None:
        """Bring the member back from its transcript (raises on failure)."""
        ...

    def supervising(self, name: str, busy: bool) -> None:
        """Whether a failure of ``name`` is being handled (the team is not idle meanwhile)."""
        ...

    def gave_up(self, name: str, error: str) -> None:
        """``name`` failed for good (no restart left, restarting cannot help, or the restart
        failed): it stays down until the next ``teamctl resume``."""
        ...


class Supervisor(pykka.ThreadingActor):
    """Handles ``AgentFailed`` messages one at a time and applies the restart policy."""

    def __init__(
        self,
        runtime: Supervised,
        *,
        policy: Literal["never", "on-crash"] = "on-crash",
        max_restarts: int = 3,
    ) -> None:
        super().__init__()
        self.runtime = runtime
        self.policy = policy
        self.max_restarts = max_restarts
        self.restarts: dict[str, int] = {}
        self.crashes: list[tuple[str, str]] = []

    def on_receive(self, message: Any) -> Any:
        try:
            match message:
                case AgentFailed(name=name, error=error, generation=generation, restart=restart):
                    return self._failed(name, error, generation, restart=restart)
                case _:
                    log.warning("supervisor ignores %r", message)
        except BaseException:  # the supervisor itself must survive
            log.exception("supervisor failed handling %r", message)
        return None

    def _failed(self, name: str, error: str, generation: int, *, restart: bool = True) -> bool:
        """Returns True when the member was restarted."""
        try:
            if not self.runtime.record_crash(name, error, generation):
                return False
            self.crashes.append((name, error))
            used = self.restarts.get(name, 0)
            if not restart:  # e.g. a rejected API key: waiting and retrying do not fix it
                self.runtime.gave_up(name, error)
                return False
            if self.policy != "on-crash" or used >= self.max_restarts:
                log.info("%s crashed and stays down (%d restarts used)", name, used)
                self.runtime.gave_up(name, f"{error} (after {used} restarts)")
                return False
            self.restarts[name] = used + 1
            try:
                self.runtime.restart(name)
            except Exception as exc:
                log.exception("restarting %s failed", name)
                self.runtime.gave_up(name, f"restarting failed: {type(exc).__name__}: {exc}")
                return False
            return True
        finally:
            self.runtime.supervising(name, False)


# -- the disk-full pause -------------------------------------------------------------------------


DISK_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
"""Errnos meaning "no room to write": a condition of the machine, not a bug of the member."""

BACKOFF_S = (1.0, 2.0, 5.0)
"""Delays between recovery probes; the last one repeats."""


def disk_full(exc: BaseException | None) -> OSError | None:
    """The disk-full ``OSError`` in ``exc`` or its causes, or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def probe_space(directory: Path, *, size: int = 4096, fsync: Fsync = os.fsync) -> None:
    """Write ``size`` bytes to a file in ``directory``, fsync, delete it; raises ``OSError``."""
    path = directory / f".space-probe.{os.getpid()}.{threading.get_ident()}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_all(fd, b"\0" * size)
            fsync(fd)
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class DiskWatch:
    """Degraded or not; while degraded, probes for space on a bounded backoff timer.

    ``on_enter(reason)`` runs once when it goes degraded, ``on_recover()`` once when a probe
    succeeds (both outside the lock, from the caller's / the timer's thread). With ``grace_s``,
    ``on_expire(reason)`` runs once when it is still degraded ``grace_s`` after going degraded."""

    def __init__(
        self,
        *,
        probe: Callable[[], None],
        timer: Timer,
        on_enter: Callable[[str], None],
        on_recover: Callable[[], None],
        backoff_s: Sequence[float] = BACKOFF_S,
        grace_s: float | None = None,
        on_expire: Callable[[str], None] | None = None,
    ) -> None:
        self._probe = probe
        self._grace_s = grace_s
        self._on_expire = on_expire
        self._episode = 0
        self._timer = timer
        self._on_enter = on_enter
        self._on_recover = on_recover
        self._backoff = tuple(backoff_s)
        self._lock = threading.Lock()
        self._active = False
        self._closed = False
        self._attempt = 0
        self._cancel: Callable[[], None] | None = None
        self.reason = ""

    @property
    def active(self) -> bool:
        return self._active

    def enter(self, reason: str) -> bool:
        """Go degraded (False when it already is, or is closed)."""
        with self._lock:
            if self._active or self._closed:
                return False
            self._active, self.reason, self._attempt = True, reason, 0
            self._episode += 1
            self._schedule()
            if self._grace_s is not None and self._on_expire is not None:
                episode = self._episode
                self._timer(self._grace_s, lambda: self._expired(episode))
        self._on_enter(reason)
        return True

    def _expired(self, episode: int) -> None:
        with self._lock:
            if not self._active or self._closed or episode != self._episode:
                return  # space came back meanwhile (or the runtime stops)
            reason = self.reason
        if self._on_expire is not None:
            self._on_expire(reason)

    def _schedule(self) -> None:
        delay = self._backoff[min(self._attempt, len(self._backoff) - 1)]
        self._attempt += 1
        self._cancel = self._timer(delay, self._check)

    def _check(self) -> None:
        with self._lock:
            if not self._active or self._closed:
                return
        try:
            self._probe()
        except OSError as exc:
            log.debug("still no space: %s", exc)
            with self._lock:
                if self._active and not self._closed:
                    self._schedule()
            return
        with self._lock:
            if not self._active or self._closed:
                return
            self._active, self._cancel = False, None
        self._on_recover()

    def close(self) -> None:
        """No more probes (the runtime stops)."""
        with self._lock:
            self._closed = True
            cancel, self._cancel = self._cancel, None
        if cancel is not None:
            cancel()


# -- the runtime's side ---------------------------------------------------------------------------


class Supervision:
    """The ``Supervised`` of one runtime's Supervisor, and the degraded mode (disk full)."""

    def __init__(
        self,
        members: MemberHosting,
        roster: Roster,
        *,
        board: Board,
        mailbox: Mailbox,
        events: EventSink,
        lead: str,
        policy: Literal["never", "on-crash"],
        max_restarts: int,
        team_dir: Path,
        fsync: Fsync | None,
        disk_timer: Timer,
        disk_grace_s: float | None = None,
    ) -> None:
        self._members = members
        self._roster = roster
        self._board = board
        self._mailbox = mailbox
        self._events = events
        self._lead = lead
        self._policy = policy
        self._max_restarts = max_restarts
        self._lock = threading.Lock()
        self._supervising: set[str] = set()
        self._down: dict[str, str] = {}
        self._ref: pykka.ActorRef[Supervisor] | None = None
        self._out_of_space: str | None = None
        probe_dir, sync = team_dir, fsync or os.fsync
        self._disk = DiskWatch(
            probe=lambda: probe_space(probe_dir, fsync=sync),
            timer=disk_timer,
            on_enter=self._degraded,
            on_recover=self._recovered,
            grace_s=disk_grace_s,
            on_expire=self._gave_up_on_space,
        )

    def start(self) -> None:
        """Start the Supervisor actor."""
        self._ref = Supervisor.start(self, policy=self._policy, max_restarts=self._max_restarts)

    def stop(self) -> None:
        """Stop the Supervisor actor (after the members)."""
        if self._ref is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                self._ref.stop(timeout=10)

    def crashes(self) -> list[tuple[str, str]]:
        """The crashes the Supervisor recorded, ``(name, error)`` oldest first."""
        if self._ref is None:
            return []
        crashes: list[tuple[str, str]] = self._ref.proxy().crashes.get()
        return crashes

    def busy(self) -> bool:
        """A failure is being handled (the team is not idle)."""
        with self._lock:
            return bool(self._supervising)

    def failed_for_good(self) -> dict[str, str]:
        """The members that failed and stay down in this process, ``name -> error``."""
        with self._lock:
            return dict(self._down)

    # -- what the members report ---------------------------------------------------------------

    def failed(self, name: str, error: str, generation: int, *, restart: bool = True) -> None:
        """Incarnation ``generation`` of ``name`` failed: the Supervisor takes over (``restart``
        False: it records the failure and does not bring the member back)."""
        if self._roster.stopping:
            return  # winding down: an interrupted turn is not a crash
        with self._lock:
            self._supervising.add(name)
        if self._ref is None:  # no Supervisor runs: nobody will restart it
            log.error("%s failed with no supervisor running: %s", name, error)
            with self._lock:
                self._supervising.discard(name)
            return
        self._ref.tell(AgentFailed(name=name, error=error, generation=generation, restart=restart))

    def paused(self) -> bool:
        """Degraded: no member starts a model call."""
        return self._disk.active

    def out_of_space(self) -> str | None:
        """Why the disk was given up on (still full ``disk_grace_s`` after it filled up), or
        None: the run should stop, pausing the team."""
        return self._out_of_space

    def storage_failed(self, name: str, error: str, generation: int) -> None:
        """A write of ``name``'s incarnation failed for lack of space (rolled back): not a crash
        (its claim, lease and restarts are kept); the runtime goes degraded."""
        if self._roster.stall(name, generation) and not self._disk.enter(error):
            self._roster.notify()

    # -- Supervised ----------------------------------------------------------------------------

    def record_crash(self, name: str, error: str, generation: int) -> bool:
        short = error if len(error) <= 500 else error[:500] + "..."
        if not self._members.crashed(name, generation, short):
            return False
        held = self._board.refresh().holding(name)
        self._members.release_claim(name, "crashed")
        self._members.journal(
            MemberStatusChanged(name=name, status="crashed", reason=short), actor=name
        )
        self._events.emit({"type": "status", "agent": name, "status": "crashed", "reason": short})
        if name != self._lead and self._lead in self._mailbox.agents():
            body = {
                "text": f"{name} crashed: {short}",
                "member": name,
                "task_id": held.id if held is not None else None,
            }
            with contextlib.suppress(Exception):
                self._members.send("supervisor", self._lead, "error", body)
        return True

    def restart(self, name: str) -> None:
        hosted = self._members.start_again(name)
        if hosted is None:
            return
        note = f"You were restarted after a failure ({hosted.last_error})."
        if hosted.plan.kind == "teammate":
            note += " Any task you held was released to the board; you may claim work again."
        self._members.tell(name, UserInput(text=note))
        self._events.emit({"type": "status", "agent": name, "status": "restarted"})

    def gave_up(self, name: str, error: str) -> None:
        short = error if len(error) <= 500 else error[:500] + "..."
        with self._lock:
            self._down[name] = short
        with contextlib.suppress(Exception):  # the record is for `status`; the event says it
            self._members.journal(
                MemberStatusChanged(name=name, status="failed", reason=short), actor=name
            )
        self._events.emit({"type": "failed", "agent": name, "error": short})
        self._roster.notify()

    def supervising(self, name: str, busy: bool) -> None:
        with self._lock:
            if busy:
                self._supervising.add(name)
            else:
                self._supervising.discard(name)
        self._roster.notify()

    # -- degraded (disk full) ------------------------------------------------------------------

    def close(self) -> None:
        """No more probes for space (the runtime stops)."""
        self._disk.close()

    def _degraded(self, reason: str) -> None:
        log.warning("team runtime degraded: %s; model calls paused until space returns", reason)
        self._events.emit({"type": "degraded", "reason": reason})
        self._roster.notify()

    def _gave_up_on_space(self, reason: str) -> None:
        log.warning("no space came back: %s", reason)
        self._out_of_space = reason
        self._roster.notify()

    def _recovered(self) -> None:
        if self._roster.stopping:
            return
        log.warning("team runtime recovered: the disk has space again")
        self._events.emit({"type": "recovered"})
        for name, error, generation in self._members.bring_back_stalled():
            self.failed(name, error, generation)
        self._members.wake_all("recovered")  # the parked ones make their held-back model call
        self._roster.notify()
