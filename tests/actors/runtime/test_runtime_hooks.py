"""Hook events the team runtime fires for its members: SessionStart/SessionEnd around a member's
session, TeammateIdle with the member's session fields, Notification (``idle_prompt``) when a
member goes idle waiting for input."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actors.services import TeammateSpec
from harness.hooks import HookResult, HookRunner
from harness.model.scripted import ScriptedModel
from harness.settings import HookEvent
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo

__all__ = ["stop_actors"]

LEAD_RULES = [{"match": "(?s).", "text": "Noted."}, {"match": "^$", "text": "Noted."}]


def test_member_sessions_fire_start_idle_notification_and_end(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    seen: list[tuple[str, dict[str, Any]]] = []
    lock = threading.Lock()

    def record(event: HookEvent, payload: Mapping[str, Any]) -> HookResult | None:
        with lock:
            seen.append((event, dict(payload)))
        return None

    hooks = HookRunner()
    for event in ("SessionStart", "TeammateIdle", "Notification", "SessionEnd"):
        hooks.register(event, record)
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "steps": [
                    {
                        "match": "You now hold task task_1",
                        "tool_uses": [{"name": "complete_task", "input": {"task_id": "task_1"}}],
                    },
                    {"match": "completed task_1", "text": "Looked at it."},
                ]
            },
        }
    }
    rt = runtime(root, ScriptedModel(script), hook_runner=hooks)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("look")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.wait_idle(timeout=30)
    rt.stop()

    def of(event: str, agent: str) -> list[dict[str, Any]]:
        with lock:
            return [p for e, p in seen if e == event and p.get("agent_name") == agent]

    [idle] = of("TeammateIdle", "w1")
    assert idle["teammate_name"] == "w1"
    assert idle["last_assistant_message"] == "Looked at it."
    assert idle["session_id"]  # the member's session, not empty
    transcript = Path(idle["transcript_path"])
    assert transcript == root / ".team" / "transcripts" / "w1.jsonl" and transcript.is_file()
    notes = of("Notification", "w1")
    assert notes and notes[0]["notification_type"] == "idle_prompt"
    assert notes[0]["message"] == "w1 is idle, waiting for input"
    [start] = of("SessionStart", "w1")
    [end] = of("SessionEnd", "w1")
    assert start["session_id"] == end["session_id"] == idle["session_id"]
    assert end["reason"] == "other"
    assert of("SessionEnd", "lead")
