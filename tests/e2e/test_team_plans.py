"""Plan approval through the runtime with the real team tools: a plan-required task is worked
read-only, its plan rejected with feedback, resubmitted, approved, then implemented."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.runtime.members import default_tools
from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from tests.actors.runtime.runtime_support import Events, runtime, stop_actors, team_repo

__all__ = ["stop_actors"]

RID = r'request_id: "(?P<rid>[A-Za-z0-9_-]+)"'
SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "rules": [
                {
                    "match": r"(?s)\[plan_approval_request from w1\].*v1 plan.*" + RID,
                    "tool_uses": [
                        {
                            "name": "review_plan",
                            "input": {
                                "request_id": "{rid}",
                                "approve": False,
                                "feedback": "add tests",
                            },
                        }
                    ],
                },
                {
                    "match": r"(?s)\[plan_approval_request from w1\].*v2 plan.*" + RID,
                    "tool_uses": [
                        {"name": "review_plan", "input": {"request_id": "{rid}", "approve": True}}
                    ],
                },
                {"match": "(?s).", "text": "Noted.", "priority": -1},
            ]
        },
        "w1": {
            "rules": [
                {
                    "match": "You now hold task task_1",
                    "tool_uses": [
                        {"name": "write_file", "input": {"path": "early.txt", "content": "x"}},
                        {"name": "submit_plan", "input": {"plan": "v1 plan"}},
                    ],
                },
                # submit_plan and complete_task end the turn (no closing call); the next input
                # joins their results in one user message, so no rule matches those results.
                {
                    "match": "(?s)was rejected.*Feedback: add tests",
                    "tool_uses": [{"name": "submit_plan", "input": {"plan": "v2 plan with tests"}}],
                },
                {
                    "match": "was approved",
                    "tool_uses": [
                        {"name": "write_file", "input": {"path": "done.txt", "content": "ok"}},
                        {
                            "name": "complete_task",
                            "input": {"task_id": "task_1", "summary": "refactored with tests"},
                        },
                    ],
                },
                {"match": "(?s).", "text": "OK.", "priority": -1},
            ]
        },
    }
}


def test_plan_rejected_with_feedback_then_resubmitted_approved_and_implemented(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    events = Events()
    rt = runtime(
        root,
        ScriptedModel(SCRIPT),
        tools=default_tools,
        permission_mode="acceptEdits",
        on_event=events,
    )
    stop_actors.append(rt)
    rt.start()
    rt.board.create("refactor the parser", plan_required=True)
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.wait_idle(timeout=60)
    task = rt.board.refresh().tasks["task_1"]
    assert task.status == "completed" and task.summary == "refactored with tests"
    assert (root / "done.txt").read_text() == "ok"
    assert not (root / "early.txt").exists()  # plan mode: no writes before the approval
    reviews = [e.data for e in rt.team.journal.read_from(1) if e.type == "plan.reviewed"]
    assert [(r["approve"], r["feedback"]) for r in reviews] == [(False, "add tests"), (True, "")]
    first_write = next(e for e in events.of("tool_result") if e["agent"] == "w1")
    assert first_write["is_error"] and "plan mode" in first_write["content"]


def test_a_teammate_waits_in_waiting_plan_approval_until_a_human_reviews(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    from actors.protocols import review_plan
    from actors.settings import ApprovalSettings, Settings

    root = team_repo(tmp_path)
    rt = runtime(
        root,
        ScriptedModel(SCRIPT),
        tools=default_tools,
        permission_mode="acceptEdits",
        settings=Settings(approvals=ApprovalSettings(plans="human")),
    )
    stop_actors.append(rt)
    rt.start()
    rt.board.create("refactor the parser", plan_required=True)
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")

    def waiting() -> bool:
        return rt.board.refresh().members["w1"].status == "waiting_plan_approval"

    assert rt.wait_until(waiting, timeout=60)
    assert rt.wait_idle(timeout=60)  # nothing moves while the plan waits for its reviewer
    (request,) = rt.board.refresh().plan_requests.values()
    assert request.plan == "v1 plan" and request.status == "submitted"
    review_plan(rt.services, request.request_id, True, "", reviewer="alice")
    assert rt.wait_until(lambda: rt.board.refresh().tasks["task_1"].status == "completed", 60)
    assert (root / "done.txt").read_text() == "ok"
