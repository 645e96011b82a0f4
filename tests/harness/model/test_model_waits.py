"""No silent waits, bounded connection retries and auth errors of ``AnthropicModel``, through the
real SDK against the fake Messages API (or a closed loopback port), on a fake clock."""

from __future__ import annotations

import random
import socket
from typing import Any

import anthropic
import pytest

from harness.errors import ModelAuthError, ModelConnectionError, ModelError
from harness.model.anthropic_client import AnthropicModel
from harness.model.backoff import BackoffGate, ModelWait
from harness.model.scripted import Fault
from harness.ports import Message, ModelRequest, TextBlock
from tests.harness.conftest import FakeApiFactory
from tests.support.fakes import FakeClock

SCRIPT: dict[str, Any] = {"agents": {"lead": {"steps": ["Done."]}}}


def request() -> ModelRequest:
    return ModelRequest(
        model="claude-sonnet-4-6",
        agent="lead",
        max_tokens=100,
        messages=(Message(role="user", content=(TextBlock(text="go"),)),),
    )


def make_model(base_url: str, clock: FakeClock, **options: Any) -> tuple[AnthropicModel, list[Any]]:
    waits: list[ModelWait] = []
    client = anthropic.Anthropic(api_key="test-key", base_url=base_url)
    model = AnthropicModel(
        "claude-sonnet-4-6",
        client=client,
        clock=clock,
        rng=random.Random(0),
        on_wait=waits.append,
        **options,
    )
    return model, waits


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_a_long_rate_limit_wait_is_announced_with_its_end(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="rate_limit", retry_after=45)])
    model, waits = make_model(server.base_url, clock)
    start = clock.now()
    assert model.complete(request()).content == (TextBlock(text="Done."),)
    assert clock.sleeps == [45.0]
    [wait] = waits
    assert (wait.kind, wait.seconds, wait.until, wait.attempt) == (
        "rate_limit",
        45.0,
        start + 45,
        1,
    )
    assert wait.agent == "lead" and wait.status == 429
    line = wait.line()
    assert line.startswith("waiting 45s (until ")
    assert server.base_url.rstrip("/") in line and "rate limited" in line
    assert "attempt 1 of 9" in line
    event = wait.as_event()
    assert event["retry_delay_ms"] == 45_000 and event["kind"] == "rate_limit"


def test_overload_backoff_is_announced_and_short_waits_are_not(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    server = fake_api(
        SCRIPT,
        faults=[
            Fault(kind="rate_limit", retry_after=1),  # under two seconds: not worth a line
            Fault(kind="overloaded", retry_after=None),
            Fault(kind="server_error"),
        ],
    )
    model, waits = make_model(server.base_url, clock, base_delay=8.0)
    model.complete(request())
    assert len(clock.sleeps) == 3 and clock.sleeps[0] == 1.0
    assert [(w.kind, w.seconds) for w in waits] == [
        ("overloaded", clock.sleeps[1]),
        ("server_error", clock.sleeps[2]),
    ]
    assert all(w.seconds >= 2 for w in waits)


def test_waiting_at_a_gate_held_by_another_client_is_announced(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    server = fake_api(SCRIPT)
    gate = BackoffGate()
    gate.hold(clock.monotonic() + 30)
    model, waits = make_model(server.base_url, clock, gate=gate)
    model.complete(request())
    assert clock.sleeps == [30.0]
    [wait] = waits
    assert (wait.kind, wait.seconds, wait.attempt) == ("shared_backoff", 30.0, 0)
    assert "another agent" in wait.line()


def test_an_unreachable_server_gives_up_within_the_connect_timeout(clock: FakeClock) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}"
    model, waits = make_model(base_url, clock, connect_timeout=20.0)
    with pytest.raises(ModelConnectionError) as info:
        model.complete(request())
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"cannot reach the Messages API at {base_url}: ")
    assert "refused" in message and "TEAMCTL_CONNECT_TIMEOUT" in message
    assert info.value.kind == "connection"
    assert sum(clock.sleeps) == pytest.approx(20.0)  # the budget, not eight back-offs
    assert len(clock.sleeps) < 8
    long_waits = [s for s in clock.sleeps if s >= 2]
    assert [w.seconds for w in waits] == long_waits and long_waits
    assert all(w.kind == "connection" and base_url in w.line() for w in waits)


def test_the_connect_timeout_comes_from_the_environment(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMCTL_CONNECT_TIMEOUT", "5")
    model, _ = make_model(f"http://127.0.0.1:{closed_port()}", clock)
    assert model.connect_timeout == 5.0
    with pytest.raises(ModelConnectionError):
        model.complete(request())
    assert sum(clock.sleeps) == pytest.approx(5.0)
    monkeypatch.setenv("TEAMCTL_CONNECT_TIMEOUT", "soon")
    with pytest.raises(ModelError, match="TEAMCTL_CONNECT_TIMEOUT='soon'"):
        make_model("http://127.0.0.1:1", clock)


@pytest.mark.parametrize(
    ("kind", "status", "words"),
    [
        ("authentication", 401, "the API key was rejected (401) by "),
        ("permission", 403, "the API key is not allowed to do this (403) at "),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_auth_errors_are_raised_at_once_in_one_line(
    fake_api: FakeApiFactory,
    clock: FakeClock,
    kind: str,
    status: int,
    words: str,
    stream: bool,
) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind=kind, times=5)])  # type: ignore[arg-type]
    model, waits = make_model(server.base_url, clock, stream=stream)
    with pytest.raises(ModelAuthError) as info:
        model.complete(request())
    assert (info.value.kind, info.value.status) == (kind, status)
    message = str(info.value)
    assert "\n" not in message and words + server.base_url.rstrip("/") in message
    assert "ANTHROPIC_API_KEY" in message
    assert len(server.requests) == 1 and clock.sleeps == [] and waits == []


def test_the_team_runtimes_clients_report_waits_as_events(
    fake_api: FakeApiFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.cli.run import _text_line
    from actors.runtime.members import anthropic_models

    server = fake_api(SCRIPT, faults=[Fault(kind="rate_limit", retry_after=45)])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    events: list[dict[str, Any]] = []
    client = anthropic_models(on_wait=events.append)("lead", "claude-sonnet-4-6")
    model = client.inner  # type: ignore[attr-defined]  # first call after the SDK's warm-up
    assert isinstance(model, AnthropicModel)
    clock = FakeClock()
    model._clock = clock  # the factory builds clients on the system clock
    model.complete(request())
    [event] = events
    assert event["type"] == "model_wait" and event["agent"] == "lead"
    assert event["retry_delay_ms"] == 45_000 and clock.sleeps == [45.0]
    line = _text_line(event)
    assert line is not None and line.startswith("[lead] waiting 45s (until ")
