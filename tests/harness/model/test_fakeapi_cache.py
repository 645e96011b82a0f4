"""The fake Messages API's prompt-cache simulation and usage records (the instrument of
``benchmarks/bench_tokens.py``): reads, writes, the lookback, the minimum, the TTL, the limit of
four breakpoints, namespaces, and the usage the SDK sees equal to the usage recorded."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from harness.model.fakeapi import (
    CACHE_LOOKBACK_BLOCKS,
    FakeMessagesServer,
    PromptCache,
    api_blocks,
    common_prefix_len,
    count_tokens,
    request_bytes,
)
from harness.model.scripted import Fault
from tests.harness.conftest import FakeApiFactory
from tests.harness.model.test_fakeapi import post

EPHEMERAL = {"type": "ephemeral"}
SYSTEM_TEXT = "You are a careful coding agent. " * 200  # ~6.4k bytes: well above the minimum
SCRIPT: dict[str, Any] = {"agents": {"*": {"rules": [{"match": "(?s).*", "text": "ok"}]}}}


def system(marked: bool = True, text: str = SYSTEM_TEXT) -> list[dict[str, Any]]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marked:
        block["cache_control"] = dict(EPHEMERAL)
    return [block]


def turns(n: int) -> list[dict[str, Any]]:
    """``n`` messages alternating user/assistant, each one text block (none marked)."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"message number {i} " * 5}],
        }
        for i in range(n)
    ]


