"""A stalled teammate is noticed (docs/RELIABILITY.md, "A stalled teammate"): a teammate that
ends its turns holding an unfinished task is reminded, then its task is released and the lead told
the truth; a turn repeating one tool call, or making no progress (a hung model call, seen by a
timer the test fires by hand), marks the member ``stalled`` and tells the lead."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from actors.services import TeammateSpec
from actors.settings import Settings, TeamSettings
from harness.model.scripted import ScriptedModel
from harness.ports import ModelRequest, ModelResponse
from harness.tools.base import ToolContext, ToolOutput
from tests.actors.cli.cli_support import git_repo, run
from tests.actors.runtime.runtime_support import (
    Events,
    _TeamTool,
    runtime,
    stop_actors,
    team_repo,
    tools_with,
)

__all__ = ["stop_actors"]

LEAD_RULES = [{"match": "(?s).", "text": "Noted."}, {"match": "^$", "text": "Noted."}]
COMPLETE = {"name": "complete_task", "input": {"task_id": "{id}", "summary": "done"}}


def _mail(root: Path, agent: str) -> list[dict[str, Any]]:
    """Every message of ``agent``, unread and read. The runtime runs meanwhile: a message listed
    in ``new/`` may be acked (moved to ``cur/``) before it is read, so it is looked for there."""
    box = root / ".team" / "mailboxes" / agent
    found = []
    for path in sorted([*(box / "new").iterdir(), *(box / "cur").iterdir()]):
        for place in dict.fromkeys((path, box / "cur" / path.name)):
            try:
                found.append(json.loads(place.read_text()))
                break
            except FileNotFoundError:
                continue
    return found


def _journal(root: Path, type_: str) -> list[dict[str, Any]]:
    lines = (root / ".team" / "journal.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    return [e["data"] for e in events if e["type"] == type_]


def test_a_teammate_ending_its_turns_holding_its_task_is_reminded_then_the_task_is_released(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "steps": [
                    {"match": r"You now hold task task_1 \(claim 1\): first", "text": "Later."},
                    {
                        "match": r"(?s)still hold task task_1 \(claim 1\): first\. "
                        r".*complete_task.*release_task.*Reminder 1 of 1",
                        "text": "Still later.",
                    },
                ]
            },
            "w2": {
                "rules": [
                    {
                        "match": r"You now hold task (?P<id>task_1) \(claim 2\)",
                        "tool_uses": [COMPLETE],
                    },
                    {"match": "completed task_1", "text": "Finished it."},
                ]
            },
        }
    }
    model = ScriptedModel(script)
    settings = Settings(team=TeamSettings(task_reminders=1))
    rt = runtime(root, model, settings=settings)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    rt.services.spawn_teammate(TeammateSpec(name="w2"), by="lead")  # w1 holds the only task
    assert rt.wait_until(lambda: rt.board.refresh().tasks["task_1"].status == "completed", 30)
    assert rt.wait_idle(timeout=30)
    model.assert_consumed()
    released = _journal(root, "task.released")
    assert [(r["task_id"], r["reason"]) for r in released] == [("task_1", "abandoned")]
    claims = [(c["task_id"], c["owner"]) for c in _journal(root, "task.claimed")]
    assert claims == [("task_1", "w1"), ("task_1", "w2")]
    notes = [m for m in _mail(root, "lead") if m["type"] == "idle_notification"]
    from_w1 = [n["body"] for n in notes if n["from"] == "w1"]
    assert len(from_w1) == 1, "the reminded turn sent no notification"
    assert from_w1[0]["released"] == "abandoned"
    assert from_w1[0]["task_id"] == "task_1" and from_w1[0]["task_status"] == "pending"
    assert "released" in from_w1[0]["note"]
    from_w2 = [n["body"] for n in notes if n["from"] == "w2"]
    assert from_w2[-1]["task_status"] == "completed"


def test_a_headless_run_whose_teammate_abandons_its_task_ends_with_the_unfinished_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    path = root / ".team" / "settings.json"
    settings = json.loads(path.read_text())
    settings["team"]["task_reminders"] = 1
    path.write_text(json.dumps(settings))
    script = tmp_path / "script.json"
    create = [{"name": "create_task", "input": {"subject": s}} for s in ("one", "two")]
    spawn = {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "Work."}}
    script.write_text(
        json.dumps(
            {
                "agents": {
                    "lead": {
                        "rules": [
                            {"match": "^start", "tool_uses": [*create, spawn]},
                            {"match": "(?s).", "text": "Noted.", "priority": -1},
                            {"match": "^$", "text": "Noted.", "priority": -2},
                        ]
                    },
                    # w1 never finishes task_1; once it is released it takes task_2 and does it
                    "w1": {
                        "rules": [
                            {
                                "match": r"You now hold task (?P<id>task_2)",
                                "tool_uses": [COMPLETE],
                            },
                            {"match": "(?i)completed task_2", "text": "Did two."},
                            {"match": "task_1", "text": "Not now."},
                        ]
                    },
                }
            }
        )
    )
    common = ["--headless", "--script", str(script), "--output-format", "stream-json"]
    result = run(["run", *common, "--timeout", "60", "start"])
    assert result.exit_code == 3, result.output
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["subtype"] == "error_unfinished_tasks", "it ended idle, not at the timeout"
    assert outcome["unfinished"] == ["task_1"]
    released = _journal(root, "task.released")
    assert [(r["task_id"], r["reason"]) for r in released] == [("task_1", "abandoned")]


class PeekIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    where: str


class Peek(_TeamTool):
    name: ClassVar[str] = "peek"
    description: ClassVar[str] = "Looks (always the same answer)."
    input_model: ClassVar[type[BaseModel]] = PeekIn

    def run(self, args: PeekIn, ctx: ToolContext) -> ToolOutput:
        return ToolOutput("nothing new")


def test_repeating_one_tool_call_marks_the_teammate_stalled_and_tells_the_lead(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    peek = {"name": "peek", "input": {"where": "here"}}
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "rules": [{"match": "You now hold task task_1|nothing new", "tool_uses": [peek]}]
            },
        }
    }
    model = ScriptedModel(script)
    events = Events()
    settings = Settings(team=TeamSettings(max_repeated_tool_calls=3))
    rt = runtime(root, model, settings=settings, tools=tools_with(Peek), on_event=events)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    assert rt.wait_until(lambda: rt.board.refresh().members["w1"].status == "stalled", 30)
    assert rt.wait_idle(timeout=30)
    assert len([e for e in events.of("tool_use") if e["name"] == "peek"]) == 3
    member = rt.board.refresh().members["w1"]
    assert member.status == "stalled" and "peek" in member.reason and "3 times" in member.reason
    assert any(e["status"] == "stalled" for e in events.of("status") if e["agent"] == "w1")
    errors = [m["body"] for m in _mail(root, "lead") if m["type"] == "error"]
    assert len(errors) == 1
    assert (errors[0]["member"], errors[0]["task_id"]) == ("w1", "task_1")
    assert "stalled" in errors[0]["text"] and "peek" in errors[0]["reason"]
    assert rt.board.state.tasks["task_1"].owner == "w1", "the lead decides what happens to it"
    rt.services.request_shutdown("w1", by="lead")  # the lead stops it: the task goes back
    assert rt.wait_until(lambda: rt.board.refresh().members["w1"].status == "stopped", 30)
    assert rt.board.state.tasks["task_1"].status == "pending"


class ManualTimer:
    """A timer the test fires by hand (no waiting)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[float, Callable[[], None]]] = []

    def __call__(self, delay_s: float, callback: Callable[[], None]) -> Callable[[], None]:
        entry = (delay_s, callback)
        with self._lock:
            self._pending.append(entry)

        def cancel() -> None:
            with self._lock:
                if entry in self._pending:
                    self._pending.remove(entry)

        return cancel

    def fire(self, delay_s: float) -> int:
        """Run every pending callback of ``delay_s``; how many ran."""
        with self._lock:
            due = [e for e in self._pending if e[0] == delay_s]
            self._pending = [e for e in self._pending if e[0] != delay_s]
        for _, callback in due:
            callback()
        return len(due)


