"""The system prompt's shared block: agents of one kind (a team's teammates) send byte-identical
tools and a byte-identical first system block, with the prompt-cache breakpoint at its end; what
is an agent's own (its name, its instructions, its SessionStart context) comes after it. So the
second agent's first request reads the tools and the shared block from the cache the first one
wrote (the API shares cache entries per key and model, not per agent), and pays for writing only
its own block and its conversation (docs/ARCHITECTURE.md, "Context and the prompt cache")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic

from harness.agent import Agent, AgentConfig
from harness.context.prompt import SystemPrompt
from harness.hooks import HookResult, HookRunner
from harness.model.anthropic_client import AnthropicModel
from harness.model.fakeapi import ServedCall, api_blocks, count_tokens
from tests.harness.conftest import FakeApiFactory
from tests.support.fakes import AllowAll, FakeClock

SCRIPT: dict[str, Any] = {"agents": {"*": {"rules": [{"match": "(?s).*", "text": "ok"}]}}}


def tokens_through_system(body: dict[str, Any], blocks: int) -> int:
    """Tokens of the request's tools and its first ``blocks`` system blocks (API order)."""
    n = len(body.get("tools") or []) + blocks
    return count_tokens(sum(len(data) for data, _ in api_blocks(body)[:n]))


def first_call(served: list[ServedCall], agent: str) -> ServedCall:
    return next(c for c in served if c.agent == agent)


def make_agent(
    server_url: str, clock: FakeClock, root: Path, name: str, brief: str, **extra: Any
) -> Agent:
    client = anthropic.Anthropic(api_key="k", base_url=server_url)
    return Agent(
        AgentConfig(name=name, model="claude-sonnet-4-6", brief=brief),
        root=root,
        model=AnthropicModel("unused", client=client, clock=clock),
        policy=AllowAll(),
        transcript_dir=root / ".team" / "transcripts",
        **extra,
    )


def test_a_second_agent_of_one_kind_reads_the_tools_and_the_shared_block_from_the_cache(
    fake_api: FakeApiFactory, clock: FakeClock, tmp_path: Path
) -> None:
    server = fake_api(SCRIPT, prompt_cache=True)
    runner = HookRunner()
    # A SessionStart hook whose context differs per agent (a timestamp, a session id): the
    # agent's own, so it must not break the shared block.
    runner.register(
        "SessionStart",
        lambda event, payload: HookResult(additional_context=f"started by {payload['agent_name']}"),
    )
    w1 = make_agent(server.base_url, clock, tmp_path, "w1", "Take the parser tasks.")
    w2 = make_agent(
        server.base_url, clock, tmp_path, "w2", "Take the docs tasks.", hook_runner=runner
    )
    assert w1.run_turn("first task").text == "ok"
    assert w2.run_turn("second task").text == "ok"
    w1.close()
    w2.close()

    one, two = first_call(server.served, "w1"), first_call(server.served, "w2")
    assert one.body["tools"] == two.body["tools"]
    (shared1, own1), (shared2, own2) = one.body["system"], two.body["system"]
    assert shared1 == shared2 and shared1["cache_control"] == {"type": "ephemeral"}
    assert "w1" not in shared1["text"] and "parser" not in shared1["text"]
    assert "Your name is w1." in own1["text"] and "Take the parser tasks." in own1["text"]
    assert "Your name is w2." in own2["text"] and "Take the docs tasks." in own2["text"]
    assert "started by w2" in own2["text"]
    # w1 wrote its whole first request; w2 read the tools and the shared block from it.
    assert one.usage.cache_read_input_tokens == 0
    assert two.usage.cache_read_input_tokens >= tokens_through_system(two.body, 1)
    assert two.usage.cache_creation_input_tokens < count_tokens(len(own2["text"]) + 400)


def test_an_agents_own_sections_go_after_the_breakpoint_and_without_them_one_block() -> None:
    prompt = SystemPrompt(identity="You are a teammate.", tool_guidance="Use tools.")
    prompt.add_static("Workspace", "Repository root: /r")
    assert [(b.text, b.cache) for b in prompt.blocks()] == [
        ("You are a teammate.\n\nUse tools.\n\n# Workspace\nRepository root: /r", True)
    ]
    prompt.add_own("Agent", lambda: "Your name is w1.")
    prompt.add_own("Your instructions", lambda: "")  # empty: left out
    prompt.add_own("Session start", lambda: "hello")
    shared, own = prompt.blocks()
    assert shared.cache and not own.cache
    assert shared.text.endswith("Repository root: /r")
    assert own.text == "# Agent\nYour name is w1.\n\n# Session start\nhello"
    assert prompt.blocks() == (shared, own)  # rendered once


def test_the_default_identity_names_no_agent(tmp_path: Path, clock: FakeClock) -> None:
    # Any name in the first block would make it differ between agents of one kind.
    agent = make_agent("http://127.0.0.1:9", clock, tmp_path, "zed-42", "")
    try:
        shared, own = agent.system.blocks()
        assert "zed-42" not in shared.text
        assert own.text == "# Agent\nYour name is zed-42."
    finally:
        agent.close()
