"""Fakes shared by the scheduler, jobs and cron CLI tests: a timer that only records what was
armed, deterministic ids, and the fixture that stops every actor (the hand-driven clock is
``tests.support.fakes.FakeClock``)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pykka
import pytest


@dataclass
class ArmedTimer:
    delay_s: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeTimers:
    """A ``TimerFactory`` that never fires on its own; ``fire_latest`` runs the armed callback."""

    armed: list[ArmedTimer] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, delay_s: float, callback: Callable[[], None]) -> ArmedTimer:
        timer = ArmedTimer(delay_s, callback)
        with self.lock:
            self.armed.append(timer)
        return timer

    def live(self) -> list[ArmedTimer]:
        with self.lock:
            return [t for t in self.armed if not t.cancelled]


class SeqIds:
    """Ids ``id00000001``, ``id00000002``, ... (hex-safe, unique)."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def new_id(self) -> str:
        with self._lock:
            return f"{next(self._counter):08x}{'0' * 24}"


@pytest.fixture
def stop_actors() -> Iterator[None]:
    """Stops every pykka actor after the test."""
    yield
    pykka.ActorRegistry.stop_all()
