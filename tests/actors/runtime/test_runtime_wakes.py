"""What wakes the lead and teammates: a cron job firing, a background job finishing, the idle
timeout; and the team state the lead sees in its prompt on every call."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from actors.services import TeammateSpec
from actors.settings import Settings, TeamSettings
from harness.context.prompt import is_reminder
from harness.model.scripted import ScriptedModel
from harness.ports import ModelRequest, ModelResponse, TextBlock
from tests.actors.jobs.cron_support import FakeTimers
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo
from tests.support.fakes import FakeClock

__all__ = ["stop_actors"]


class Recording:
    def __init__(self, script: dict[str, Any]) -> None:
        self.inner = ScriptedModel(script)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return self.inner.complete(request)


def team_reminder(request: ModelRequest) -> str:
    """The newest team state the request's conversation carries (in a reminder)."""
    texts = [
        b.text
        for m in request.messages
        for b in m.content
        if isinstance(b, TextBlock) and is_reminder(b.text) and "# Team state" in b.text
    ]
    return texts[-1]


def _cur(root: Path, agent: str) -> list[dict[str, Any]]:
    folder = root / ".team" / "mailboxes" / agent / "cur"
    return [json.loads(p.read_text()) for p in sorted(folder.iterdir())]


def test_a_cron_firing_wakes_the_lead_and_is_acked_by_its_model_call(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    clock = FakeClock(time.time())  # the journal stamps events with the real time
    script = {
        "agents": {
            "lead": {
                "steps": [
                    {
                        "match": r"\[cron_fired from scheduler\] Cron job cron_\w+ .* fired for .*: check the build"
                    }
                ]
            }
        }
    }
    script["agents"]["lead"]["steps"][0]["text"] = "Build checked."
    model = ScriptedModel(script)
    rt = runtime(root, model, scheduler=True, clock=clock, cron_timer=FakeTimers())
    stop_actors.append(rt)
    rt.start()
    view = rt.services.schedule_cron(
        "*/5 * * * *", "check the build", recurring=True, tz="UTC", owner="lead"
    )
    assert [c.cron_id for c in rt.services.list_crons()] == [view.cron_id]
    clock.advance(6 * 60)
    assert rt.background.scheduler.fire_due()
    assert rt.wait_until(lambda: model.calls("lead") == 1, timeout=30)
    assert rt.wait_idle(timeout=30)
    model.assert_consumed()
    assert [m["type"] for m in _cur(root, "lead")] == ["cron_fired"]
    rt.services.cancel_cron(view.cron_id, by="lead")
    assert rt.services.list_crons() == []


def test_a_background_job_finishing_wakes_the_lead(tmp_path: Path, stop_actors: list[Any]) -> None:
    root = team_repo(tmp_path)
    script = {
        "agents": {
            "lead": {
                "steps": [
                    {
                        "match": "run it in the background",
                        "tool_uses": [
                            {
                                "name": "bash",
                                "input": {
                                    "command": "echo background-done",
                                    "run_in_background": True,
                                },
                            }
                        ],
                    },
                    {"match": "Started background job", "text": "Waiting for it."},
                    {"match": r"(?s)task_notification.*background-done", "text": "It finished."},
                ]
            }
        }
    }
    model = ScriptedModel(script)
    rt = runtime(root, model, jobs=True)
    stop_actors.append(rt)
    rt.start()
    rt.submit("run it in the background")
    assert rt.wait_until(lambda: model.calls("lead") == 3, timeout=60)
    assert rt.wait_idle(timeout=30)
    model.assert_consumed()
    assert any(m["type"] == "task_notification" for m in _cur(root, "lead"))


def test_an_idle_teammate_stops_after_the_idle_timeout(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    armed: list[Any] = []

    def timer(delay: float, callback: Any) -> Any:
        armed.append((delay, callback))
        return lambda: None

    settings = Settings(team=TeamSettings(idle_timeout_s=120))
    rt = runtime(root, ScriptedModel({"agents": {}}), settings=settings, idle_timer=timer)
    stop_actors.append(rt)
    rt.start()
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.wait_until(lambda: bool(armed), timeout=30)
    delay, fire = armed[0]
    assert delay == 120
    fire()
    assert rt.wait_until(lambda: rt.board.refresh().members["w1"].status == "stopped", 30)
    stopped = [e for e in rt.team.journal.read_from(1) if e.type == "member.stopped"]
    assert stopped[-1].data == {"name": "w1", "reason": "idle_timeout"}


def test_the_lead_sees_the_team_state_in_its_prompt_on_every_call(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = Recording(
        {
            "agents": {
                "lead": {"rules": [{"match": "(?s).", "text": "ok"}]},
                "w1": {
                    "rules": [{"match": "You now hold task task_1", "text": "Looking into it."}]
                },
            }
        }
    )
    hold = Settings(team=TeamSettings(task_reminders=None))  # w1 keeps task_1 unfinished
    rt = runtime(root, model, settings=hold)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("write the parser")
    rt.submit("hello")
    assert rt.wait_idle(timeout=30)
    rt.services.spawn_teammate(TeammateSpec(name="w1", role="parser"), by="lead")
    assert rt.wait_idle(timeout=30)
    rt.submit("and now?")
    assert rt.wait_idle(timeout=30)
    # the team state is a reminder in the conversation, re-sent when it changed, never in the
    # system prompt (which stays the same for every call)
    lead = [r for r in model.requests if r.agent == "lead"]
    first, last = team_reminder(lead[0]), team_reminder(lead[-1])
    assert all(r.system == lead[0].system for r in lead)
    assert "Members:" not in lead[0].system[0].text
    assert "task_1 [pending, ready] write the parser" in first
    assert "(no teammates yet)" in first
    assert "- w1: idle, on task_1, role parser" in last
    assert "task_1 [in_progress, owner w1] write the parser" in last
