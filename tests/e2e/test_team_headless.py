"""``teamctl run --headless`` end to end in a subprocess with a scripted model; SIGKILL mid-run
then ``teamctl resume`` completes with nothing lost (DESIGN §13)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from tests.actors.runtime_support import team_repo
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
    resumed = teamctl(root, "resume", "--headless", "--timeout", "120", script=script)
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err
    assert "team idle" in out
    oracle(root)
    done = subprocess.run(["git", "status"], cwd=root, capture_output=True, text=True, check=True)
    assert done.returncode == 0
    from actors.factory import open_team

    with open_team(root) as team:
        state = team.state()
        assert [t.status for t in state.tasks.values()] == ["completed"] * 6
        assert len(state.tasks) == 6  # nothing created twice
        assert {m for m in state.members} == {"lead", "w1", "w2", "w3"}
        assert all(team.mailbox.counts(a)[0] == 0 for a in ("lead", "w1", "w2", "w3"))
