"""The lead on the wire (anthropic SDK → fake Messages API): its team state changes between its
turns, yet each of its requests starts with the bytes of its previous one; the state reaches it
as reminders at the tail of the conversation (docs/ARCHITECTURE.md, "Context and the prompt
cache")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from actors.services import TeammateSpec
from actors.settings import Settings, TeamSettings
from harness.context.prompt import REMINDER_OPEN
from harness.model.anthropic_client import AnthropicModel
from harness.model.fakeapi import FakeMessagesServer
from harness.model.wire import count_cache_breakpoints
from harness.ports import ModelClient
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo
from tests.harness.model.test_stable_prefix_wire import api_bytes
from tests.support.fakes import FakeClock

__all__ = ["stop_actors"]


@pytest.fixture
def server() -> Iterator[FakeMessagesServer]:
    script = {
        "agents": {
            "lead": {"rules": [{"match": "(?s).", "text": "ok"}]},
            "w1": {"rules": [{"match": "You now hold task task_1", "text": "Looking into it."}]},
        }
    }
    started = FakeMessagesServer(script).start()
    yield started
    started.stop()


def team_states(body: dict[str, Any]) -> list[str]:
    return [
        b["text"]
        for m in body["messages"]
        for b in m["content"]
        if b["type"] == "text"
        and b["text"].startswith(REMINDER_OPEN)
        and "# Team state" in b["text"]
    ]


def test_the_leads_prefix_is_stable_while_its_team_changes(
    tmp_path: Path, server: FakeMessagesServer, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)

    def model(agent: str, name: str) -> ModelClient:
        client = anthropic.Anthropic(api_key="k", base_url=server.base_url)
        return AnthropicModel(name, client=client, clock=FakeClock())

    hold = Settings(team=TeamSettings(task_reminders=None))  # w1 keeps task_1 unfinished
    rt = runtime(root, model, settings=hold)  # type: ignore[arg-type]  # a per-agent factory
    stop_actors.append(rt)
    rt.start()
    rt.board.create("write the parser")
    rt.submit("hello")
    assert rt.wait_idle(timeout=30)
    rt.services.spawn_teammate(TeammateSpec(name="w1", role="parser"), by="lead")
    assert rt.wait_idle(timeout=30)
    rt.submit("and now?")
    assert rt.wait_idle(timeout=30)
    rt.submit("still there?")
    assert rt.wait_idle(timeout=30)

    lead = [r.body for r in server.requests if r.agent == "lead"]
    assert len(lead) >= 3
    for n in range(1, len(lead)):
        assert api_bytes(lead[n]).startswith(api_bytes(lead[n - 1])), f"lead call {n + 1}"
    assert all(count_cache_breakpoints(b) <= 4 for b in lead)
    assert all("Members:" not in b["system"][0]["text"] for b in lead)
    first, last = team_states(lead[0])[-1], team_states(lead[-1])[-1]
    assert "task_1 [pending, ready] write the parser" in first and "(no teammates yet)" in first
    assert "- w1: idle, on task_1, role parser" in last
    assert "task_1 [in_progress, owner w1] write the parser" in last
    # the unchanged state is not repeated: the last prompt carries no new reminder
    assert team_states(lead[-1]) == team_states(lead[-2])
