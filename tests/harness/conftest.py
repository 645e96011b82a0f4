"""Shared harness fixtures: a fake clock (it records sleeps), and running fake Messages APIs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from harness.model.fakeapi import FakeMessagesServer
from harness.model.scripted import Fault
from tests.support.fakes import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


FakeApiFactory = Callable[..., FakeMessagesServer]


@pytest.fixture
def fake_api() -> Iterator[FakeApiFactory]:
    """``fake_api(script, faults=..., prompt_cache=...)`` starts a fake Messages API (other
    keywords go to ``FakeMessagesServer``), stopped after the test."""
    started: list[FakeMessagesServer] = []

    def start(script: Any, faults: Iterable[Fault] = (), **options: Any) -> FakeMessagesServer:
        server = FakeMessagesServer(script, faults=faults, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
