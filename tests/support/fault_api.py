"""A fake Messages API that fails a fraction of requests, and model clients that record their
waits: the pieces of the model-faults suite (issue 8 item 5)."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import Any

from harness.model.backoff import BackoffGate
from harness.model.fakeapi import FakeMessagesServer
from harness.model.scripted import Fault
from harness.ports import Clock
from teamctl_base.clock import SystemClock

KINDS = ("rate_limit", "overloaded", "server_error", "reset", "stream_error", "stream_reset")


class FaultyApi(FakeMessagesServer):
    """Each request fails with probability ``rate`` (seeded); the faults cycle through
    ``kinds`` so that every kind is served once there are at least ``len(kinds)`` of them."""

    def __init__(
        self,
        script: Any,
        *,
        rate: float,
        seed: int,
        kinds: Sequence[str] = KINDS,
        retry_after: float = 0.2,
    ) -> None:
        super().__init__(script)
        self.rate = rate
        self.kinds = tuple(kinds)
        self.retry_after = retry_after
        self._rng = random.Random(seed)
        self._served = 0
        self._guard = threading.Lock()

    def next_fault(self, request: Any) -> Fault | None:
        queued = super().next_fault(request)
        if queued is not None:
            return queued
        with self._guard:
            if self._rng.random() >= self.rate:
                return None
            kind = self.kinds[self._served % len(self.kinds)]
            self._served += 1
        return Fault.model_validate({"kind": kind, "retry_after": self.retry_after})


class AgentClock(SystemClock):
    """The real clock, with every sleep recorded as ``(agent, seconds)`` in a shared log."""

    def __init__(self, agent: str, log: list[tuple[str, float]], lock: threading.Lock) -> None:
        self.agent = agent
        self._log = log
        self._lock = lock

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._log.append((self.agent, seconds))
        super().sleep(seconds)


class RecordingGate(BackoffGate):
    """A ``BackoffGate`` that records who had to wait at it, and for how long (``waits``), and
    every pass through it (``passes``: the agent, the time it came, the hold in force then,
    the time it left; on the clock it waited on)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[tuple[str, float]] = []
        self.passes: list[tuple[str, float, float, float]] = []
        self._log_lock = threading.Lock()

    def wait(self, clock: Clock) -> float:
        came, held = clock.monotonic(), self.until
        slept = super().wait(clock)
        left = clock.monotonic()
        with self._log_lock:
            self.passes.append((getattr(clock, "agent", "?"), came, held, left))
            if slept > 0:
                self.waits.append((getattr(clock, "agent", "?"), slept))
        return slept
