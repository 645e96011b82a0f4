"""``teamctl run --headless --goal-check`` end to end: a subprocess against the local fake
Messages API (the real ``anthropic`` SDK on loopback). The lead hands the work to a teammate and
the run ends 0 only once the check passes; an unreachable goal stops at its cap with the
"unfinished" exit code (the README's "Goals")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.actors.runtime.runtime_support import team_repo
from tests.e2e.team_support import model_env, oracle, teamctl, write_script

_GOAL = ["--goal-check", "test -f done.txt", "--permission-mode", "acceptEdits"]

TEAM_WRITES_DONE: dict[str, Any] = {
    "agents": {
        "lead": {
            "rules": [
                {
                    "match": "^Make done.txt",
                    "tool_uses": [
                        {"name": "create_task", "input": {"subject": "write done.txt"}},
                        {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "Work."}},
                    ],
                },
                {"match": "Created task_", "text": "Team started."},
                {"match": "(?s).", "text": "Noted.", "priority": -1},
                {"match": "^$", "text": "Noted.", "priority": -2},
            ]
        },
        "w1": {
            "rules": [
                {
                    "match": r"You now hold task task_1 \(claim",
                    "latency_ms": 300,  # still at work when the lead stops (not an assertion)
                    "tool_uses": [
                        {"name": "write_file", "input": {"path": "done.txt", "content": "ok\n"}}
                    ],
                    "once": True,
                },
                {
                    "match": "done.txt",
                    "tool_uses": [
                        {
                            "name": "complete_task",
                            "input": {"task_id": "task_1", "summary": "wrote done.txt"},
                        }
                    ],
                    "once": True,
                },
                {"match": "(?s).", "text": "OK.", "priority": -1},
                {"match": "^$", "text": "OK.", "priority": -2},
            ]
        },
    }
}


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_a_team_run_with_a_goal_check_ends_0_once_the_teammate_made_it_hold(
    tmp_path: Path,
) -> None:
    root = team_repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", TEAM_WRITES_DONE)
    with model_env(script, via_api=True) as model:
        proc = teamctl(
            root,
            "run",
            "--headless",
            *("--output-format", "stream-json", "--timeout", "120"),
            *_GOAL,
            "Make done.txt",
            env_extra=model.env,
        )
        out, err = proc.communicate(timeout=180)
        assert model.server is not None
        errors = model.server.script_errors
        lead_inputs = [json.dumps(r.body["messages"][-1]) for r in model.server.requests]
    assert proc.returncode == 0, err
    assert errors == []
    assert (root / "done.txt").read_text() == "ok\n"
    events = _events(out)
    result = events[-1]
    assert result["subtype"] == "success" and result["tasks"] == {"completed": 1}
    assert result["goal"]["state"] == "met"
    shown = [e["event"] for e in events if e["type"] == "team_event"]
    assert "goal.set" in shown  # the journal's events stream out as they are written
    # Stops while w1 still worked were deferred, not blocked: the lead never heard it failed.
    assert not any("the goal does not hold" in text for text in lead_inputs)
    oracle(root)


def test_an_unreachable_goal_stops_at_its_cap_with_the_unfinished_code(tmp_path: Path) -> None:
    root = team_repo(tmp_path)
    script = write_script(
        tmp_path / "script.yaml",
        {"agents": {"lead": {"rules": [{"match": "(?s).", "text": "Nothing to do."}]}}},
    )
    with model_env(script, via_api=True) as model:
        proc = teamctl(
            root,
            "run",
            "--headless",
            *("--goal-check", "test -f never.txt", "--goal-max-blocks", "2"),
            "Make never.txt",
            env_extra=model.env,
        )
        out, err = proc.communicate(timeout=180)
        assert model.server is not None
        calls = len(model.server.requests)
    assert proc.returncode == 3, (out, err)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "goal not met after 2 blocked stops (the cap)" in lines[0]
    assert calls == 3  # the first stop and two blocked ones, then the run ends at once
