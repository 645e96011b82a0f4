"""The team runtime end to end in-process: a lead and idle claimers draining a task DAG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.errors import DuplicateMember, TeamError
from actors.runtime.runtime import RuntimeBusy
from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel, latest_input
from harness.ports import ModelRequest, ModelResponse
from mailboxes.events import Event
from tests.actors.runtime.runtime_support import Events, runtime, stop_actors, team_repo

__all__ = ["stop_actors"]

DAG_SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "steps": [
                {
                    "match": "Build the thing",
                    "text": "Planning the work.",
                    "tool_uses": [
                        {"name": "create_task", "input": {"subject": "one"}},
                        {"name": "create_task", "input": {"subject": "two"}},
                        {"name": "create_task", "input": {"subject": "three"}},
                        {
                            "name": "create_task",
                            "input": {"subject": "four", "blocked_by": ["task_1"]},
                        },
                        {
                            "name": "create_task",
                            "input": {"subject": "five", "blocked_by": ["task_2", "task_3"]},
                        },
                        {
                            "name": "create_task",
                            "input": {"subject": "six", "blocked_by": ["task_4", "task_5"]},
                        },
                        {"name": "spawn_teammate", "input": {"name": "w1"}},
                        {"name": "spawn_teammate", "input": {"name": "w2"}},
                        {"name": "spawn_teammate", "input": {"name": "w3"}},
                    ],
                },
                "Team started.",
            ],
            "rules": [
                {"match": "team status|idle_notification|error", "text": "Noted.", "priority": -1}
            ],
        },
        "*": {
            "rules": [
                {
                    "match": r"You now hold task (?P<id>task_\d+) \(claim",
                    "tool_uses": [
                        {
                            "name": "complete_task",
                            "input": {"task_id": "{id}", "summary": "did {id}"},
                        }
                    ],
                },
                {"match": r"completed (?P<id>task_\d+)", "text": "Finished {id}."},
            ]
        },
    }
}


class HeardModel(ScriptedModel):
    """The scripted model, keeping what each agent was given to read at each call."""

    def __init__(self, script: dict[str, Any]) -> None:
        super().__init__(script)
        self.inputs: dict[str, list[str]] = {}

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.inputs.setdefault(request.agent, []).append(latest_input(request))
        return super().complete(request)


def events_of(root: Path, type_: str) -> list[Event]:
    from mailboxes.journal.store import FileJournal

    journal = FileJournal(root / ".team")
    try:
        return [e for e in journal.read_from(1) if e.type == type_]
    finally:
        journal.close()


def test_lead_spawns_three_teammates_that_drain_a_dag(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = HeardModel(DAG_SCRIPT)
    events = Events()
    rt = runtime(root, model, on_event=events)
    stop_actors.append(rt)
    rt.start()
    rt.submit("Build the thing")
    assert rt.wait_idle(timeout=60)
    state = rt.board.refresh()
    assert [t.status for t in state.tasks.values()] == ["completed"] * 6
    assert {t.owner for t in state.tasks.values()} <= {"w1", "w2", "w3"}
    assert {t.summary for t in state.tasks.values()} == {f"did task_{n}" for n in range(1, 7)}
    # dependencies were respected: each task claimed only after its blockers completed
    order = [
        (e.type, e.data["task_id"])
        for e in rt.team.journal.read_from(1)
        if e.type in ("task.claimed", "task.completed")
    ]
    for tid, deps in {"task_4": ["task_1"], "task_5": ["task_2", "task_3"]}.items():
        claimed_at = order.index(("task.claimed", tid))
        assert all(order.index(("task.completed", d)) < claimed_at for d in deps)
    # the lead heard from every teammate, with the task ids: each completion reached the lead's
    # input as a status line naming the task, the teammate that completed it and its summary
    rt.stop()
    heard = "\n".join(model.inputs["lead"])
    for task in state.tasks.values():
        assert f"- {task.id} {task.owner}: completed — did {task.id}" in heard, heard
    idle = [e for e in events.of("turn_end") if e["agent"] == "lead"]
    assert len(idle) >= 2
    assert model.unconsumed() == {}
    assert events_of(root, "member.stopped") == [], "stopping the runtime retires nobody"
    paused = {
        e.data["name"]
        for e in events_of(root, "member.status_changed")
        if e.data["status"] == "paused"
    }
    assert paused == {"lead", "w1", "w2", "w3"}


def test_duplicate_teammate_names_are_refused(tmp_path: Path, stop_actors: list[Any]) -> None:
    root = team_repo(tmp_path)
    model = ScriptedModel({"agents": {"*": {"rules": []}}})
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    with pytest.raises(DuplicateMember):
        rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    with pytest.raises(DuplicateMember):
        rt.services.spawn_teammate(TeammateSpec(name="lead"), by="lead")
    assert [m.name for m in rt.services.members()] == ["lead", "w1"]
    assert rt.wait_idle(timeout=30)


def test_spawn_with_a_task_claims_it_first_and_a_failed_claim_means_no_teammate(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = ScriptedModel(DAG_SCRIPT)
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    blocked = rt.board.create("second", blocked_by=["task_1"])
    with pytest.raises(TeamError):
        rt.services.spawn_teammate(TeammateSpec(name="w9", task_id=blocked.id), by="lead")
    assert "w9" not in rt.board.refresh().members
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    assert rt.wait_until(lambda: rt.board.refresh().tasks["task_2"].status == "completed", 30)
    assert rt.board.state.tasks["task_1"].owner == "w1"


def test_a_second_runtime_on_the_same_repository_is_refused(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = ScriptedModel({"agents": {"*": {"rules": []}}})
    first = runtime(root, model)
    stop_actors.append(first)
    first.start()
    second = runtime(root, model)
    with pytest.raises(RuntimeBusy, match="teamctl join"):
        second.start()
    assert first.services.members()[0].hosted_here


def test_a_message_to_a_stopped_teammate_is_an_error(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = ScriptedModel({"agents": {"*": {"rules": []}}})
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.force_stop("w1")
    assert rt.board.refresh().members["w1"].status == "stopped"
    with pytest.raises(TeamError, match="stopped"):
        rt.services.send("lead", "w1", "message", {"text": "hello?"})
    assert not rt.team.liveness.is_alive("w1")
