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
import time
from dataclasses import dataclass
from typing import Any

from harness.ports import Clock

__all__ = ["BackoffGate", "ModelWait"]


@dataclass(frozen=True)
class ModelWait:
    """A model client is about to wait before trying again (docs/RELIABILITY.md, "No silent
    waits"): passed to the client's ``on_wait`` callback for every wait of at least its
    ``notice_after`` seconds, so that the caller can say what it waits for and until when."""

    agent: str
    kind: str
    """What failed: ``rate_limit``, ``overloaded``, ``server_error``, ``connection``, or
    ``shared_backoff`` (another client of the process was told to slow down)."""
    reason: str
    """The failure, in one line (e.g. ``rate limited: ...``)."""
    seconds: float
    until: float
    """Wall-clock time (seconds since the epoch, on the client's clock) the wait ends."""
    attempt: int
    """The attempt that failed (1 = the first request); 0 for a ``shared_backoff``."""
    max_attempts: int
    base_url: str
    status: int | None = None

    def line(self) -> str:
        """One human line: ``waiting 45s (until 14:03:12) to retry http://...: rate limited: ...``."""
        when = time.strftime("%H:%M:%S", time.localtime(self.until))
        tail = f" (attempt {self.attempt} of {self.max_attempts})" if self.attempt else ""
        return (
            f"waiting {self.seconds:.0f}s (until {when}) to retry {self.base_url}: "
            f"{self.reason}{tail}"
        )

    def as_event(self) -> dict[str, Any]:
        """The wait as a JSON object (stream-json and runtime events)."""
        return {
            "agent": self.agent,
            "kind": self.kind,
            "reason": self.reason,
            "error_status": self.status,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "retry_delay_ms": round(self.seconds * 1000),
            "until": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.until)),
            "base_url": self.base_url,
        }


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
