"""The production clock and id source: the real implementations of the ``Clock`` and
``IdSource`` ports (``harness.ports``, ``mailboxes.ports``). Tests pass fakes instead."""

from __future__ import annotations

import time
import uuid

__all__ = ["SystemClock", "UuidIds", "new_id"]


class SystemClock:
    """The real clock: wall time, monotonic time, and a real sleep."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


def new_id() -> str:
    """A fresh id, unique across processes: 32 lowercase hex digits (uuid4)."""
    return uuid.uuid4().hex


class UuidIds:
    """The production ``IdSource``: ``new_id()`` ids."""

    def new_id(self) -> str:
        return new_id()
