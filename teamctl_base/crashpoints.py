"""Named crash points for fault tests: ``crash_point(name)`` SIGKILLs this process when
``$TEAMCTL_CRASH_AT`` is ``<name>`` or ``<name>:<nth>`` (the nth time the point is reached,
counted from 1 in this process).

The variable is read once, at import: with it unset a call is one comparison, so the calls can
stay in production code at the places a crash matters (between a journal append and its
projection write, between a Maildir tmp write and its rename, between a model response and its
transcript append, after ``cron.fired`` before the delivery, ...). The points of every package
share this one plan, so ``<nth>`` counts passages of a name wherever it is reached.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["CRASH_ENV", "CrashPlan", "crash_point", "parse_crash_at"]

CRASH_ENV = "TEAMCTL_CRASH_AT"


def parse_crash_at(value: str) -> tuple[str, int] | None:
    """``"name[:nth]"`` as ``(name, nth)``; empty means no crash point. ``nth`` ≥ 1."""
    value = value.strip()
    if not value:
        return None
    name, _, nth = value.partition(":")
    count = int(nth) if nth else 1
    if not name or count < 1:
        raise ValueError(f"{CRASH_ENV}={value!r}: expected NAME or NAME:N with N >= 1")
    return name, count


class CrashPlan:
    """Kills the process the ``nth`` time the named point is reached (thread-safe)."""

    def __init__(self, target: tuple[str, int] | None) -> None:
        self.name = target[0] if target else None
        self._nth = target[1] if target else 0
        self._seen = 0
        self._lock = threading.Lock()

    def reached(self, name: str) -> bool:
        """Count one passage of ``name``; True when it is the one to crash at."""
        if name != self.name:
            return False
        with self._lock:
            self._seen += 1
            return self._seen == self._nth


_PLAN = CrashPlan(parse_crash_at(os.environ.get(CRASH_ENV, "")))
_TARGET = _PLAN.name


def crash_point(name: str) -> None:
    """SIGKILL this process here if ``$TEAMCTL_CRASH_AT`` (read at import) selects it."""
    if name == _TARGET and _PLAN.reached(name):
        os.kill(os.getpid(), signal.SIGKILL)
