"""The runtime's side of supervision: recording a crash and restarting a member.

``Supervising`` extends ``Hosting`` with the ``Supervised`` methods the Supervisor calls
(``actors.runtime.supervisor``), each from the Supervisor's thread, and the degraded mode: a member whose
write failed for lack of space is kept (claim, lease, restarts) and brought back from its
transcript when space returns (``actors.runtime.degraded``).
"""

from __future__ import annotations

import contextlib
import logging
import os

import pykka

from actors.messages import UserInput, Wake
from actors.runtime.degraded import DiskWatch, Timer, probe_space
from actors.runtime.hosting import Hosting
from mailboxes.events import MemberStatusChanged
from mailboxes.fsutil import Fsync

log = logging.getLogger(__name__)


class Supervising(Hosting):
    """Crash records and restarts; the degraded mode (disk full)."""

    disk: DiskWatch

    # -- Supervised ----------------------------------------------------------------------------

    def record_crash(self, name: str, error: str, generation: int) -> bool:
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped or hosted.generation != generation:
                return False
            hosted.generation += 1
            hosted.busy = False
        self._halt(hosted, 10.0)
        short = error if len(error) <= 500 else error[:500] + "..."
        hosted.last_error = short
        held = self.board.refresh().holding(name)
        self._release_claim(name, "crashed")
        self._journal(MemberStatusChanged(name=name, status="crashed", reason=short), actor=name)
        self.emit({"type": "status", "agent": name, "status": "crashed", "reason": short})
        if name != self.lead_name and self.lead_name in self.mailbox.agents():
            body = {
                "text": f"{name} crashed: {short}",
                "member": name,
                "task_id": held.id if held is not None else None,
            }
            with contextlib.suppress(Exception):
                self.send("supervisor", self.lead_name, "error", body)
        return True

    def restart(self, name: str) -> None:
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped or self._stopping:
                return
            hosted.starting = True
        self._start_actor(hosted, resume=True)
        note = f"You were restarted after a failure ({hosted.last_error})."
        if hosted.plan.kind == "teammate":
            note += " Any task you held was released to the board; you may claim work again."
        ref = hosted.ref
        if ref is not None:
            ref.tell(UserInput(text=note))
        self.emit({"type": "status", "agent": name, "status": "restarted"})

    def supervising(self, name: str, busy: bool) -> None:
        with self._lock:
            if busy:
                self._supervising.add(name)
            else:
                self._supervising.discard(name)
            self._changed.notify_all()

    # -- degraded (disk full) ------------------------------------------------------------------

    def _init_degraded(self, fsync: Fsync | None, timer: Timer) -> None:
        team_dir = self.team.repo.team_dir
        self.disk = DiskWatch(
            probe=lambda: probe_space(team_dir, fsync=fsync or os.fsync),
            timer=timer,
            on_enter=self._degraded,
            on_recover=self._recovered,
        )

    def paused(self) -> bool:
        """Degraded: no member starts a model call."""
        return self.disk.active

    def storage_failed(self, name: str, error: str, generation: int) -> None:
        """A write of ``name``'s incarnation failed for lack of space (rolled back): not a crash
        (its claim, lease and restarts are kept); the runtime goes degraded."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is None or hosted.stopped or hosted.generation != generation:
                return
            if self._stopping:
                return
            hosted.stalled, hosted.busy = True, False
        if not self.disk.enter(error):
            self._notify()

    def hold_input(self, name: str, text: str) -> None:
        """A user input reached a stalled incarnation: told to the next one (still pending)."""
        with self._lock:
            hosted = self._hosted.get(name)
            if hosted is not None:
                hosted.held.append(text)

    def _degraded(self, reason: str) -> None:
        log.warning("team runtime degraded: %s; model calls paused until space returns", reason)
        self.emit({"type": "degraded", "reason": reason})
        self._notify()

    def _recovered(self) -> None:
        if self._stopping:
            return
        log.warning("team runtime recovered: the disk has space again")
        self.emit({"type": "recovered"})
        with self._lock:
            stalled = [h for h in self._hosted.values() if h.stalled and not h.stopped]
            for hosted in stalled:
                hosted.generation += 1  # a late report of the old incarnation is stale
                hosted.starting = True
        for hosted in stalled:
            with contextlib.suppress(OSError):  # closing flushes what the full disk refused
                self._halt(hosted, 10.0)
            with self._lock:
                hosted.stalled = False
                if hosted.stopped or self._stopping:
                    continue
            try:
                self._start_actor(hosted, resume=True)
                with self._lock:
                    held, hosted.held = hosted.held, []
                for text in held:
                    if hosted.ref is not None:
                        hosted.ref.tell(UserInput(text=text))
            except Exception as exc:  # a real failure now: the Supervisor's business
                log.exception("bringing %s back after the disk was full failed", hosted.plan.name)
                self.failed(hosted.plan.name, f"{type(exc).__name__}: {exc}", hosted.generation)
        for ref in self._refs():  # the parked ones make their held-back model call
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(Wake(reason="recovered"))
        self._notify()
