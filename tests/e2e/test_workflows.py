"""``teamctl workflow`` end to end: the real CLI in a subprocess, the real ``anthropic`` SDK
against the local fake Messages API on loopback, scripted teammates
(docs/ARCHITECTURE.md, "Workflows")."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from tests.actors.runtime.runtime_support import team_repo
from tests.e2e.team_support import (
    count,
    last_input,
    model_env,
    teamctl,
    wait_journal,
    write_script,
)

PARALLEL = """
META = {"name": "fan", "description": "four checks in parallel", "phases": ["check"]}
SCHEMA = {
    "type": "object",
    "properties": {"dim": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["dim", "score"],
}

async def run(ctx, args):
    ctx.phase("check")
    return await ctx.parallel(
        [ctx.agent(f"Rate dimension {d}", schema=SCHEMA, label=f"rate {d}") for d in args["dims"]]
    )
"""

SEQUENTIAL = """
META = {"name": "steps", "description": "four steps in a row", "phases": []}

async def run(ctx, args):
    out = []
    for n in ("one", "two", "three", "four"):
        out.append(await ctx.agent(f"Do step {n}", label=n))
    return out
"""

WORKERS: dict[str, Any] = {
    "rules": [
        {
            "match": r"You now hold task (?P<id>task_\d+) \(claim \d+\): \[fan\] rate (?P<d>\w+)",
            "tool_uses": [
                {
                    "name": "complete_task",
                    "input": {"task_id": "{id}", "summary": '{"dim": "{d}", "score": 3}'},
                }
            ],
        },
        {
            "match": r"You now hold task (?P<id>task_\d+) \(claim \d+\): \[steps\] (?P<n>\w+)",
            "latency_ms": 300,
            "tool_uses": [
                {"name": "complete_task", "input": {"task_id": "{id}", "summary": "did {n}"}}
            ],
        },
        {"match": "(?s).", "text": "OK.", "priority": -1},
        {"match": "^$", "text": "OK.", "priority": -2},
    ]
}
SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {"rules": [{"match": "(?s).*", "text": "Noted.", "priority": -1}]},
        "*": WORKERS,
    }
}


def _repo(tmp_path: Path) -> Path:
    root = team_repo(tmp_path)
    folder = root / ".team" / "workflows"
    folder.mkdir()
    (folder / "fan.py").write_text(PARALLEL, encoding="utf-8")
    (folder / "steps.py").write_text(SEQUENTIAL, encoding="utf-8")
    return root


def test_parallel_schema_steps_complete_in_input_order(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", SCRIPT)
    with model_env(script, via_api=True) as model:
        args = json.dumps({"dims": ["speed", "safety", "style", "tests"]})
        proc = teamctl(
            root, "workflow", "run", "fan", "--args", args, "--json", env_extra=model.env
        )
        out, err = proc.communicate(timeout=180)
        assert model.server is not None
        assert not model.server.script_errors
        assert not [r for r in model.server.requests if r.agent == "lead"]  # the run took them
    assert proc.returncode == 0, err
    answer = json.loads(out)
    assert answer["status"] == "completed"
    assert answer["run_id"].startswith("wf_")
    assert answer["result"] == [
        {"dim": "speed", "score": 3},
        {"dim": "safety", "score": 3},
        {"dim": "style", "score": 3},
        {"dim": "tests", "score": 3},
    ]
    runs = teamctl(root, "workflow", "runs", "--json")
    listed, _ = runs.communicate(timeout=60)
    [row] = json.loads(listed)
    assert (row["run_id"], row["status"], row["steps_done"], row["steps_total"]) == (
        answer["run_id"],
        "completed",
        4,
        4,
    )


def test_sigkill_after_two_steps_then_resume_requests_no_finished_step(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", SCRIPT)
    with model_env(script, via_api=True) as model:
        assert model.server is not None
        proc = teamctl(root, "workflow", "run", "steps", "--json", env_extra=model.env)
        try:
            assert wait_journal(
                root, lambda ev: count(ev, "workflow.step_completed") >= 2, timeout=120
            )
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        before = len(model.server.requests)
        runs = teamctl(root, "workflow", "runs", "--json")
        listed, _ = runs.communicate(timeout=60)
        [row] = json.loads(listed)
        assert row["status"] == "running" and row["steps_done"] >= 2
        resumed = teamctl(root, "workflow", "resume", row["run_id"], "--json", env_extra=model.env)
        out, err = resumed.communicate(timeout=180)
        after = model.server.requests[before:]
        assert not model.server.script_errors
    assert resumed.returncode == 0, err
    answer = json.loads(out)
    assert answer == {
        "run_id": row["run_id"],
        "status": "completed",
        "result": ["did one", "did two", "did three", "did four"],
    }
    asked = [last_input(r) for r in after]
    assert not any("[steps] one" in text or "[steps] two" in text for text in asked), asked
    assert any("[steps] four" in text for text in asked)
    assert "step one: cached" in err and "step two: cached" in err
    from actors.factory import open_team

    with open_team(root) as team:  # nothing created twice: one task per step
        assert len(team.state().tasks) == 4
    again = teamctl(root, "workflow", "resume", row["run_id"], env_extra=model.env)
    _, err = again.communicate(timeout=60)
    assert again.returncode == 1 and "already completed" in err


def test_the_lead_runs_a_workflow_by_name_with_its_tool(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    lead = {
        "rules": [
            {
                "match": "^Rate two dimensions",
                "tool_uses": [
                    {"name": "workflow", "input": {"name": "fan", "args": {"dims": ["a", "b"]}}}
                ],
            },
            {"match": '"status": "completed"', "text": "The workflow completed."},
            {"match": "(?s).*", "text": "Noted.", "priority": -1},
        ]
    }
    script = write_script(tmp_path / "script.yaml", {"agents": {"lead": lead, "*": WORKERS}})
    proc = teamctl(
        root, "run", "--headless", "--timeout", "120", "Rate two dimensions", script=script
    )
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert "[lead] The workflow completed." in out
    from actors.workflows.engine import read_runs

    [run] = read_runs(root).values()
    assert run.status == "completed"
    assert run.result == [{"dim": "a", "score": 3}, {"dim": "b", "score": 3}]


def _kill_after_two_steps(root: Path, env: dict[str, str]) -> str:
    """``teamctl workflow run steps`` SIGKILLed once two steps are recorded; the run's id."""
    proc = teamctl(root, "workflow", "run", "steps", "--json", env_extra=env)
    try:
        assert wait_journal(root, lambda ev: count(ev, "workflow.step_completed") >= 2, timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    from actors.workflows.engine import read_runs

    [run] = read_runs(root).values()
    assert run.status == "running" and len(run.steps) >= 2
    return run.run_id


def test_teamctl_resume_continues_a_run_that_was_in_flight(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", SCRIPT)
    with model_env(script, via_api=True) as model:
        assert model.server is not None
        run_id = _kill_after_two_steps(root, model.env)
        before = len(model.server.requests)
        proc = teamctl(
            root,
            "resume",
            "--headless",
            "--timeout",
            "120",
            "--output-format",
            "stream-json",
            env_extra=model.env,
        )
        out, err = proc.communicate(timeout=180)
        after = model.server.requests[before:]
        assert not model.server.script_errors
    assert proc.returncode == 0, err
    from actors.workflows.engine import read_runs

    run = read_runs(root)[run_id]
    assert (run.status, run.result) == (
        "completed",
        ["did one", "did two", "did three", "did four"],
    )
    asked = [last_input(r) for r in after]
    assert not any("[steps] one" in text or "[steps] two" in text for text in asked), asked
    assert any("[steps] four" in text for text in asked)
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines[-1]["type"] == "result" and lines[-1]["subtype"] == "success"
    journal = [e for e in lines if e.get("type") == "team_event"]
    finished = [e for e in journal if e["event"] == "workflow.finished"]
    assert [e["data"]["status"] for e in finished] == ["completed"]
    assert [e["data"]["run_id"] for e in finished] == [run_id]
    # Progress in stream-json: the recorded steps cached, the others started and done.
    named = {
        kind: {e["data"]["name"] for e in journal if e["event"] == f"workflow.{kind}"}
        for kind in ("step_cached", "step_started", "step_completed")
    }
    assert {"one", "two"} <= named["step_cached"]
    assert "four" in named["step_started"] and "four" in named["step_completed"]
    assert not {"one", "two"} & named["step_started"]
