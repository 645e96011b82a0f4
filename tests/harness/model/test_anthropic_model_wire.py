"""AnthropicModel requests on the wire: caching breakpoints, headers, environment, passthrough,
plus the pure pieces (wire conversion, retry-after parsing, pricing)."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from harness.errors import ModelError
from harness.model.anthropic_client import AnthropicModel
from harness.model.pricing import cost_usd, price_of
from harness.model.recovery import is_spend_limit, parse_retry_after
from harness.model.wire import (
    count_cache_breakpoints,
    request_from_api,
    request_to_api,
    response_from_api,
)
from harness.ports import (
    Message,
    ModelRequest,
    RedactedThinkingBlock,
    SystemBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from tests.harness.conftest import FakeApiFactory
from tests.support.fakes import FakeClock

TOOLS = tuple(
    ToolSpec(name=name, description=f"{name} tool", input_schema={"type": "object"})
    for name in ("zeta", "alpha", "mid")
)
CONVERSATION = (
    Message(role="user", content=(TextBlock(text="start"),)),
    Message(
        role="assistant",
        content=(
            ThinkingBlock(thinking="let me think", signature="sig"),
            RedactedThinkingBlock(data="opaque"),
            ToolUseBlock(id="t1", name="alpha", input={"x": 1}),
        ),
    ),
    Message(role="user", content=(ToolResultBlock(tool_use_id="t1", content="fine"),)),
)


def big_request(**changes: Any) -> ModelRequest:
    system = tuple(SystemBlock(text=f"part {i}", cache=True) for i in range(6))
    base = ModelRequest(
        model="claude-sonnet-4-6",
        agent="mate-3",
        system=system,
        messages=CONVERSATION,
        tools=TOOLS,
        max_tokens=500,
    )
    return base.model_copy(update=changes)


def test_breakpoints_tools_order_header_and_passthrough(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    server = fake_api({"agents": {"mate-3": {"steps": [{"thinking": "hm", "text": "ok"}]}}})
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url)
    model = AnthropicModel("unused", client=client, clock=clock)
    response = model.complete(big_request(temperature=0.5))
    assert response.content == (
        ThinkingBlock(thinking="hm", signature="fake-signature"),
        TextBlock(text="ok"),
    )
    sent = server.requests[0]
    assert sent.headers["x-teamctl-agent"] == "mate-3"
    body = sent.body
    # the newest message, the last system block, the previous request's end, the last tool
    assert count_cache_breakpoints(body) == 4
    assert ["cache_control" in b for b in body["system"]] == [False] * 5 + [True]
    assert ["cache_control" in t for t in body["tools"]] == [False, False, True]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [t["name"] for t in body["tools"]] == ["zeta", "alpha", "mid"]
    assert body["temperature"] == 0.5 and body["model"] == "claude-sonnet-4-6"
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "let me think",
        "signature": "sig",
    }
    assert body["messages"][1]["content"][1] == {"type": "redacted_thinking", "data": "opaque"}


@pytest.mark.parametrize("marked", [0, 1, 3, 4, 9])
def test_never_more_than_four_breakpoints(marked: int) -> None:
    system = tuple(SystemBlock(text=str(i), cache=i < marked) for i in range(10))
    for messages in ((), CONVERSATION):
        kwargs = request_to_api(
            big_request(system=system, messages=messages), model="m", max_tokens=1
        )
        # one on the last tool, and the newest and previous message when there are messages
        assert count_cache_breakpoints(kwargs) == min(4, marked + (2 if messages else 0) + 1)


def test_environment_supplies_key_and_base_url(
    fake_api: FakeApiFactory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_api({"agents": {"agent": {"steps": ["from env"]}}})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    model = AnthropicModel("claude-haiku-4-5", clock=clock, stream=False)
    request = ModelRequest(model="", messages=CONVERSATION[:1])
    response = model.complete(request)
    assert response.content == (TextBlock(text="from env"),)
    headers = server.requests[0].headers
    assert "env-key" in headers.get("x-api-key", headers.get("authorization", ""))
    assert server.requests[0].body["model"] == "claude-haiku-4-5"


def test_on_call_reports_cost_and_unknown_models_cost_none(
    fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    server = fake_api({"agents": {"agent": {"steps": [{"text": "a", "usage": usage}] * 2}}})
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url)
    seen: list[Any] = []
    model = AnthropicModel("x", client=client, clock=clock, on_call=seen.append)
    model.complete(ModelRequest(model="claude-haiku-4-5", messages=CONVERSATION[:1]))
    model.complete(ModelRequest(model="some-local-model", messages=CONVERSATION[:1]))
    assert [r.cost_usd for r in seen] == [pytest.approx(6.0), None]
    assert model.calls == seen


def test_wire_round_trip_server_side() -> None:
    kwargs = request_to_api(big_request(), model="m", max_tokens=7)
    parsed = request_from_api(kwargs, agent="mate-3")
    assert parsed.messages == CONVERSATION and parsed.tools == TOOLS
    assert [b.cache for b in parsed.system] == [False] * 5 + [True]
    tool_result_list = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [{"type": "text", "text": "a"}],
    }
    plain = request_from_api(
        {
            "model": "m",
            "max_tokens": 1,
            "system": "sys",
            "messages": [{"role": "user", "content": [tool_result_list]}],
        },
        agent="a",
    )
    assert plain.system == (SystemBlock(text="sys"),)
    assert plain.messages[0].content == (ToolResultBlock(tool_use_id="t", content="a"),)


def test_response_from_api_skips_unknown_blocks_and_maps_stop_reasons() -> None:
    data = {
        "id": "msg_1",
        "model": "m",
        "content": [{"type": "server_tool_use", "id": "s"}, {"type": "text", "text": "hi"}],
        "stop_reason": "model_context_window_exceeded",
        "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": None},
    }
    response = response_from_api(data)
    assert response.content == (TextBlock(text="hi"),)
    assert response.stop_reason == "max_tokens"
    assert response.usage == Usage(input_tokens=3, output_tokens=4)
    assert response_from_api({**data, "stop_reason": "something_new"}).stop_reason is None


def test_retry_after_parsing() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after({"retry-after": "12"}, now) == 12.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}, now) == 1.5
    assert parse_retry_after({"retry-after": "Tue, 14 Nov 2023 22:13:40 GMT"}, now) == 20.0
    assert parse_retry_after({"retry-after": "soon"}, now) is None
    assert parse_retry_after({}, now) is None


def test_spend_limit_detection() -> None:
    assert is_spend_limit("enforced_spend_limit_reached", "")
    assert is_spend_limit(None, "You have reached your specified API usage limits.")
    assert is_spend_limit(None, "Your credit balance is too low")
    assert not is_spend_limit(
        None, "Number of request tokens has exceeded your per-minute rate limit"
    )


def test_pricing_table() -> None:
    assert price_of("claude-opus-4-1-20250805") == price_of("claude-opus-4-1")
    assert price_of("claude-opus-4-20250514") is not None
    assert price_of("claude-opus-4-20250514") != price_of("claude-opus-4-5")
    assert price_of("claude-opus-4-99") is None and price_of("gpt-5") is None
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_creation_input_tokens=1_000_000,
        cache_read_input_tokens=1_000_000,
    )
    assert cost_usd("claude-sonnet-4-6", usage) == pytest.approx(3 + 15 + 3.75 + 0.3)
    assert cost_usd("mystery", usage) is None


def test_a_missing_key_is_one_clear_authentication_error(
    fake_api: FakeApiFactory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_api({"agents": {"agent": {"steps": ["never"]}}})
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent-home")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    model = AnthropicModel("claude-haiku-4-5", clock=clock)
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY") as info:
        model.complete(ModelRequest(model="", messages=CONVERSATION[:1]))
    assert info.value.kind == "authentication" and server.requests == []
