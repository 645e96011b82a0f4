"""``teamctl join NAME``: a teammate hosted in a second process, coordinating with the running
runtime only through the shared files (journal, mailboxes, leases)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from actors.board.state import TeamState
from harness.model.scripted import ScriptedModel
from mailboxes.events import EventDraft, MemberSpawned, draft
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo
from tests.e2e.team_support import BACKLOG_SCRIPT, oracle, teamctl, write_script

__all__ = ["stop_actors"]


def test_a_teammate_joined_from_another_process_drains_the_board_and_reports(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    lead_script = {"agents": {"lead": {"rules": [{"match": "(?s).", "text": "Noted."}]}}}
    rt = runtime(root, ScriptedModel(lead_script), shutdown_timeout_s=30)
    stop_actors.append(rt)
    rt.start()
    for subject in ("a", "b", "c"):
        rt.board.create(subject)

    def spawned(state: TeamState) -> list[EventDraft]:
        body = MemberSpawned(name="w1", role="general", prompt="Work.")
        return [draft(body.TYPE, "lead", body)]

    rt.board.execute(spawned)  # on the team, hosted nowhere yet
    rt.mailbox.ensure_inbox("w1")
    script = write_script(tmp_path / "script.yaml", BACKLOG_SCRIPT)
    proc = teamctl(root, "join", "w1", "--output-format", "stream-json", script=script)
    try:
        done = rt.wait_until(
            lambda: all(t.status == "completed" for t in rt.board.refresh().tasks.values()), 60
        )
        assert done
        assert {t.owner for t in rt.board.state.tasks.values()} == {"w1"}
        # a team process: SCHED_BATCH (team.cpu_scheduling's default), seen from outside
        assert os.sched_getscheduler(proc.pid) == os.SCHED_BATCH
        view = {m.name: m for m in rt.services.members()}["w1"]
        assert not view.hosted_here and rt.team.liveness.is_alive("w1")
        # one idle notification per finished task; the third is sent when w1's last turn ends,
        # which may come after the task is completed: ask for the shutdown only then
        assert rt.wait_until(lambda: _idle_notes(root) >= 3, 60)
        rt.services.request_shutdown("w1", by="lead")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert any(json.loads(line).get("name") == "complete_task" for line in out.splitlines())
    assert rt.wait_idle(timeout=30)
    assert rt.board.refresh().members["w1"].status == "stopped"
    cur = root / ".team" / "mailboxes" / "lead" / "cur"
    seen = [json.loads(p.read_text()) for p in cur.iterdir()]
    assert sum(m["type"] == "idle_notification" and m["from"] == "w1" for m in seen) >= 3
    assert any(m["type"] == "shutdown_response" for m in seen)
    rt.stop()
    oracle(root)


def _idle_notes(root: Path) -> int:
    """Idle notifications from w1 in the lead's inbox, read or not (counted by id: a message
    moved from new/ to cur/ while we look is seen once)."""
    inbox = root / ".team" / "mailboxes" / "lead"
    ids = set()
    for sub in ("new", "cur"):
        for path in (inbox / sub).iterdir():
            try:
                message = json.loads(path.read_text())
            except (OSError, ValueError):  # moved to cur/ while we looked
                continue
            if message["type"] == "idle_notification" and message["from"] == "w1":
                ids.add(message["id"])
    return len(ids)


def test_joining_a_member_that_is_already_hosted_is_refused(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    rt = runtime(root, ScriptedModel({"agents": {"*": {"rules": []}}}))
    stop_actors.append(rt)
    rt.start()
    script = write_script(tmp_path / "script.yaml", BACKLOG_SCRIPT)
    proc = teamctl(root, "join", "lead", script=script)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "unknown team member 'lead'" in err
    from actors.services import TeammateSpec

    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    proc = teamctl(root, "join", "w1", script=script)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "already hosted by a live process" in err


def test_a_sigkilled_join_process_loses_its_claim_to_the_runtime_reaper(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    import copy
    import signal

    root = team_repo(tmp_path)
    lead_script = {"agents": {"lead": {"rules": [{"match": "(?s).", "text": "Noted."}]}}}
    rt = runtime(root, ScriptedModel(lead_script), rescan_s=0.2)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("slow")

    def spawned(state: TeamState) -> list[EventDraft]:
        body = MemberSpawned(name="w1", role="general", prompt="Work.")
        return [draft(body.TYPE, "lead", body)]

    rt.board.execute(spawned)
    rt.mailbox.ensure_inbox("w1")
    slow = copy.deepcopy(BACKLOG_SCRIPT)
    slow["agents"]["*"]["rules"][0]["latency_ms"] = 60_000
    script = write_script(tmp_path / "script.yaml", slow)
    proc = teamctl(root, "join", "w1", script=script)
    try:
        assert rt.wait_until(lambda: rt.board.refresh().tasks["task_1"].owner == "w1", 60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)

    def reaped() -> bool:
        task = rt.board.refresh().tasks["task_1"]
        return task.owner is None and task.status == "pending"

    assert rt.wait_until(reaped, 30)
    released = [e for e in rt.team.journal.read_from(1) if e.type == "task.released"]
    assert [e.data["reason"] for e in released] == ["owner_dead"]
