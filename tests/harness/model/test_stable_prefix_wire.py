"""A stable prompt prefix on the wire: an agent's requests, sent through the anthropic SDK to the
fake Messages API, each start with the bytes of the one before (tools → system → messages,
``cache_control`` markers left out), while the volatile context (team state, memory index) reaches
the model as reminders at the tail; at most four cache breakpoints, moving forward."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
from pydantic import BaseModel, ConfigDict

from harness.agent import Agent, AgentConfig
from harness.context.compaction import SUMMARY_SYSTEM
from harness.context.prompt import REMINDER_OPEN
from harness.model.anthropic_client import AnthropicModel
from harness.model.wire import count_cache_breakpoints
from harness.tools.base import Tool, ToolContext, ToolOutput
from tests.harness.conftest import FakeApiFactory
from tests.support.fakes import AllowAll, FakeClock


class HireIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


class Hire(Tool[HireIn]):
    """A team tool that changes the team state mid-turn."""

    name = "hire"
    description = "Add a teammate."
    input_model = HireIn

    def __init__(self, team: list[str]) -> None:
        self.team = team

    def run(self, args: HireIn, ctx: ToolContext) -> ToolOutput:
        self.team.append(f"- {args.name}: idle")
        return ToolOutput(f"hired {args.name}")


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def api_bytes(body: dict[str, Any]) -> bytes:
    """The request in API order, one canonical JSON line per tool, system block and message
    content block (tagged with its message's index and role), without ``cache_control``."""
    units: list[Any] = [["tool", t] for t in body.get("tools", [])]
    units += [["system", b] for b in body.get("system", [])]
    for i, message in enumerate(body["messages"]):
        units += [[f"message {i} {message['role']}", b] for b in message["content"]]
    return b"".join(
        json.dumps(_strip(u), sort_keys=True, separators=(",", ":")).encode() + b"\n" for u in units
    )


def reminders(body: dict[str, Any]) -> list[str]:
    """The reminder texts in the request's newest message."""
    return [
        b["text"]
        for b in body["messages"][-1]["content"]
        if b["type"] == "text" and b["text"].startswith(REMINDER_OPEN)
    ]


def breakpoints(body: dict[str, Any]) -> list[tuple[int, int]]:
    """(message index, block index) of every breakpoint in the messages."""
    return [
        (i, j)
        for i, m in enumerate(body["messages"])
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]


SCRIPT = {
    "agents": {
        "lead": {
            "steps": [
                {
                    "match": "^plan the parser$",
                    "tool_uses": [
                        {
                            "name": "remember",
                            "input": {"topic": "db", "text": "Port 5433.", "description": "DB"},
                        }
                    ],
                },
                {"match": "saved", "tool_uses": [{"name": "hire", "input": {"name": "w1"}}]},
                {"match": "^hired w1$", "text": "Hired w1."},
                {"match": "^status\\?$", "text": "w1 is on task_1."},
                {"match": "^anything else\\?$", "text": "No."},
                {"match": "^compact now$", "tool_uses": [{"name": "compact", "input": {}}]},
                {"match": "Summarise the conversation", "text": "We hired w1 for task_1."},
                {"match": "compacted before your next step", "text": "Compacted."},
                {"match": "^thanks$", "text": "You are welcome."},
                {"match": "^resumed\\?$", "text": "Yes."},
            ]
        }
    }
}


def test_each_request_starts_with_the_previous_one_and_state_comes_as_reminders(
    fake_api: FakeApiFactory, clock: FakeClock, tmp_path: Path
) -> None:
    server = fake_api(SCRIPT)
    team = ["Members:", "- (no teammates yet)", "Tasks (1):", "- task_1 [pending] parser"]

    def make(resume: bool) -> Agent:
        client = anthropic.Anthropic(api_key="k", base_url=server.base_url)
        return Agent(
            AgentConfig(name="lead", model="claude-sonnet-4-6"),
            root=tmp_path,
            model=AnthropicModel("unused", client=client, clock=clock),
            policy=AllowAll(),
            transcript_dir=tmp_path / ".team" / "transcripts",
            extra_tools=[Hire(team)],
            state_provider=lambda: "\n".join(team),
            resume=resume,
        )

    agent = make(resume=False)
    answers = [agent.run_turn("plan the parser")]  # calls 1-3: remember, hire, answer
    team[1:] = ["- w1: working, on task_1", "Tasks (1):", "- task_1 [in_progress, owner w1]"]
    answers.append(agent.run_turn("status?"))  # call 4: the team changed between turns
    answers.append(agent.run_turn("anything else?"))  # call 5: nothing changed
    answers.append(agent.run_turn("compact now"))  # calls 6, the summary, 7
    answers.append(agent.run_turn("thanks"))  # call 8
    agent.close()
    resumed = make(resume=True)
    answers.append(resumed.run_turn("resumed?"))  # call 9, a new session over the transcript
    resumed.close()
    assert [a.text for a in answers] == [
        "Hired w1.",
        "w1 is on task_1.",
        "No.",
        "Compacted.",
        "You are welcome.",
        "Yes.",
    ]

    sent = [r.body for r in server.requests]
    summary = [b for b in sent if b["system"][0]["text"] == SUMMARY_SYSTEM]
    calls = [b for b in sent if b not in summary]
    assert len(summary) == 1 and len(calls) == 9
    assert all(count_cache_breakpoints(b) <= 4 for b in sent)

    # The prefix: every request starts with the bytes of the one before, except after the
    # compaction rewrote the history (call 7).
    for n in range(1, len(calls)):
        prev, cur = api_bytes(calls[n - 1]), api_bytes(calls[n])
        assert cur.startswith(prev) == (n != 6), f"call {n + 1}"
    # Tools: the agent's own first, then the team's, in a fixed order; one system block.
    names = [t["name"] for t in calls[0]["tools"]]
    assert names[-1] == "hire" and names[:-1] == sorted(names[:-1])
    assert all(b["tools"] == calls[0]["tools"] for b in calls)
    assert all(b["system"] == calls[0]["system"] for b in calls)
    system = calls[0]["system"][0]
    assert system["cache_control"] == {"type": "ephemeral"} and "Members" not in system["text"]

    # The volatile context, at the tail, only when it changed.
    first, second, third, fourth, fifth = (reminders(b) for b in calls[:5])
    assert len(first) == 1 and "- (no teammates yet)" in first[0] and "Memory" not in first[0]
    # Mid-turn (after tool results) the team state and the memory index wait for the next turn.
    assert second == [] and third == []
    assert [b["type"] for b in calls[1]["messages"][-1]["content"]] == ["tool_result"]
    assert len(fourth) == 1 and "- w1: working, on task_1" in fourth[0]
    assert "- db.md: DB" in fourth[0]
    assert fifth == []  # nothing changed since the last reminder: none
    # After the compaction the conversation carries the whole volatile context again.
    (after,) = reminders(calls[6])
    assert "- w1: working, on task_1" in after and "- db.md: DB" in after
    assert "We hired w1" in calls[6]["messages"][0]["content"][0]["text"]
    # The resumed session re-states it at the tail (the prefix before it is unchanged).
    (again,) = reminders(calls[8])
    assert "- w1: working, on task_1" in again and "- db.md: DB" in again

    # Breakpoints: the end of the system prompt, the newest message's last block, and where the
    # previous request put its last one (when the history was not rewritten).
    for n, body in enumerate(calls):
        marks = breakpoints(body)
        last = len(body["messages"]) - 1
        assert (last, len(body["messages"][last]["content"]) - 1) in marks
        if n and n != 6:
            prev = calls[n - 1]["messages"]
            assert (len(prev) - 1, len(prev[-1]["content"]) - 1) in marks, f"call {n + 1}"