class HangingModel:
    """A scripted model whose first call for ``agent`` blocks until ``release`` is set."""

    def __init__(self, inner: ScriptedModel, agent: str) -> None:
        self.inner, self.agent = inner, agent
        self.entered, self.release = threading.Event(), threading.Event()

    def complete(self, request: ModelRequest) -> ModelResponse:
        if request.agent == self.agent and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(30), "never released"
        return self.inner.complete(request)


def test_a_hung_model_call_marks_the_teammate_stalled_until_it_returns(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "rules": [
                    {"match": r"You now hold task (?P<id>task_1)", "tool_uses": [COMPLETE]},
                    {"match": "completed task_1", "text": "Done."},
                ]
            },
        }
    }
    model = HangingModel(ScriptedModel(script), "w1")
    timer = ManualTimer()
    # The lead looks at status notices at once: this timer only fires when the test says so.
    settings = Settings(team=TeamSettings(stall_timeout_s=42, notify_window_s=0))
    rt = runtime(root, model, settings=settings, idle_timer=timer)
    stop_actors.append(rt)
    try:
        rt.start()
        rt.board.create("first")
        rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
        assert model.entered.wait(30)
        assert rt.board.refresh().members["w1"].status == "working"
        assert timer.fire(42) == 1  # no step finished in 42 s
        member = rt.board.refresh().members["w1"]
        assert member.status == "stalled" and "no progress for 42 s" in member.reason
        assert rt.wait_until(lambda: any(m["type"] == "error" for m in _mail(root, "lead")), 30)
        error = next(m["body"] for m in _mail(root, "lead") if m["type"] == "error")
        assert (error["member"], error["task_id"], error["task_status"]) == (
            "w1",
            "task_1",
            "in_progress",
        )
        assert timer.fire(42) == 0, "not armed again until it progresses"
    finally:
        model.release.set()
    assert rt.wait_until(lambda: rt.board.refresh().tasks["task_1"].status == "completed", 30)
    assert rt.wait_idle(timeout=30)
    statuses = [s["status"] for s in _journal(root, "member.status_changed") if s["name"] == "w1"]
    assert statuses[-3:] == ["stalled", "working", "idle"]


