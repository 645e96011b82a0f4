"""The model's memory tools (remember / recall / forget) over the shared store, their permissions,
and the memory guidance in the prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.agent import Agent, AgentConfig
from harness.context.memory import Memory
from harness.context.prompt import is_reminder
from harness.model.scripted import ScriptedModel
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import TextBlock, ToolResultBlock
from harness.tools.base import ToolPolicy
from tests.support.fakes import AllowAll


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def run_calls(
    root: Path, calls: list[dict[str, Any]], policy: ToolPolicy | None = None, **kw: Any
) -> tuple[Agent, list[ToolResultBlock]]:
    """One turn in which the model makes ``calls`` one step each, then stops."""
    steps: list[dict[str, Any]] = [{"tool_uses": [c]} for c in calls] + [{"text": "done"}]
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=root,
        model=ScriptedModel({"agents": {"lead": {"steps": steps}}}),
        policy=policy or AllowAll(),
        **kw,
    )
    agent.run_turn("go")
    results = [b for m in agent.messages for b in m.content if isinstance(b, ToolResultBlock)]
    return agent, results


def test_remember_recall_forget_round_trip(tmp_path: Path) -> None:
    calls = [
        {
            "name": "remember",
            "input": {"topic": "build", "text": "Run `make test`.", "description": "How to build"},
        },
        {"name": "remember", "input": {"topic": "build", "text": "Lint with ruff."}},
        {"name": "recall", "input": {}},
        {"name": "recall", "input": {"topic": "build"}},
        {"name": "recall", "input": {"query": "RUFF"}},
        {"name": "forget", "input": {"topic": "build"}},
        {"name": "recall", "input": {}},
    ]
    _, results = run_calls(tmp_path, calls, policy=HarnessPolicy(Permissions()))
    assert not any(r.is_error for r in results), [r.content for r in results]
    listed, read, found, forgot, empty = (r.content for r in results[2:])
    assert listed == "topics:\n- build: How to build"
    assert read == "Run `make test`.\nLint with ruff.\n"
    assert found == "build:2: Lint with ruff."
    assert forgot == "forgot memory topic build" and empty == "memory is empty"
    assert not (tmp_path / ".team" / "memory" / "build.md").exists()


def test_notes_persist_for_the_next_session_and_show_in_its_prompt(tmp_path: Path) -> None:
    run_calls(
        tmp_path,
        [{"name": "remember", "input": {"topic": "db", "text": "Port 5433.", "description": "DB"}}],
    )
    assert Memory(tmp_path).read("db") == "Port 5433.\n"
    later, results = run_calls(tmp_path, [{"name": "recall", "input": {"topic": "db"}}])
    assert results[0].content == "Port 5433.\n"
    # the memory index: in the reminder of the session's first prompt, not the system prompt
    assert "db.md" not in later.system.blocks()[0].text
    first = later.messages[0].content[-1]
    assert isinstance(first, TextBlock) and is_reminder(first.text) and "- db.md: DB" in first.text


def test_a_memory_written_mid_turn_reaches_the_model_with_the_next_turn(tmp_path: Path) -> None:
    remember = {"topic": "db", "text": "Port 5433.", "description": "DB"}
    steps: list[Any] = [{"tool_uses": [{"name": "remember", "input": remember}]}, "done", "ok"]
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=tmp_path,
        model=ScriptedModel({"agents": {"lead": {"steps": steps}}}),
        policy=AllowAll(),
    )
    agent.run_turn("go")
    first, results = agent.messages[0], agent.messages[2]
    assert first.content == (TextBlock(text="go"),)  # memory empty: no reminder at first
    # mid-turn the index waits (the agent's own tool result says what it wrote) ...
    assert all(isinstance(b, ToolResultBlock) for b in results.content)
    agent.run_turn("next")
    opening = agent.messages[-2]
    assert opening.content[0] == TextBlock(text="next")
    note = opening.content[-1]  # ... and opens the next turn
    assert isinstance(note, TextBlock) and is_reminder(note.text)
    assert "# Memory\n" in note.text and note.text.endswith("- db.md: DB\n</system-reminder>")


def test_a_topic_cannot_name_another_file(tmp_path: Path) -> None:
    calls = [
        {"name": "remember", "input": {"topic": "../../evil", "text": "x"}},
        {"name": "forget", "input": {"topic": "../MEMORY"}},
        {"name": "recall", "input": {"topic": "/etc/passwd"}},
    ]
    _, results = run_calls(tmp_path, calls)
    assert all(r.is_error and "bad memory topic" in r.content for r in results)
    assert not (tmp_path / "evil.md").exists() and not (tmp_path / ".team" / "evil.md").exists()


def test_writes_need_no_approval_but_deny_rules_apply(tmp_path: Path) -> None:
    # No approver: anything that asks is refused, so success means "allowed without asking".
    policy = HarnessPolicy(Permissions(deny=["forget", "remember(secret*)"]))
    calls = [
        {"name": "remember", "input": {"topic": "ok", "text": "fine"}},
        {"name": "remember", "input": {"topic": "secrets", "text": "nope"}},
        {"name": "forget", "input": {"topic": "ok"}},
    ]
    _, results = run_calls(tmp_path, calls, policy=policy)
    assert not results[0].is_error
    assert results[1].is_error and "remember(secret*)" in results[1].content
    assert results[2].is_error and "forget" in results[2].content
    assert Memory(tmp_path).read("ok") == "fine\n" and Memory(tmp_path).read("secrets") == ""


def test_plan_mode_allows_recall_and_refuses_writes(tmp_path: Path) -> None:
    Memory(tmp_path).write("plan", "the plan\n", "Plan")
    steps: list[dict[str, Any]] = [
        {"tool_uses": [{"name": "recall", "input": {"topic": "plan"}}]},
        {"tool_uses": [{"name": "remember", "input": {"topic": "plan", "text": "changed"}}]},
        {"tool_uses": [{"name": "forget", "input": {"topic": "plan"}}]},
        {"text": "done"},
    ]
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=tmp_path,
        model=ScriptedModel({"agents": {"lead": {"steps": steps}}}),
        policy=HarnessPolicy(Permissions()),
    )
    agent.set_read_only(True)
    agent.run_turn("go")
    recall, remember, forget = (
        b for m in agent.messages for b in m.content if isinstance(b, ToolResultBlock)
    )
    assert (recall.is_error, recall.content) == (False, "the plan\n")
    assert remember.is_error and "plan mode" in remember.content
    assert forget.is_error and "plan mode" in forget.content
    assert Memory(tmp_path).read("plan") == "the plan\n"


def test_the_prompt_says_how_memory_works_only_with_the_tools(tmp_path: Path) -> None:
    with_tools, _ = run_calls(tmp_path, [])
    static = with_tools.system.blocks()[0]
    assert static.cache and "# How memory works" in static.text
    assert (
        str(tmp_path / ".team" / "memory") in static.text and "remember(topic, text)" in static.text
    )
    assert {"remember", "recall", "forget"} <= set(with_tools.registry.names())
    without, _ = run_calls(tmp_path, [], tool_names={"read_file"})
    assert "How memory works" not in without.system.blocks()[0].text
