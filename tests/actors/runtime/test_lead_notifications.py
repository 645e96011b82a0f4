"""Fewer model calls: teammates end their turn with ``complete_task`` (no closing call), and the
lead is woken by status notices only when nobody is at work any more, all of them in one compact
input; questions reach it at once (docs/ARCHITECTURE.md, "Fewer model calls")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actors.board.state import Member, Task, TeamState
from actors.runtime.lead import format_status, is_status_notice, team_at_work
from actors.services import TeammateSpec
from actors.settings import PermissionSettings, Settings, TeamSettings
from harness.model.scripted import ScriptedModel, latest_input
from harness.ports import ModelRequest, ModelResponse
from mailboxes.messages import Envelope
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo

__all__ = ["stop_actors"]


def _notice(sender: str, **body: Any) -> Envelope:
    return Envelope.model_validate(
        {
            "id": f"m{sender}",
            "from": sender,
            "to": "lead",
            "type": "idle_notification",
            "ts": 1.0,
            "body": {"text": "", "transition": "completed", **body},
        }
    )


def test_only_a_completed_task_is_a_status_notice() -> None:
    assert is_status_notice(_notice("w1", task_id="task_1", task_status="completed"))
    assert not is_status_notice(_notice("w1", task_id=None, task_status=None))  # answered mail
    assert not is_status_notice(_notice("w1", task_id="task_1", task_status="in_progress"))
    released = _notice("w1", task_id="task_1", task_status="pending", released="abandoned")
    assert not is_status_notice(released)
    stopped = _notice("w1", task_id="task_1", task_status="completed", transition="max_turns")
    assert not is_status_notice(stopped)


def test_a_teammate_working_on_a_task_in_progress_is_at_work() -> None:
    def state(status: str, *, human: bool = False) -> TeamState:
        return TeamState(
            tasks={
                "task_1": Task("task_1", "a", status="completed", owner="w1"),
                "task_2": Task("task_2", "b", status="in_progress", owner="w2", human=human),
            },
            members={"w2": Member("w2", status=status)},
        )

    assert team_at_work(state("working"))
    assert team_at_work(state("starting"))
    assert not team_at_work(state("idle"))  # it ended its turn holding the task: it will not report
    assert not team_at_work(state("crashed"))
    assert not team_at_work(state("working", human=True))  # a person's task


def test_status_notices_read_as_one_line_per_task_with_the_open_tasks() -> None:
    state = TeamState(tasks={"task_3": Task("task_3", "c")})
    notices = [
        _notice("ada", task_id="task_1", task_status="completed", summary="wrote f1.txt"),
        _notice("ben", task_id="task_2", task_status="completed", text="Done,\n  all  good."),
    ]
    assert format_status(notices, state) == (
        "[team status] 2 updates; open tasks: task_3\n"
        "- task_1 ada: completed — wrote f1.txt\n"
        "- task_2 ben: completed — Done, all good."
    )


class Recording:
    """A scripted model that records every request."""

    def __init__(self, script: dict[str, Any]) -> None:
        self.inner = ScriptedModel(script)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return self.inner.complete(request)

    def inputs(self, agent: str) -> list[str]:
        return [latest_input(r) for r in self.requests if r.agent == agent]


FOUR_FILES: dict[str, Any] = {
    "agents": {
        "lead": {
            "rules": [
                {
                    "match": "^Write four files",
                    "text": "Splitting.",
                    "once": True,
                    "tool_uses": [
                        *[
                            {"name": "create_task", "input": {"subject": f"write f{i}.txt"}}
                            for i in range(1, 5)
                        ],
                        {"name": "spawn_teammate", "input": {"name": "ada", "prompt": "Work."}},
                        {"name": "spawn_teammate", "input": {"name": "ben", "prompt": "Work."}},
                    ],
                },
                {"match": "Spawned teammate ben", "text": "Team started."},
                {"match": r"\[team status\] ", "text": "All four files are written."},
            ]
        },
        # One call per task: it writes its file and completes the task in one batch; a closing
        # call would find no rule and fail the teammate.
        "*": {
            "rules": [
                {
                    "match": r"You now hold task (?P<id>task_\d+) \(claim \d+\): write (?P<f>\S+)",
                    "tool_uses": [
                        {"name": "write_file", "input": {"path": "{f}", "content": "hello\n"}},
                        {
                            "name": "complete_task",
                            "input": {"task_id": "{id}", "summary": "wrote {f}"},
                        },
                    ],
                }
            ]
        },
    }
}


def test_four_tasks_two_teammates_one_call_per_task_and_the_lead_woken_once_at_the_end(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = Recording(FOUR_FILES)
    settings = Settings(permissions=PermissionSettings(defaultMode="acceptEdits"))
    rt = runtime(root, model, settings=settings, tools=None)  # the real team tools
    stop_actors.append(rt)
    rt.start()
    rt.submit("Write four files f1..f4")
    assert rt.wait_idle(timeout=60)
    assert rt.failures() == {}
    state = rt.board.refresh()
    assert [t.status for t in state.tasks.values()] == ["completed"] * 4
    assert sorted(p.name for p in root.glob("f*.txt")) == ["f1.txt", "f2.txt", "f3.txt", "f4.txt"]
    mates = model.inner.calls("ada") + model.inner.calls("ben")
    assert mates == 4, "complete_task ends the teammate's turn: no closing model call"
    # Before: the lead answered every notification (6 calls, 14 in all). Now it is woken by
    # completions only when nobody is at work; the last one brings every result it missed.
    lead = model.inputs("lead")
    assert len(lead) <= 4
    woken = [text for text in lead if text.startswith("[team status]")]
    assert woken and "open tasks: none" in woken[-1]
    results = "\n".join(woken)
    for n in range(1, 5):
        assert f"completed — wrote f{n}.txt" in results
    assert "idle_notification" not in results


def test_a_question_wakes_the_lead_at_once_while_status_notices_wait(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    script = {
        "agents": {
            "lead": {
                "rules": [
                    {"match": r"\[message from w2\] Which file\?", "text": "Answered."},
                    {"match": r"\[team status\] ", "text": "All done."},
                ]
            },
            "w1": {
                "rules": [
                    {
                        "match": r"You now hold task (?P<id>task_1) ",
                        "tool_uses": [
                            {"name": "complete_task", "input": {"task_id": "{id}", "summary": "a"}}
                        ],
                    }
                ]
            },
            "w2": {
                "steps": [
                    {
                        "match": r"You now hold task task_2 ",
                        "tool_uses": [
                            {"name": "send_message", "input": {"to": "lead", "text": "Which file?"}}
                        ],
                    },
                    {
                        "match": "Message delivered",
                        "tool_uses": [
                            {
                                "name": "complete_task",
                                "input": {"task_id": "task_2", "summary": "b"},
                            }
                        ],
                    },
                ]
            },
        }
    }
    model = Recording(script)
    # The window is 0: the lead looks at a status notice as soon as it arrives.
    settings = Settings(team=TeamSettings(notify_window_s=0))
    rt = runtime(root, model, settings=settings, tools=None)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    rt.board.create("second")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    rt.services.spawn_teammate(TeammateSpec(name="w2", task_id="task_2"), by="lead")
    assert rt.wait_idle(timeout=60)
    assert rt.failures() == {}
    model.inner.assert_consumed()
    inputs = model.inputs("lead")
    assert any("[message from w2] Which file?" in text for text in inputs)
    assert "open tasks: none" in inputs[-1]
    # each completion reaches the lead exactly once, in whichever digest (the two teammates
    # race: either one may finish first)
    assert sum(text.count("completed — a") for text in inputs) == 1, inputs
    assert sum(text.count("completed — b") for text in inputs) == 1, inputs
    notes = [
        json.loads(p.read_text())
        for p in sorted((root / ".team" / "mailboxes" / "lead" / "cur").iterdir())
    ]
    summaries = {n["body"].get("summary") for n in notes if n["type"] == "idle_notification"}
    assert summaries == {"a", "b"}, "idle notifications carry the task's result"
