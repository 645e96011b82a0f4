"""Teammates: briefs, idle notifications, the TeammateIdle hook, plan mode, tools that raise
SystemExit, and shutdown requests (answered, or ignored and then forced)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actors.services import TeammateSpec
from harness.hooks import HookResult, HookRunner
from harness.model.scripted import ScriptedModel
from tests.actors.runtime.runtime_support import (
    Gate,
    SystemExitTool,
    runtime,
    stop_actors,
    stuck_tool,
    team_repo,
    tools_with,
)

__all__ = ["stop_actors"]

LEAD_RULES = [{"match": "(?s).", "text": "Noted."}, {"match": "^$", "text": "Noted."}]


def _mail(root: Path, agent: str, sub: str = "cur") -> list[dict[str, Any]]:
    folder = root / ".team" / "mailboxes" / agent / sub
    return [json.loads(p.read_text()) for p in sorted(folder.iterdir())]


def test_brief_names_task_dependencies_not_the_root_and_idle_notification_carries_the_result(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "rules": [
                    {
                        # The whole brief: no working directory (it is the root), no status
                        # for a completed dependency, no "when done" line (docs/ARCHITECTURE.md,
                        # "Context and the prompt cache").
                        "match": r"\AYou now hold task (?P<id>task_\d+) \(claim 1\): second\n"
                        r"Description: build on it\nDependencies:\n- task_1: base laid\Z",
                        "tool_uses": [
                            {"name": "complete_task", "input": {"task_id": "{id}", "summary": "x"}}
                        ],
                    },
                    {"match": "completed task_2", "text": "All done with the second one."},
                ]
            },
        }
    }
    rt = runtime(root, ScriptedModel(script))
    stop_actors.append(rt)
    rt.start()
    first = rt.board.create("first")
    rt.board.create("second", "build on it", blocked_by=[first.id])
    claim = rt.board.claim(first.id, "someone", human=True)
    rt.board.complete(first.id, "someone", claim.epoch, "base laid")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.wait_idle(timeout=30)
    assert rt.board.state.tasks["task_2"].status == "completed"
    notes = [m for m in _mail(root, "lead") if m["type"] == "idle_notification"]
    assert notes[-1]["from"] == "w1"
    assert notes[-1]["body"]["text"] == "All done with the second one."
    assert notes[-1]["body"]["task_id"] == "task_2"
    assert notes[-1]["body"]["task_status"] == "completed"


def test_a_tool_raising_system_exit_does_not_stop_any_actor(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "rules": [
                    {
                        "match": r"You now hold task (?P<id>task_\d+) \(claim",
                        "tool_uses": [{"name": "exit_now", "input": {}}],
                    },
                    {
                        "match": "SystemExit|exit",
                        "tool_uses": [
                            {
                                "name": "complete_task",
                                "input": {"task_id": "task_1", "summary": "survived"},
                            }
                        ],
                    },
                    {"match": "completed task_1", "text": "Done."},
                ]
            },
        }
    }
    rt = runtime(root, ScriptedModel(script), tools=tools_with(SystemExitTool))
    stop_actors.append(rt)
    rt.start()
    rt.board.create("risky")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.wait_idle(timeout=30)
    assert rt.board.state.tasks["task_1"].summary == "survived"
    assert {m.name: m.status for m in rt.services.members()} == {"lead": "idle", "w1": "idle"}
    rt.submit("still there?")
    assert rt.wait_idle(timeout=30)
    assert rt.board.refresh().members["lead"].status == "idle"


def test_teammate_idle_hook_exit_2_keeps_it_working_once(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    seen: list[dict[str, Any]] = []

    def keep_going(event: Any, payload: Any) -> HookResult | None:
        seen.append(dict(payload))
        if len(seen) == 1:
            return HookResult(blocked=True, reason="Run the tests before stopping.")
        return None

    hooks = HookRunner()
    hooks.register("TeammateIdle", keep_going)
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "steps": [
                    {"match": "You now hold task task_1", "text": "I think I am done."},
                    {
                        "match": "Run the tests before stopping",
                        "tool_uses": [
                            {"name": "complete_task", "input": {"task_id": "task_1"}},
                        ],
                    },
                    {"match": "completed task_1", "text": "Tests pass."},
                ]
            },
        }
    }
    model = ScriptedModel(script)
    rt = runtime(root, model, hook_runner=hooks)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("work")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.wait_idle(timeout=30)
    model.assert_consumed()
    assert [p["agent_name"] for p in seen] == ["w1", "w1"]
    assert seen[0]["task_id"] == "task_1"
    notes = [m for m in _mail(root, "lead") if m["type"] == "idle_notification"]
    assert [n["body"]["text"] for n in notes] == ["Tests pass."]


def test_without_an_assignment_or_an_approved_plan_a_teammate_cannot_write(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "steps": [
                    {
                        "match": "please write",
                        "tool_uses": [
                            {"name": "write_file", "input": {"path": "a.txt", "content": "x"}}
                        ],
                    },
                    {"match": "plan mode", "text": "Not allowed without a task."},
                ]
            },
        }
    }
    model = ScriptedModel(script)
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    rt.services.send("lead", "w1", "message", {"text": "please write a.txt"})
    assert rt.wait_idle(timeout=30)
    model.assert_consumed()
    assert not (root / "a.txt").exists()


def test_a_shutdown_request_is_answered_and_the_teammate_stops(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    rt = runtime(root, ScriptedModel({"agents": {"lead": {"rules": LEAD_RULES}}}))
    stop_actors.append(rt)
    rt.start()
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    request_id = rt.services.request_shutdown("w1", by="lead")
    assert rt.wait_until(lambda: rt.board.refresh().members["w1"].status == "stopped", 30)
    assert rt.wait_idle(timeout=30)
    types = [e.type for e in rt.team.journal.read_from(1)]
    assert "shutdown.acknowledged" in types
    answers = [m for m in _mail(root, "lead") if m["type"] == "shutdown_response"]
    assert answers[0]["body"]["request_id"] == request_id
    assert not rt.team.liveness.is_alive("w1")


def test_a_teammate_that_ignores_a_shutdown_request_is_stopped_after_the_timeout(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    gate = Gate()
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "rules": [
                    {"match": "You now hold task", "tool_uses": [{"name": "stuck", "input": {}}]},
                    {"match": "(?s).", "text": "ok", "priority": -1},
                ]
            },
        }
    }
    rt = runtime(
        root, ScriptedModel(script), tools=tools_with(stuck_tool(gate)), shutdown_timeout_s=0.3
    )
    stop_actors.append(rt)
    try:
        rt.start()
        rt.board.create("endless")
        rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
        assert gate.entered.wait(30)
        rt.services.request_shutdown("w1", by="lead")
        assert rt.wait_until(lambda: rt.board.refresh().members["w1"].status == "stopped", 30)
        task = rt.board.state.tasks["task_1"]
        assert task.status == "pending" and task.owner is None
        stopped = [e for e in rt.team.journal.read_from(1) if e.type == "member.stopped"]
        assert stopped[-1].data["reason"] == "shutdown_timeout"
        assert not rt.team.liveness.is_alive("w1")
    finally:
        gate.release.set()
