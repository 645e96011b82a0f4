"""Fakes shared across the test folders: a policy that allows every tool call, and a clock that
moves only when a test (or a sleep) moves it."""

from __future__ import annotations

import threading
from datetime import datetime

from harness.ports import ToolUseBlock
from harness.tools.base import PermissionRequest, PolicyVerdict, ToolContext, ToolOutput

__all__ = ["AllowAll", "FakeClock"]


class AllowAll:
    """A ``ToolPolicy`` that allows every call and adds nothing after it; ``seen`` lists the
    names of the calls it was asked about, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        self.seen.append(call.name)
        return PolicyVerdict("allow")

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        return None


def _seconds(when: datetime | float) -> float:
    return when.timestamp() if isinstance(when, datetime) else float(when)


class FakeClock:
    """A hand-driven ``Clock``: wall and monotonic time are both ``t`` (seconds), which moves
    only by ``set``, ``advance``, assignment, or ``sleep`` (returns at once, advances ``t`` and
    is recorded in ``sleeps``). The methods are thread-safe."""

    def __init__(self, start: datetime | float = 1_000_000.0) -> None:
        self.t = _seconds(start)
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self.t

    def monotonic(self) -> float:
        return self.now()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.t += max(0.0, seconds)

    def set(self, when: datetime | float) -> None:
        with self._lock:
            self.t = _seconds(when)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.t += seconds
