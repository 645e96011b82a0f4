"""AnthropicModel recovery, through the real SDK against the fake Messages API."""

from __future__ import annotations

import json
import random
from typing import Any

import anthropic
import pytest

from harness.errors import ModelError, PromptTooLong
from harness.model.anthropic_client import AnthropicModel
from harness.model.fakeapi import FakeMessagesServer
from harness.model.scripted import Fault
from harness.ports import Message, ModelRequest, TextBlock, ToolUseBlock
from tests.harness.conftest import FakeApiFactory
from tests.support.fakes import FakeClock

BIG_INPUT = {"path": "src/app.py", "content": "print('hello world')\n" * 8}
SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "steps": [
                {"text": "Writing it.", "tool_uses": [{"name": "write_file", "input": BIG_INPUT}]},
                "Done.",
            ]
        }
    }
}


def request(text: str = "go", *, max_tokens: int = 1000) -> ModelRequest:
    return ModelRequest(
        model="claude-sonnet-4-6",
        agent="lead",
        max_tokens=max_tokens,
        messages=(Message(role="user", content=(TextBlock(text=text),)),),
    )


def make_model(
    server: FakeMessagesServer, clock: FakeClock, *, stream: bool = True, **options: Any
) -> AnthropicModel:
    client = anthropic.Anthropic(api_key="test-key", base_url=server.base_url)
    return AnthropicModel(
        "claude-sonnet-4-6",
        client=client,
        clock=clock,
        stream=stream,
        rng=random.Random(0),
        **options,
    )


def assert_whole_tool_uses(content: tuple[Any, ...]) -> None:
    for block in content:
        if isinstance(block, ToolUseBlock):
            assert block.input == BIG_INPUT


@pytest.mark.parametrize("stream", [True, False])
def test_text_and_tool_use_round_trip(
    fake_api: FakeApiFactory, clock: FakeClock, stream: bool
) -> None:
    server = fake_api(SCRIPT)
    model = make_model(server, clock, stream=stream)
    first = model.complete(request())
    assert first.content == (
        TextBlock(text="Writing it."),
        ToolUseBlock(id="toolu_lead_0001", name="write_file", input=BIG_INPUT),
    )
    assert first.stop_reason == "tool_use" and first.model == "claude-sonnet-4-6"
    second = model.complete(request("result"))
    assert second.content == (TextBlock(text="Done."),) and second.stop_reason == "end_turn"
    assert all(r.body.get("stream", False) is stream for r in server.requests)
    calls = model.calls
    assert [c.attempts for c in calls] == [1, 1]
    assert calls[0].usage == first.usage and calls[0].cost_usd is not None and calls[0].cost_usd > 0
    assert clock.sleeps == []


@pytest.mark.parametrize("stream", [True, False])
def test_429_waits_for_retry_after(
    fake_api: FakeApiFactory, clock: FakeClock, stream: bool
) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="rate_limit", retry_after=7, times=2)])
    response = make_model(server, clock, stream=stream).complete(request())
    assert response.stop_reason == "tool_use"
    assert clock.sleeps == [7.0, 7.0]
    assert [r.fault for r in server.requests] == ["rate_limit", "rate_limit", None]


def test_529_backs_off_then_switches_to_the_fallback_model(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="overloaded", times=3)])
    model = make_model(server, clock, fallback_model="claude-haiku-4-5", fallback_after=3)
    response = model.complete(request())
    assert response.model == "claude-haiku-4-5"
    assert [r.body["model"] for r in server.requests] == ["claude-sonnet-4-6"] * 3 + [
        "claude-haiku-4-5"
    ]
    assert len(clock.sleeps) == 2  # no wait before trying another model
    assert 0.5 <= clock.sleeps[0] <= 1.0 and 1.0 <= clock.sleeps[1] <= 2.0  # jittered, growing
    assert model.calls[0].model == "claude-haiku-4-5" and model.calls[0].attempts == 4


def test_529_without_fallback_gives_up_after_max_retries(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="overloaded", times=10)])
    with pytest.raises(ModelError) as info:
        make_model(server, clock, max_retries=3).complete(request())
    assert (info.value.kind, info.value.status) == ("overloaded", 529)
    assert len(server.requests) == 4 and len(clock.sleeps) == 3


@pytest.mark.parametrize("stream", [True, False])
def test_spend_limit_is_raised_at_once(
    fake_api: FakeApiFactory, clock: FakeClock, stream: bool
) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="spend_limit")])
    with pytest.raises(ModelError) as info:
        make_model(server, clock, stream=stream).complete(request())
    assert (info.value.kind, info.value.status) == ("spend_limit", 429)
    assert len(server.requests) == 1 and clock.sleeps == []


@pytest.mark.parametrize("kind", ["server_error", "reset"])
@pytest.mark.parametrize("stream", [True, False])
def test_server_error_and_reset_are_retried(
    fake_api: FakeApiFactory, clock: FakeClock, stream: bool, kind: str
) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind=kind)])  # type: ignore[arg-type]
    response = make_model(server, clock, stream=stream).complete(request())
    assert_whole_tool_uses(response.content)
    assert response.stop_reason == "tool_use"
    assert [r.fault for r in server.requests] == [kind, None] and len(clock.sleeps) == 1


