"""Small process-level pieces of the runtime: the runtime lock, member leases, the event sink,
the system clock, ids and timers."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from actors.errors import TeamError
from mailboxes.errors import LeaseHeld
from mailboxes.ports import Liveness

__all__ = [
    "EventSink",
    "OnEvent",
    "RuntimeBusy",
    "Timer",
    "hold_lease",
    "take_runtime_lock",
    "thread_timer",
]

log = logging.getLogger(__name__)

Timer = Callable[[float, Callable[[], None]], Callable[[], None]]
"""``timer(delay_s, callback)`` runs ``callback`` once after ``delay_s``; returns a cancel."""

OnEvent = Callable[[Mapping[str, Any]], None]
"""Where a runtime's output events go (stream-json, the live view)."""


class RuntimeBusy(TeamError):
    """Another runtime already runs this team (or the member is hosted by a live process)."""


def take_runtime_lock(path: Path) -> Callable[[], None]:
    """Hold ``path`` (flock) for this process; returns the release. ``RuntimeBusy`` if another
    live process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise RuntimeBusy(
            f"another teamctl runtime (pid {holder}) is running this team; stop it first, or "
            "host one teammate in this process with `teamctl join NAME`"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def release() -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    return release


def hold_lease(liveness: Liveness, name: str) -> ExitStack:
    """``name``'s liveness lease (``.team/members/<name>.lock``), held until the stack closes;
    ``RuntimeBusy`` when a live process holds it."""
    lease = ExitStack()
    try:
        lease.enter_context(liveness.hold(name))
    except LeaseHeld:
        raise RuntimeBusy(f"{name} is already hosted by a live process") from None
    return lease


class EventSink:
    """The runtime's output events, one at a time (actors emit from their own threads); a sink
    that raises is logged, never propagated."""

    def __init__(self, on_event: OnEvent | None) -> None:
        self._on_event = on_event
        self._lock = threading.Lock()

    @property
    def wanted(self) -> bool:
        """Somebody listens (building an event may be skipped otherwise)."""
        return self._on_event is not None

    def emit(self, event: Mapping[str, Any]) -> None:
        if self._on_event is None:
            return
        with self._lock:
            try:
                self._on_event(event)
            except Exception:
                log.exception("event sink failed")


def thread_timer(delay_s: float, callback: Callable[[], None]) -> Callable[[], None]:
    """A ``Timer`` on a daemon ``threading.Timer``."""
    timer = threading.Timer(delay_s, callback)
    timer.daemon = True
    timer.start()
    return timer.cancel