class ApprovingModel:
    """A scripted model that, on w1's first call, submits and approves w1's plan on the board
    only: the review is journaled and its message not sent yet, as between ``review_plan``'s
    journal write and its send."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.board: Any = None
        self.review: Any = None

    def complete(self, request: ModelRequest) -> ModelResponse:
        if request.agent == "w1" and self.review is None:
            from actors.board import protocols as bp

            req = bp.submit_plan(self.board, "w1", "the plan")
            self.review = bp.review_plan(self.board, req.request_id, True, reviewer="lead")
        return self.inner.complete(request)


def test_a_turn_ending_before_the_plan_approval_reached_the_teammate_is_not_reminded(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    from actors.protocols import notify_review

    root = team_repo(tmp_path)
    script = {
        "agents": {
            "lead": {"rules": LEAD_RULES},
            "w1": {
                "rules": [
                    {"match": r"plan for (?P<id>task_1) was approved", "tool_uses": [COMPLETE]},
                    {"match": "completed task_1", "text": "Done."},
                    {"match": "(?s).", "text": "OK.", "priority": -1},
                ]
            },
        }
    }
    model = ApprovingModel(ScriptedModel(script))
    rt = runtime(root, model, settings=Settings(team=TeamSettings(task_reminders=1)))
    model.board = rt.board
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first", plan_required=True)
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    assert rt.wait_until(lambda: model.review is not None, 30)
    assert rt.wait_idle(timeout=30)  # w1 ended its turn, its plan approved but not yet told
    assert _journal(root, "task.released") == []
    notify_review(rt.services, model.review)  # the approval's message arrives only now
    assert rt.wait_until(lambda: rt.board.refresh().tasks["task_1"].status == "completed", 30)
    assert rt.wait_idle(timeout=30)
    assert _journal(root, "task.released") == []
