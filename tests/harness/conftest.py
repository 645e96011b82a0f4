"""Shared harness fixtures: a fake clock that records sleeps, and running fake Messages APIs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from harness.model.fakeapi import FakeMessagesServer
from harness.model.scripted import Fault


class RecordingClock:
    """A fake ``Clock``: ``sleep`` returns at once, advances time and is recorded."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.t = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += max(0.0, seconds)


@pytest.fixture
def clock() -> RecordingClock:
    return RecordingClock()


FakeApiFactory = Callable[..., FakeMessagesServer]


@pytest.fixture
def fake_api() -> Iterator[FakeApiFactory]:
    """``fake_api(script, faults=...)`` starts a fake Messages API, stopped after the test."""
    started: list[FakeMessagesServer] = []

    def start(script: Any, faults: Iterable[Fault] = ()) -> FakeMessagesServer:
        server = FakeMessagesServer(script, faults=faults).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
