"""The scripted model: steps, rules, templates, strictness, loading, latency, threads."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ScriptError
from harness.model.scripted import Script, ScriptedModel, latest_input
from harness.ports import (
    Message,
    ModelClient,
    ModelRequest,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from tests.support.fakes import FakeClock


def ask(model: ScriptedModel, text: str, agent: str = "lead") -> Any:
    request = ModelRequest(
        model="m",
        agent=agent,
        messages=(Message(role="user", content=(TextBlock(text=text),)),),
    )
    return model.complete(request)


def test_steps_play_in_order_with_defaults() -> None:
    model = ScriptedModel(
        {
            "agents": {
                "lead": {
                    "steps": [
                        {"text": "looking", "tool_uses": [{"name": "bash", "input": {"c": "ls"}}]},
                        "done",
                    ]
                }
            }
        }
    )
    assert isinstance(model, ModelClient)
    first = ask(model, "go")
    assert first.stop_reason == "tool_use"
    assert first.content == (
        TextBlock(text="looking"),
        ToolUseBlock(id="toolu_lead_0001", name="bash", input={"c": "ls"}),
    )
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    second = ask(model, "result")
    assert second.content == (TextBlock(text="done"),)
    assert second.stop_reason == "end_turn"
    assert first.id != second.id
    model.assert_consumed()
    assert model.calls("lead") == 2


def test_thinking_stop_reason_and_usage_come_from_the_step() -> None:
    step = {
        "thinking": "hmm",
        "text": "x",
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 5, "output_tokens": 6},
    }
    model = ScriptedModel({"agents": {"a": {"steps": [step]}}})
    response = ask(model, "q", agent="a")
    assert isinstance(response.content[0], ThinkingBlock)
    assert response.stop_reason == "max_tokens"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 6)


def test_rule_captures_fill_text_and_nested_tool_inputs() -> None:
    rule = {
        "match": r"task #(?P<id>\d+) for (\w+)",
        "text": "claiming {id} as {2} ({0})",
        "tool_uses": [
            {"name": "claim", "input": {"task": "{id}", "meta": {"who": ["{2}", 3]}, "raw": "{x}"}}
        ],
    }
    model = ScriptedModel({"agents": {"w": {"rules": [rule]}}})
    response = ask(model, "note: task #42 for bob now", agent="w")
    assert response.content[0] == TextBlock(text="claiming 42 as bob (task #42 for bob)")
    call = response.content[1]
    assert isinstance(call, ToolUseBlock)
    assert call.input == {"task": "42", "meta": {"who": ["bob", 3]}, "raw": "{x}"}


def test_once_rules_repeatable_rules_and_priority() -> None:
    rules = [
        {"match": "ping", "text": "pong"},
        {"match": "ping", "text": "first pong", "once": True, "priority": 5},
    ]
    model = ScriptedModel({"agents": {"a": {"rules": rules}}})
    texts = [ask(model, "ping", agent="a").content[0].text for _ in range(3)]
    assert texts == ["first pong", "pong", "pong"]


def test_rules_preempt_steps_and_negative_priority_rules_are_fallbacks() -> None:
    spec = {
        "steps": ["step one", "step two"],
        "rules": [
            {"match": "STOP", "text": "stopping"},
            {"match": ".", "text": "idle", "priority": -1},
        ],
    }
    model = ScriptedModel({"agents": {"a": {**spec}}})
    seen = [ask(model, text, agent="a").content[0].text for text in ("x", "STOP", "y", "z", "w")]
    assert seen == ["step one", "stopping", "step two", "idle", "idle"]
    model.assert_consumed()


def test_latest_input_is_the_last_user_message_with_tool_results() -> None:
    request = ModelRequest(
        model="m",
        messages=(
            Message(role="user", content=(TextBlock(text="old"),)),
            Message(role="assistant", content=(ToolUseBlock(id="t1", name="bash"),)),
            Message(
                role="user",
                content=(
                    ToolResultBlock(tool_use_id="t1", content="exit 0: ok"),
                    TextBlock(text="hi"),
                ),
            ),
        ),
    )
    assert latest_input(request) == "exit 0: ok\nhi"
    model = ScriptedModel(
        {"agents": {"agent": {"rules": [{"match": "exit (\\d)", "text": "{1}"}]}}}
    )
    assert model.complete(request).content == (TextBlock(text="0"),)


def test_step_match_is_checked_and_fills_templates() -> None:
    model = ScriptedModel(
        {"agents": {"a": {"steps": [{"match": "file (\\S+)", "text": "open {1}"}]}}}
    )
    assert ask(model, "file a.py", agent="a").content == (TextBlock(text="open a.py"),)
    strict = ScriptedModel({"agents": {"a": {"steps": [{"match": "^approved", "text": "ok"}]}}})
    with pytest.raises(ScriptError, match=r"step 1 expects.*rejected: too big"):
        ask(strict, "rejected: too big", agent="a")


def test_unexpected_call_fails_loudly_with_what_was_seen() -> None:
    model = ScriptedModel({"agents": {"a": {"steps": ["only"], "rules": [{"match": "zzz"}]}}})
    ask(model, "one", agent="a")
    with pytest.raises(ScriptError) as info:
        ask(model, "the second input", agent="a")
    message = str(info.value)
    assert "'a'" in message and "the second input" in message and "zzz" in message


def test_unknown_agent_fails_and_star_gives_each_agent_its_own_copy() -> None:
    with pytest.raises(ScriptError, match="no script for agent 'ghost'"):
        ask(ScriptedModel({"agents": {"a": {"steps": ["x"]}}}), "hi", agent="ghost")
    model = ScriptedModel({"agents": {"*": {"steps": ["one", "two"]}}})
    assert ask(model, "q", agent="sub1").content[0].text == "one"
    assert ask(model, "q", agent="sub2").content[0].text == "one"
    assert ask(model, "q", agent="sub1").content[0].text == "two"
    with pytest.raises(ScriptError, match="sub2"):
        model.assert_consumed()


def test_unconsumed_steps_are_reported() -> None:
    model = ScriptedModel({"agents": {"a": {"steps": ["one", "two"]}, "b": {"steps": ["x"]}}})
    ask(model, "q", agent="a")
    left = model.unconsumed()
    assert list(left) == ["a", "b"]
    assert left["a"][0].startswith("step 2:") and "two" in left["a"][0]
    with pytest.raises(ScriptError, match="unconsumed steps"):
        model.assert_consumed()


def test_yaml_and_json_scripts_load_and_bad_scripts_are_rejected(tmp_path: Path) -> None:
    yaml_file = tmp_path / "s.yaml"
    yaml_file.write_text(
        "latency_ms: 0\n"
        "agents:\n"
        "  lead:\n"
        "    steps:\n"
        "      - text: hi\n"
        "        tool_uses:\n"
        "          - {name: bash, input: {command: ls}}\n"
        "    rules:\n"
        "      - {match: 'task (\\d+)', text: 'got {1}', once: true}\n"
    )
    model = ScriptedModel(yaml_file)
    assert ask(model, "task 7").content == (TextBlock(text="got 7"),)
    assert ask(model, "x").content[1] == ToolUseBlock(
        id="toolu_lead_0001", name="bash", input={"command": "ls"}
    )
    json_file = tmp_path / "s.json"
    json_file.write_text(json.dumps({"agents": {"a": {"steps": ["j"]}}}))
    assert ask(ScriptedModel(json_file), "q", agent="a").content == (TextBlock(text="j"),)
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  a:\n    stepz: []\n")
    with pytest.raises(ScriptError, match="stepz"):
        Script.load(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("agents: [unclosed\n")
    with pytest.raises(ScriptError, match="cannot parse"):
        Script.load(broken)


def test_latency_goes_through_the_clock(clock: FakeClock) -> None:
    model = ScriptedModel(
        {"latency_ms": 300, "agents": {"a": {"steps": [{"text": "x", "latency_ms": 200}, "y"]}}},
        clock=clock,
    )
    ask(model, "q", agent="a")
    ask(model, "q", agent="a")
    assert clock.sleeps == [0.5, 0.3]


def test_concurrent_agents_get_their_own_deterministic_sequences() -> None:
    steps = [{"tool_uses": [{"name": "t", "input": {"n": i}}]} for i in range(40)]
    agents = [f"mate{i}" for i in range(8)]
    model = ScriptedModel({"agents": {a: {"steps": steps} for a in agents}})

    def run(agent: str) -> list[str]:
        ids = []
        for i in range(40):
            block = ask(model, "go", agent=agent).content[0]
            assert isinstance(block, ToolUseBlock) and block.input == {"n": i}
            ids.append(block.id)
        return ids

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(zip(agents, pool.map(run, agents), strict=True))
    for agent, ids in results.items():
        assert ids == [f"toolu_{agent}_{i:04d}" for i in range(1, 41)]
    model.assert_consumed()
