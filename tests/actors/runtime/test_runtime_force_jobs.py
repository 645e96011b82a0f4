"""``teamctl stop --force NAME`` also kills that teammate's own background jobs:
the runtime hosting it sees the forced request in the journal, stops it, and asks the Jobs actor
to kill the jobs it owns; other members' jobs keep running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.runtime.stop import request_stop
from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from tests.actors.jobs.test_jobs import alive, wait_gone
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo

__all__ = ["stop_actors"]


def background(command: str) -> dict[str, Any]:
    return {"name": "bash", "input": {"command": command, "run_in_background": True}}


SCRIPT = {
    "agents": {
        "lead": {
            "steps": [
                {"match": "start yours", "tool_uses": [background("sleep 301")]},
                {"match": "Started background job", "text": "Running."},
            ]
        },
        "w1": {
            "rules": [
                {"match": r"You now hold task", "tool_uses": [background("sleep 302")]},
                {"match": "Started background job", "text": "Running."},
                {"match": "(?s).", "text": "OK.", "priority": -1},
            ]
        },
    }
}


def test_a_forced_stop_kills_the_teammates_jobs_only(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = ScriptedModel(SCRIPT)
    rt = runtime(root, model, jobs=True, permission_mode="bypassPermissions")
    stop_actors.append(rt)
    rt.start()
    task = rt.board.create("long build")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id=task.id), by="lead")
    rt.submit("start yours")

    def running() -> dict[str, Any]:
        return {j.owner: j for j in rt.background.jobs.list() if j.status == "running"}

    assert rt.wait_until(lambda: set(running()) == {"lead", "w1"}, timeout=60)
    jobs = running()
    mine, lead = jobs["w1"], jobs["lead"]

    line = request_stop(rt.team, "w1", force=True)
    assert "asked the runtime" in line
    assert rt.wait_until(lambda: rt.board.refresh().members["w1"].status == "stopped", 60)
    assert mine.pid is not None and lead.pid is not None
    wait_gone(mine.pid)
    status = {j.job_id: j.status for j in rt.background.jobs.list()}
    assert status[mine.job_id] == "killed"
    assert status[lead.job_id] == "running" and alive(lead.pid)
    assert rt.board.refresh().tasks[task.id].owner is None  # its claim was released
