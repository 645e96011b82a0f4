"""The production clock and id source: the real implementations of the ``Clock`` and
``IdSource`` ports (``harness.ports``, ``mailboxes.ports``). Tests pass fakes instead."""

from __future__ import annotations

import os
import time

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


_V4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_V4_SET = (4 << 76) | (0x8000 << 48)


def new_id() -> str:
    """A fresh id, unique across processes: 32 lowercase hex digits (a random uuid4, spelled
    out here: importing ``uuid`` costs every command a millisecond or two)."""
    return f"{int.from_bytes(os.urandom(16)) & _V4_CLEAR | _V4_SET:032x}"


class UuidIds:
    """The production ``IdSource``: ``new_id()`` ids."""

    def new_id(self) -> str:
        return new_id()
