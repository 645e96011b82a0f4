"""``teamctl run --headless`` end to end in a subprocess with a scripted model; SIGKILL mid-run
then ``teamctl resume`` completes with nothing lost
(docs/RELIABILITY.md, "How the evidence is produced")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.actors.runtime.runtime_support import team_repo
from tests.e2e.team_support import (
    BACKLOG_SCRIPT,
    count,
    oracle,
    teamctl,
    wait_journal,
    write_script,
)


def test_headless_run_drains_the_backlog_and_streams_json(tmp_path: Path) -> None:
    root = team_repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", BACKLOG_SCRIPT)
    proc = teamctl(
        root,
        "run",
        "--headless",
        "--output-format",
        "stream-json",
        "--timeout",
        "120",
        "Build the backlog",
        script=script,
    )
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    result = events[-1]
    assert result["type"] == "result" and result["subtype"] == "success"
    assert result["tasks"] == {"completed": 6}
    kinds = {e["type"] for e in events}
    assert {"assistant", "tool_use", "tool_result", "team_event", "status"} <= kinds
    assert any(e["type"] == "tool_use" and e["name"] == "complete_task" for e in events)
    oracle(root)


def test_sigkill_mid_run_then_resume_loses_nothing(tmp_path: Path) -> None:
    root = team_repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", BACKLOG_SCRIPT)
    proc = teamctl(root, "run", "--headless", "Build the backlog", script=script)
    try:
        assert wait_journal(root, lambda ev: count(ev, "task.completed") >= 2, timeout=60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    from actors.factory import open_team

    with open_team(root) as team:  # what the crash left: live claims and unread mail
        state = team.board.state
        claims = {
            t.id: (t.owner, t.epoch)
            for t in state.tasks.values()
            if t.owner and t.status == "in_progress"
        }
        unread = {a: [e.id for e in team.mailbox.pending(a)] for a in team.mailbox.agents()}
    resumed = teamctl(root, "resume", "--headless", "--timeout", "120", script=script)
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err
    assert "team idle" in out
    oracle(root)
    done = subprocess.run(["git", "status"], cwd=root, capture_output=True, text=True, check=True)
    assert done.returncode == 0
    with open_team(root) as team:
        state = team.state()
        completed = {
            e.data["task_id"]: (e.data["owner"], e.data["epoch"])
            for e in team.journal.read_from(1)
            if e.type == "task.completed"
        }
        for tid, claim in claims.items():  # each claim survived: same owner, same epoch
            assert completed[tid] == claim
        for agent, ids in unread.items():  # each unread message was read after the resume
            cur = {n.rsplit(".", 1)[-1] for n in os.listdir(root / f".team/mailboxes/{agent}/cur")}
            assert set(ids) <= cur
        assert [t.status for t in state.tasks.values()] == ["completed"] * 6
        assert len(state.tasks) == 6  # nothing created twice
        assert {m for m in state.members} == {"lead", "w1", "w2", "w3"}
        assert all(team.mailbox.counts(a)[0] == 0 for a in ("lead", "w1", "w2", "w3"))
