"""A backoff shared by every model client of one process, so that agents do not stampede.

When the API tells one client to wait (a 429 with ``retry-after``, a 529 overload), the others
would hit the same limit a moment later if each only honoured its own answers. A ``BackoffGate``
holds a single "not before" time: a client told to wait ``d`` seconds holds the gate until
``now + d``, and every client waits at the gate before each request. Thread-safe. Times are on
the monotonic time of the ``Clock`` the callers pass (one time base: ``SystemClock`` or one
fake).
"""

from __future__ import annotations

import threading

from harness.ports import Clock

__all__ = ["BackoffGate"]


class BackoffGate:
    """One "not before" time for requests to one API (``0``: open)."""

    def __init__(self) -> None:
        self._until = 0.0
        self._lock = threading.Lock()
        self.holds = 0
        """How many times a client closed the gate (for tests and status)."""

    @property
    def until(self) -> float:
        with self._lock:
            return self._until

    def hold(self, until: float) -> None:
        """No request before ``until``; an earlier time than the current hold changes nothing."""
        with self._lock:
            self.holds += 1
            self._until = max(self._until, until)

    def wait(self, clock: Clock) -> float:
        """Sleep on ``clock`` until the gate is open (re-checked: it may be held again meanwhile);
        returns the seconds slept."""
        slept = 0.0
        while True:
            delay = self.until - clock.monotonic()
            if delay <= 0:
                return slept
            clock.sleep(delay)
            slept += delay
