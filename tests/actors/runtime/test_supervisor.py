"""The Supervisor: a teammate whose model keeps failing is recorded as crashed, its task is
released, the lead is told, and it is restarted per policy (bounded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from tests.actors.runtime.runtime_support import FailingModel, runtime, stop_actors, team_repo

__all__ = ["stop_actors"]

LEAD_ONLY = {"agents": {"lead": {"rules": [{"match": "(?s).", "text": "Noted."}]}}}


def _crashes(rt: Any, name: str) -> list[Any]:
    return [
        e
        for e in rt.team.journal.read_from(1)
        if e.type == "member.status_changed"
        and e.data["name"] == name
        and e.data["status"] == "crashed"
    ]


def test_a_teammate_whose_model_keeps_failing_crashes_and_is_restarted_a_bounded_number_of_times(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = FailingModel(ScriptedModel(LEAD_ONLY), failing={"w1"})
    rt = runtime(root, model, max_restarts=2)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("doomed")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    assert rt.wait_until(lambda: len(_crashes(rt, "w1")) == 3, timeout=30)
    assert rt.wait_idle(timeout=30)
    assert model.failed_calls["w1"] == 3  # the first run and two restarts
    task = rt.board.refresh().tasks["task_1"]
    assert task.status == "pending" and task.owner is None
    released = [e for e in rt.team.journal.read_from(1) if e.type == "task.released"]
    assert released and {e.data["reason"] for e in released} == {"crashed"}
    assert rt.board.state.members["w1"].status == "failed"  # for good: no restart left
    assert list(rt.failures()) == ["w1"] and "after 2 restarts" in rt.failures()["w1"]
    # the lead was told each time, and read it (acked after its successful model call)
    lead_box = root / ".team" / "mailboxes" / "lead"
    assert not list((lead_box / "new").iterdir())
    errors = [p.read_text() for p in (lead_box / "cur").iterdir()]
    assert sum('"type":"error"' in t and "w1 crashed" in t for t in errors) == 3
    # the lead itself was never disturbed
    assert _crashes(rt, "lead") == []


def test_restart_policy_never_leaves_the_member_crashed(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    from actors.settings import Settings, TeamSettings

    root = team_repo(tmp_path)
    model = FailingModel(ScriptedModel(LEAD_ONLY), failing={"w1"})
    rt = runtime(root, model, settings=Settings(team=TeamSettings(restart="never")))
    stop_actors.append(rt)
    rt.start()
    rt.board.create("doomed")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    assert rt.wait_until(lambda: len(_crashes(rt, "w1")) == 1, timeout=30)
    assert rt.wait_idle(timeout=30)
    assert model.failed_calls["w1"] == 1
    assert rt.board.refresh().tasks["task_1"].owner is None
