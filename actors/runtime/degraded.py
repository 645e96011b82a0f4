"""The runtime's degraded mode: the disk is full (DESIGN §12, issue 8 item 6).

A durable write that fails for lack of space (``ENOSPC``, ``EFBIG``, ``EDQUOT``) is rolled back by
the store (``mailboxes.errors.WriteFailed``) or leaves a torn transcript line that resume drops, so
nothing it was about is acknowledged. It is not a crash of the member that hit it: the runtime goes
degraded (one event, one log line), stops starting model calls, and ``DiskWatch`` probes for space
with a timer (1, 2, then every 5 s) until a small write + fsync succeeds; then the runtime recovers
and retries the interrupted work.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from mailboxes.fsutil import Fsync, write_all

log = logging.getLogger(__name__)

__all__ = ["BACKOFF_S", "DISK_FULL", "DiskWatch", "disk_full", "probe_space"]

DISK_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
"""Errnos meaning "no room to write": a condition of the machine, not a bug of the member."""

BACKOFF_S = (1.0, 2.0, 5.0)
"""Delays between recovery probes; the last one repeats."""

Timer = Callable[[float, Callable[[], None]], Callable[[], None]]
"""``timer(delay_s, callback)`` runs ``callback`` once after ``delay_s``; returns a cancel."""


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
    succeeds (both outside the lock, from the caller's / the timer's thread)."""

    def __init__(
        self,
        *,
        probe: Callable[[], None],
        timer: Timer,
        on_enter: Callable[[str], None],
        on_recover: Callable[[], None],
        backoff_s: Sequence[float] = BACKOFF_S,
    ) -> None:
        self._probe = probe
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
            self._schedule()
        self._on_enter(reason)
        return True

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
