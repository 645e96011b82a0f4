"""Agent-level faults and mid-turn input: the real executor, the real SDK through the fake API."""

from __future__ import annotations

import random
from pathlib import Path

import anthropic

from harness.agent import Agent, AgentConfig
from harness.context.prompt import check_pairing
from harness.model.anthropic_client import AnthropicModel
from harness.ports import TextBlock, ToolResultBlock
from harness.transcript import load_transcript
from tests.harness.conftest import FakeApiFactory
from tests.harness.test_agent import make_agent
from tests.support.fakes import AllowAll, FakeClock


def test_unknown_tool_and_bad_input_come_back_as_tool_errors(tmp_path: Path) -> None:
    script = {
        "lead": {
            "steps": [
                {
                    "tool_uses": [
                        {"name": "fly_to_moon", "input": {}},
                        {"name": "read_file", "input": {"no_such_field": 1}},
                    ]
                },
                {"match": "(?s)Unknown tool.*Invalid input", "text": "I will use real tools."},
            ]
        }
    }
    agent, model = make_agent(tmp_path, script)
    result = agent.run_turn("go")
    assert result.text == "I will use real tools."
    model.assert_consumed()
    errors = agent.messages[2].content
    assert all(isinstance(b, ToolResultBlock) and b.is_error for b in errors)


def test_message_injected_mid_turn_reaches_the_model_after_tool_results(tmp_path: Path) -> None:
    holder: list[Agent] = []

    class Injecting(AllowAll):
        def before(self, call, request, ctx):  # type: ignore[no-untyped-def]
            holder[0].inject("bob: the build is green again")
            return super().before(call, request, ctx)

    script = {
        "lead": {
            "steps": [
                {"tool_uses": [{"name": "glob", "input": {"pattern": "*"}}]},
                {"match": "bob: the build is green", "text": "noted bob's message"},
            ]
        }
    }
    agent, model = make_agent(tmp_path, script, policy=Injecting())
    holder.append(agent)
    assert agent.run_turn("check the build").text == "noted bob's message"
    model.assert_consumed()
    user = agent.messages[2]
    assert isinstance(user.content[0], ToolResultBlock)
    assert user.content[1] == TextBlock(text="bob: the build is green again")


def test_prompt_too_long_through_the_real_sdk_compacts_once_then_retries(
    tmp_path: Path, fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    script = {
        "agents": {
            "lead": {
                "steps": [
                    {"tool_uses": [{"name": "glob", "input": {"pattern": "*"}}]},
                    {
                        "fault": {"kind": "prompt_too_long"},
                        "match": "<conversation>",
                        "text": "SUMMARY: listed files",
                    },
                    {"match": "No files match", "text": "done after compaction"},
                ]
            }
        }
    }
    server = fake_api(script)
    # The fault is served on the request after the tool results (the step's fault comes first).
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url)
    model = AnthropicModel("claude-sonnet-4-6", client=client, clock=clock, rng=random.Random(0))
    agent = Agent(
        AgentConfig(name="lead", model="claude-sonnet-4-6"),
        root=tmp_path,
        model=model,
        policy=AllowAll(),
        transcript_dir=tmp_path / "t",
    )
    result = agent.run_turn("list the files")
    assert (result.transition, result.text) == ("completed", "done after compaction"), (
        result.error,
        server.script_errors,
    )
    assert server.script_errors == []
    check_pairing(agent.messages)
    faults = [r.fault for r in server.requests]
    assert faults == [None, "prompt_too_long", None, None]  # call, fault, summary, retry
    retry = server.requests[-1].body["messages"]
    assert "SUMMARY: listed files" in retry[0]["content"][0]["text"]
    assert load_transcript(tmp_path / "t" / "lead.jsonl").boundaries == 1
    assert load_transcript(tmp_path / "t" / "lead.jsonl").messages == agent.messages


def test_interrupt_reaches_a_running_subagent(tmp_path: Path) -> None:
    from harness.model.scripted import ScriptedModel

    script = {
        "lead": {
            "steps": [
                {"tool_uses": [{"name": "task", "input": {"description": "d", "prompt": "dig"}}]},
            ]
        },
        "lead.task-1": {"steps": [{"tool_uses": [{"name": "glob", "input": {"pattern": "*"}}]}]},
    }
    inner = ScriptedModel({"agents": script})
    holder: list[Agent] = []

    class InterruptingModel:
        def complete(self, request):  # type: ignore[no-untyped-def]
            response = inner.complete(request)
            if request.agent == "lead.task-1":
                holder[0].interrupt()  # the human presses Esc while the subagent works
            return response

    agent = Agent(
        AgentConfig(name="lead", model="m"),
        root=tmp_path,
        model=InterruptingModel(),
        policy=AllowAll(),
    )
    holder.append(agent)
    result = agent.run_turn("go")
    assert result.transition == "interrupted"
    inner.assert_consumed()
    task_result = agent.messages[2].content[0]
    assert isinstance(task_result, ToolResultBlock)
    assert "interrupted" in task_result.content
    check_pairing(agent.messages)
