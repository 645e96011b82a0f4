"""Every agent's model client shares one SDK client (one TLS context, one connection pool):
spawning a teammate loads no CA bundle and opens no new connection pool on its critical path.
The SDK is warmed up on a thread while the runtime starts (``actors/runtime/warmup.py``), so the
lead's first answer does not pay for what the SDK builds lazily; a first call waits for it."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from actors.runtime.members import anthropic_models
from actors.runtime.warmup import AfterWarmUp, warm_model_sdk
from harness.ports import Message, ModelRequest, ModelResponse, TextBlock


def test_the_agents_of_a_runtime_share_one_connection_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # never called here
    make = anthropic_models()
    lead, w1, w2 = (m.inner for m in (make("lead", "m1"), make("w1", "m2"), make("w2", "m2")))  # type: ignore[attr-defined]
    pools = {id(m._client._client) for m in (lead, w1, w2)}
    assert len(pools) == 1
    # each keeps its own settings on it: no SDK retries (the model's own), its own model
    assert all(m._client.max_retries == 0 for m in (lead, w1, w2))
    assert (lead.model, w1.model) == ("m1", "m2")
    # another runtime (another factory) gets its own
    other = anthropic_models()("lead", "m1").inner  # type: ignore[attr-defined]
    assert id(other._client._client) not in pools


def test_the_warm_up_runs_a_whole_streamed_call_without_the_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the warm-up opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    assert warm_model_sdk() is True  # the answer it was given came back through AnthropicModel


def test_the_warm_up_leaves_the_sdk_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the first response used to build: the SDK's message model is complete."""
    import anthropic.types

    assert warm_model_sdk() is True
    assert anthropic.types.Message.__pydantic_complete__


class _Recorder:
    def __init__(self) -> None:
        self.called = threading.Event()

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.called.set()
        return ModelResponse(
            id="m", model=request.model, content=(TextBlock(text="ok"),), stop_reason="end_turn"
        )


def _request() -> ModelRequest:
    return ModelRequest(
        model="m", messages=(Message(role="user", content=(TextBlock(text="hi"),)),)
    )


def test_a_first_call_waits_for_the_warm_up_and_later_ones_do_not() -> None:
    warmed = threading.Event()
    inner = _Recorder()
    client = AfterWarmUp(inner, warmed)
    answers: list[Any] = []
    first = threading.Thread(target=lambda: answers.append(client.complete(_request())))
    first.start()
    assert not inner.called.wait(0.2)  # held while the warm-up runs
    warmed.set()
    first.join(10)
    assert inner.called.is_set() and answers[0].content[0].text == "ok"
    warmed.clear()  # a second call never looks at it again
    assert client.complete(_request()).content[0].text == "ok"


def test_a_runtimes_model_factory_starts_the_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    client = anthropic_models()("lead", "m1")
    assert isinstance(client, AfterWarmUp)
    warmed = client._warmed
    assert warmed is not None and warmed.wait(60)