def mark_last(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    copy: list[dict[str, Any]] = json.loads(json.dumps(messages))
    copy[-1]["content"][-1]["cache_control"] = dict(EPHEMERAL)
    return copy


def req(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "system": system(), "messages": messages, **extra}


def tokens_of(body: dict[str, Any], blocks: int | None = None) -> int:
    """Tokens of the first ``blocks`` blocks of ``body`` (all by default)."""
    return count_tokens(sum(len(data) for data, _ in api_blocks(body)[:blocks]))


def test_a_growing_conversation_reads_what_the_previous_request_wrote() -> None:
    cache = PromptCache()
    first = req(mark_last(turns(1)))
    usage = cache.usage("k", first)
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_input_tokens == tokens_of(first)  # up to the last breakpoint
    assert usage.input_tokens == 0
    second = req(mark_last(turns(3)))  # the breakpoint moved forward
    usage = cache.usage("k", second)
    assert usage.cache_read_input_tokens == tokens_of(first)
    assert usage.cache_creation_input_tokens == tokens_of(second) - tokens_of(first)
    assert usage.input_tokens == 0


def test_tokens_after_the_last_breakpoint_are_uncached_input() -> None:
    cache = PromptCache()
    body = req(turns(3))  # only the system block is marked
    usage = cache.usage("k", body)
    assert usage.cache_creation_input_tokens == tokens_of(body, 1)
    assert usage.input_tokens == tokens_of(body) - tokens_of(body, 1)
    again = cache.usage("k", body)
    assert again.cache_read_input_tokens == tokens_of(body, 1)
    assert again.cache_creation_input_tokens == 0


def test_a_changed_byte_in_the_system_prompt_misses_everything_after_it() -> None:
    cache = PromptCache()
    cache.usage("k", req(mark_last(turns(3))))
    changed = req(mark_last(turns(3)))
    changed["system"] = system(text=SYSTEM_TEXT + "Time: 10:01")
    usage = cache.usage("k", changed)
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_input_tokens == tokens_of(changed)


def test_cache_control_markers_are_not_part_of_the_prefix() -> None:
    cache = PromptCache()
    cache.usage("k", req(mark_last(turns(2))))
    moved = req(mark_last(turns(2)))
    moved["system"] = system(marked=False)  # same bytes, marker gone
    assert cache.usage("k", moved).cache_read_input_tokens == tokens_of(moved)
    assert request_bytes(moved) == request_bytes(req(mark_last(turns(2))))


def test_the_lookback_reaches_twenty_blocks_and_no_further() -> None:
    cache = PromptCache()
    base = turns(2)
    cache.usage("k", req(mark_last(base)))  # writes the prefix ending after block 2 of messages
    near = req(mark_last(base + turns(CACHE_LOOKBACK_BLOCKS + 2)[2 : CACHE_LOOKBACK_BLOCKS + 1]))
    hit = PromptCache(_entries=dict(cache._entries)).usage("k", near)
    assert hit.cache_read_input_tokens == tokens_of(req(base))  # 19 blocks on: found
    far = req(mark_last(base + turns(CACHE_LOOKBACK_BLOCKS + 3)[2:]))  # 21 blocks on
    miss = PromptCache(_entries=dict(cache._entries)).usage("k", far)
    assert miss.cache_read_input_tokens == tokens_of(far, 1)  # only the system breakpoint's own


def test_prefixes_below_the_minimum_are_never_cached() -> None:
    cache = PromptCache(min_tokens=100_000)
    body = req(mark_last(turns(3)))
    for _ in range(2):
        usage = cache.usage("k", body)
        assert usage.cache_read_input_tokens == usage.cache_creation_input_tokens == 0
        assert usage.input_tokens == tokens_of(body)


def test_entries_expire_after_the_ttl_unless_read() -> None:
    now = [0.0]
    cache = PromptCache(ttl_s=300.0, clock=lambda: now[0])
    body = req(mark_last(turns(1)))
    cache.usage("k", body)
    now[0] = 299.0
    assert cache.usage("k", body).cache_read_input_tokens == tokens_of(body)  # refreshed
    now[0] = 598.0
    assert cache.usage("k", body).cache_read_input_tokens == tokens_of(body)
    now[0] = 899.0
    assert cache.usage("k", body).cache_read_input_tokens == 0


def test_namespaces_and_models_do_not_share_entries() -> None:
    cache = PromptCache()
    body = req(mark_last(turns(1)))
    cache.usage("key-a", body)
    assert cache.usage("key-b", body).cache_read_input_tokens == 0
    assert cache.usage("key-a", {**body, "model": "other"}).cache_read_input_tokens == 0
    assert cache.usage("key-a", body).cache_read_input_tokens == tokens_of(body)


def test_top_level_cache_control_marks_the_last_block() -> None:
    body = req(turns(3), cache_control=dict(EPHEMERAL))
    assert [marked for _, marked in api_blocks(body)] == [True, False, False, True]
    usage = PromptCache().usage("k", body)
    assert usage.cache_creation_input_tokens == tokens_of(body) and usage.input_tokens == 0


def test_common_prefix_len() -> None:
    assert common_prefix_len(b"abcdef", b"abcxyz") == 3
    assert common_prefix_len(b"abc", b"abcdef") == 3
    assert common_prefix_len(b"", b"abc") == 0
    assert common_prefix_len(b"same", b"same") == 4


def test_more_than_four_breakpoints_is_a_400(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT)
    messages = turns(5)
    for message in messages:
        message["content"][0]["cache_control"] = dict(EPHEMERAL)
    status, _, raw = post(server, req(messages))  # 1 in system + 5 in messages
    assert status == 400
    assert json.loads(raw)["error"]["message"] == (
        "A maximum of 4 blocks with cache_control may be provided. Found 6."
    )
    assert server.requests == [] and server.served == []


def test_the_sdk_sees_the_usage_the_server_recorded() -> None:
    with FakeMessagesServer(SCRIPT, prompt_cache=True) as server:
        client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
        seen = []
        for n in (1, 3, 5):
            kwargs = req(mark_last(turns(n)))
            with client.messages.stream(
                **kwargs, extra_headers={"x-teamctl-agent": "lead"}
            ) as stream:
                seen.append(stream.get_final_message().usage)
        reply = client.messages.create(
            **req(mark_last(turns(7))), extra_headers={"x-teamctl-agent": "w1"}
        )
        seen.append(reply.usage)
        served = server.served
    assert [c.agent for c in served] == ["lead", "lead", "lead", "w1"]
    for usage, call in zip(seen, served, strict=True):
        assert usage.input_tokens == call.usage.input_tokens
        assert usage.output_tokens == call.usage.output_tokens > 0
        assert usage.cache_read_input_tokens == call.usage.cache_read_input_tokens
        assert usage.cache_creation_input_tokens == call.usage.cache_creation_input_tokens
    assert served[1].usage.cache_read_input_tokens == tokens_of(req(turns(1)))
    # the same key: w1 reads the prefix the lead wrote (five of its seven messages)
    assert served[3].usage.cache_read_input_tokens == tokens_of(req(turns(5)))
    total = server.reported_usage()
    assert total.cache_read_input_tokens == sum(c.usage.cache_read_input_tokens for c in served)
    assert server.reported_usage("w1") == served[3].usage


def test_off_by_default_the_usage_is_the_scripts_estimate(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT)
    assert server.cache is None
    for _ in range(2):
        _, _, raw = post(server, req(mark_last(turns(1))))
        usage = json.loads(raw)["usage"]
        assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0
        assert usage["input_tokens"] > 0
    assert len(server.served) == 2


def test_faults_are_not_served_and_touch_no_cache(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="overloaded")], prompt_cache=True)
    assert post(server, req(mark_last(turns(1))))[0] == 529
    assert server.served == []
    assert post(server, req(mark_last(turns(1))))[0] == 200
    (call,) = server.served
    assert call.usage.cache_read_input_tokens == 0  # the failed request wrote nothing
    assert call.usage.cache_creation_input_tokens == tokens_of(req(turns(1)))


@pytest.mark.parametrize("cache", [False, True])
def test_count_tokens(cache: bool) -> None:
    body = req(mark_last(turns(1)))
    with FakeMessagesServer(SCRIPT, prompt_cache=cache) as server:
        client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
        counted = client.messages.count_tokens(
            model="m", system=body["system"], messages=body["messages"]
        ).input_tokens
    if cache:
        assert counted == tokens_of(body)
    else:
        assert counted > 0
