"""The issue-15 scenarios end to end, through the real ``teamctl`` in subprocesses and the real
``anthropic`` SDK against the local fake Messages API: the ``review-changes`` workflow killed
with SIGKILL in the middle and resumed without a new request for any finished step; the
``fix-until-green`` goal run exiting 0 only once ``pytest`` passes (and not at all when the
model never fixes the code); a wrong workflow expectation failing ``teamctl scenario run``.
(Both scenarios also run green in ``tests/e2e/test_scenarios.py`` like every bundled one.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from actors.cli.main import cli
from actors.cli.run import EXIT_UNFINISHED
from actors.scenarios.model import find_scenario, scenarios_dir
from actors.scenarios.run import prepare_repo
from tests.e2e.team_support import (
    count,
    last_input,
    model_env,
    oracle,
    teamctl,
    wait_journal,
    write_script,
)


def _scenario(name: str, root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bundled scenario ``name`` prepared in ``root`` (fixture committed, changes on top,
    ``teamctl init``, its settings); its raw script and expectations."""
    scenario = find_scenario(name)
    prepare_repo(scenario, root)
    raw = yaml.safe_load((scenario.folder / "scenario.yaml").read_text(encoding="utf-8"))
    return raw["script"], raw["expect"]


def _slow_verifications(script: dict[str, Any]) -> dict[str, Any]:
    """The review script with its verification answers slowed down, so that the audits finish
    well before the verifications do (the kill lands between them)."""
    for rule in script["agents"]["*"]["rules"]:
        if "review_changes\\] verify" in rule["match"]:
            rule["latency_ms"] = 400
    return script


def _completed_labels(root: Path) -> list[str]:
    from actors.factory import open_team

    with open_team(root) as team:
        return [
            e.data["label"]
            for e in team.journal.read_from(1)
            if e.type == "workflow.step_completed"
        ]


def test_review_changes_killed_mid_run_resumes_without_asking_for_a_finished_step(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    raw_script, expect = _scenario("review-changes", root)
    script = write_script(tmp_path / "script.yaml", _slow_verifications(raw_script))
    args = json.dumps({"dimensions": ["correctness", "security", "tests"]})
    with model_env(script, via_api=True) as model:
        assert model.server is not None
        proc = teamctl(
            root, "workflow", "run", "review_changes", "--args", args, "--json", env_extra=model.env
        )
        try:  # the three audits are recorded: the verifications are under way
            assert wait_journal(
                root, lambda ev: count(ev, "workflow.step_completed") >= 3, timeout=120
            )
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        done = _completed_labels(root)
        assert {"audit correctness", "audit security", "audit tests"} <= set(done)
        assert len(done) < 8, "the run finished before the kill"
        before = len(model.server.requests)
        listed, _ = teamctl(root, "workflow", "runs", "--json").communicate(timeout=60)
        [row] = json.loads(listed)
        assert (row["name"], row["status"]) == ("review_changes", "running")
        resumed = teamctl(root, "workflow", "resume", row["run_id"], "--json", env_extra=model.env)
        out, err = resumed.communicate(timeout=180)
        after = model.server.requests[before:]
        assert not model.server.script_errors
    assert resumed.returncode == 0, err
    assert json.loads(out) == {
        "run_id": row["run_id"],
        "status": "completed",
        "result": expect["workflow"]["result"],
    }
    asked = [last_input(r) for r in after]
    for label in done:  # no request for a step finished before the kill
        assert not any(f"[review_changes] {label}\n" in text for text in asked), (label, asked)
        assert f"workflow: step {label}: cached" in err
    missing = {f"verify {f['file']}:{f['line']}" for f in expect["workflow"]["result"]["findings"]}
    assert missing - set(done), "nothing was left to run after the kill"
    from actors.factory import open_team

    with open_team(root) as team:  # one task per step: none created twice
        tasks = team.state().tasks.values()
        assert len(tasks) == expect["task_count"]
        assert {t.status for t in tasks} == {"completed"}
    assert _completed_labels(root)[: len(done)] == done
    assert len(_completed_labels(root)) == 8
    oracle(root)


def _goal_run(
    tmp_path: Path, script: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    root = tmp_path / "repo"
    _scenario("fix-until-green", root)
    path = write_script(tmp_path / "script.yaml", script)
    with model_env(path, via_api=True) as model:
        proc = teamctl(
            root,
            "run",
            "--headless",
            "--timeout",
            "120",
            "--goal-check",
            "python -m pytest -q",
            "--goal-max-blocks",
            "2",
            "Make the test suite pass.",
            env_extra={**model.env, "PATH": _path()},
        )
        out, err = proc.communicate(timeout=180)
        assert model.server is not None and not model.server.script_errors
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), root


def _path() -> str:
    return str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")


def _goal_states(root: Path) -> list[str]:
    from actors.factory import open_team

    with open_team(root) as team:
        return [e.data["state"] for e in team.journal.read_from(1) if e.type == "goal.evaluated"]


def _pytest(root: Path) -> int:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q"], cwd=root, capture_output=True, timeout=120
    ).returncode


def test_fix_until_green_exits_0_once_pytest_passes(tmp_path: Path) -> None:
    raw = yaml.safe_load(
        (scenarios_dir() / "fix-until-green" / "scenario.yaml").read_text(encoding="utf-8")
    )
    done, root = _goal_run(tmp_path, raw["script"])
    assert done.returncode == 0, done.stderr
    assert _goal_states(root) == ["active", "met"]  # stopped once unfixed, then fixed
    assert "return sum(values) / len(values)" in (root / "stats" / "mean.py").read_text()
    assert _pytest(root) == 0
    oracle(root)


def test_fix_until_green_never_fixed_stops_at_the_cap_without_success(tmp_path: Path) -> None:
    lazy = {
        "agents": {
            "lead": {
                "rules": [
                    {"match": "(?s).", "text": "Looks fine to me.", "priority": -1},
                    {"match": "^$", "text": "Noted.", "priority": -2},
                ]
            }
        }
    }
    done, root = _goal_run(tmp_path, lazy)
    assert done.returncode == EXIT_UNFINISHED, done.stderr
    assert _goal_states(root) == ["active", "active", "unmet"]
    assert "goal not met after 2 blocked stops" in done.stderr
    assert _pytest(root) != 0


def test_a_wrong_workflow_result_fails_the_scenario_run(tmp_path: Path) -> None:
    folder = tmp_path / "review-changes"
    shutil.copytree(scenarios_dir() / "review-changes", folder)
    path = folder / "scenario.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["expect"]["workflow"]["result"]["rejected"] = 0
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    out = CliRunner().invoke(cli, ["scenario", "run", str(folder), "--json"])
    assert out.exit_code == 1, out.output
    report = json.loads(out.output)
    failed = [c for c in report["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["workflow result"]
    assert '"rejected": 1' in failed[0]["detail"]
