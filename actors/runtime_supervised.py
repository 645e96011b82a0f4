"""The runtime's side of supervision: recording a crash and restarting a member.

``Supervising`` extends ``Hosting`` with the ``Supervised`` methods the Supervisor calls
(``actors.supervisor``), each from the Supervisor's thread.
"""

from __future__ import annotations

import contextlib

from actors.messages import UserInput
from actors.runtime_host import Hosting
from mailboxes.events import MemberStatusChanged


class Supervising(Hosting):
    """Crash records and restarts."""

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
