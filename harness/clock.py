"""Production implementations of the harness clock and id ports."""

from __future__ import annotations

import time
import uuid


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class UuidIds:
    """uuid4 hex ids."""

    def new_id(self) -> str:
        return uuid.uuid4().hex