def test_overloaded_event_mid_stream_is_retried(fake_api: FakeApiFactory, clock: FakeClock) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="stream_error")])
    model = make_model(server, clock)
    response = model.complete(request())
    assert response.content[0] == TextBlock(text="Writing it.")
    assert [r.fault for r in server.requests] == ["stream_error", None] and len(clock.sleeps) == 1
    # A failed attempt is not billed: the call's bill is its one answered request.
    assert response.billed is None and response.billed_usage == model.calls[0].usage


@pytest.mark.parametrize("stream", [True, False])
def test_connection_dropped_mid_stream_is_retried(
    fake_api: FakeApiFactory, clock: FakeClock, stream: bool
) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="stream_reset", times=2)])
    response = make_model(server, clock, stream=stream).complete(request())
    assert_whole_tool_uses(response.content)
    assert response.content[0] == TextBlock(text="Writing it.")
    assert len(server.requests) == 3 and len(clock.sleeps) == 2


@pytest.mark.parametrize("stream", [True, False])
def test_max_tokens_in_a_tool_use_escalates_then_continues(
    fake_api: FakeApiFactory, clock: FakeClock, stream: bool
) -> None:
    script = {"agents": {"lead": {"steps": [SCRIPT["agents"]["lead"]["steps"][0]] * 3}}}
    server = fake_api(script, faults=[Fault(kind="max_tokens", times=2)])
    model = make_model(server, clock, stream=stream, escalated_max_tokens=4000)
    response = model.complete(request(max_tokens=1000))
    sent = server.requests
    assert [r.body["max_tokens"] for r in sent] == [1000, 4000, 4000]
    # The continuation carries the cut answer without its cut tool call, then the prompt.
    assistant, prompt = sent[2].body["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["text"]
    assert (
        "write_file" in prompt["content"][0]["text"] and "NOT run" in prompt["content"][0]["text"]
    )
    # The answer: the text before the cut, then the continuation's whole call.
    assert [type(b).__name__ for b in response.content] == [
        "TextBlock",
        "TextBlock",
        "ToolUseBlock",
    ]
    assert_whole_tool_uses(response.content)
    assert response.stop_reason == "tool_use"
    assert model.calls[0].attempts == 3
    assert model.calls[0].usage.output_tokens > response.usage.output_tokens
    # The response carries the bill of all three requests too (what the team journals).
    assert response.billed_usage == response.billed == model.calls[0].usage


def test_max_tokens_escalation_alone_can_succeed(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    script = {"agents": {"lead": {"steps": [SCRIPT["agents"]["lead"]["steps"][0]] * 2}}}
    server = fake_api(script, faults=[Fault(kind="max_tokens")])
    response = make_model(server, clock).complete(request())
    assert [r.body["max_tokens"] for r in server.requests] == [1000, 32000]
    assert len(server.requests[1].body["messages"]) == 1
    assert_whole_tool_uses(response.content)
    assert response.content[-1] == ToolUseBlock(
        id="toolu_lead_0002", name="write_file", input=BIG_INPUT
    )


def test_a_truncated_tool_use_is_never_returned(fake_api: FakeApiFactory, clock: FakeClock) -> None:
    script = {"agents": {"lead": {"steps": [SCRIPT["agents"]["lead"]["steps"][0]] * 4}}}
    server = fake_api(script, faults=[Fault(kind="max_tokens", times=4)])
    response = make_model(server, clock, max_continuations=2).complete(request())
    assert len(server.requests) == 4  # first, escalated, two continuations
    assert not any(isinstance(b, ToolUseBlock) for b in response.content)
    assert response.stop_reason == "max_tokens"
    server.model.assert_consumed()


def test_whole_tool_calls_before_the_cut_are_returned_without_continuing(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    two_calls = {
        "tool_uses": [
            {"name": "read_file", "input": {"path": "a"}},
            {"name": "write_file", "input": BIG_INPUT},
        ]
    }
    server = fake_api(
        {"agents": {"lead": {"steps": [two_calls] * 2}}}, faults=[Fault(kind="max_tokens", times=2)]
    )
    response = make_model(server, clock).complete(request())
    assert len(server.requests) == 2
    assert response.content == (
        ToolUseBlock(id="toolu_lead_0003", name="read_file", input={"path": "a"}),
    )
    assert response.stop_reason == "tool_use"


@pytest.mark.parametrize("stream", [True, False])
def test_prompt_too_long_raises_for_compaction(
    fake_api: FakeApiFactory, clock: FakeClock, stream: bool
) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="prompt_too_long", tokens=250000)])
    with pytest.raises(PromptTooLong, match="250000 tokens > 200000 maximum") as info:
        make_model(server, clock, stream=stream).complete(request())
    assert info.value.kind == "prompt_too_long" and len(server.requests) == 1


def test_a_script_error_is_a_non_retried_invalid_request(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    server = fake_api({"agents": {"other": {"steps": ["x"]}}})
    with pytest.raises(ModelError) as info:
        make_model(server, clock).complete(request())
    assert info.value.kind == "invalid_request" and "no script for agent 'lead'" in str(info.value)
    assert len(server.requests) == 1


def test_request_body_is_plain_json(fake_api: FakeApiFactory, clock: FakeClock) -> None:
    server = fake_api(SCRIPT)
    make_model(server, clock).complete(request())
    json.dumps(server.requests[0].body)  # what was sent is what the API accepts: plain JSON
    assert server.requests[0].body["messages"][0]["content"][0]["cache_control"] == {
        "type": "ephemeral"
    }
