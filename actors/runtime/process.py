"""Small process-level pieces of the runtime: the runtime lock, the system clock, ids, timers."""

from __future__ import annotations

import fcntl
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from actors.runtime.services import RuntimeBusy

__all__ = ["Clock", "Ids", "take_runtime_lock", "thread_timer"]


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


class Clock:
    """The system clock (wall and monotonic)."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class Ids:
    """uuid4 hex ids."""

    def new_id(self) -> str:
        return uuid.uuid4().hex


def thread_timer(delay_s: float, callback: Callable[[], None]) -> Callable[[], None]:
    timer = threading.Timer(delay_s, callback)
    timer.daemon = True
    timer.start()
    return timer.cancel
