"""``teamctl workflow`` in-process: bad input, listing, and runs on the real runtime with the
in-process scripted model (a read-only step's worker cannot write; the step cap)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from actors.factory import open_team
from tests.actors.cli.cli_support import fails, git_repo, ok, ok_json, run

READ_ONLY = """
META = {"name": "ro", "description": "a read-only step", "phases": []}

async def run(ctx, args):
    return await ctx.agent("Look around", label="look")
"""

RUNAWAY = """
META = {"name": "loop", "description": "never ends", "phases": []}

async def run(ctx, args):
    while True:
        await ctx.agent("Again")
"""

SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {"rules": [{"match": "(?s).*", "text": "Noted.", "priority": -1}]},
        "*": {
            "rules": [
                {
                    "match": r"You now hold task (?P<id>task_\d+) \(claim \d+\): \[ro\] look",
                    "tool_uses": [
                        {"name": "write_file", "input": {"path": "x.txt", "content": "x"}}
                    ],
                },
                {
                    "match": "workflow step is read-only",
                    "tool_uses": [
                        {
                            "name": "complete_task",
                            "input": {"task_id": "task_1", "summary": "could not write"},
                        }
                    ],
                },
                {
                    "match": r"You now hold task (?P<id>task_\d+) \(claim \d+\): \[loop\]",
                    "tool_uses": [
                        {"name": "complete_task", "input": {"task_id": "{id}", "summary": "ok"}}
                    ],
                },
                {"match": "(?s).", "text": "OK.", "priority": -1},
                {"match": "^$", "text": "OK.", "priority": -2},
            ]
        },
    }
}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = git_repo(tmp_path, monkeypatch)
    folder = root / ".team" / "workflows"
    folder.mkdir()
    (folder / "ro.py").write_text(READ_ONLY, encoding="utf-8")
    (folder / "loop.py").write_text(RUNAWAY, encoding="utf-8")
    (folder / "broken.py").write_text("META = {}\nx = 1 / 0\n", encoding="utf-8")
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
    monkeypatch.setenv("TEAMCTL_SCRIPT", str(script))
    return root


def _events(root: Path, prefix: str) -> list[Any]:
    with open_team(root) as team:
        return [e for e in team.journal.read_from(1) if e.type.startswith(prefix)]


def test_args_that_are_not_json_are_a_usage_error(repo: Path) -> None:
    result = run(["workflow", "run", "ro", "--args", "{nope"])
    assert result.exit_code == 2
    assert "error: Invalid value for --args: not JSON" in result.stderr
    assert _events(repo, "workflow.") == []


def test_a_broken_file_fails_before_the_team_starts(repo: Path) -> None:
    err = fails(["workflow", "run", "broken"])
    assert "broken.py:2: the workflow does not import: ZeroDivisionError" in err
    assert _events(repo, "workflow.") == []
    assert "unsafe workflow name" in fails(["workflow", "run", "Bad/Name"])


def test_unknown_and_finished_runs_cannot_be_resumed(repo: Path) -> None:
    assert "no workflow run 'wf_nope'" in fails(["workflow", "resume", "wf_nope"])
    assert "no workflow run 'wf_nope'" in fails(["workflow", "show", "wf_nope"])


def test_list_shows_project_and_packaged_workflows(repo: Path) -> None:
    rows = ok_json(["workflow", "list"])
    names = {r.get("name") for r in rows}
    assert {"ro", "loop", "review_changes"} <= names
    assert any("broken.py" in r.get("error", "") for r in rows)


def test_a_read_only_step_cannot_write(repo: Path) -> None:
    answer = json.loads(ok(["workflow", "run", "ro", "--json"]).stdout)
    assert answer["status"] == "completed" and answer["result"] == "could not write"
    assert not (repo / "x.txt").exists()
    [task] = open_team(repo).state().tasks.values()
    assert task.metadata["workflow"]["tools"] == "read-only"
    assert task.metadata["workflow"]["run_id"] == answer["run_id"]
    show = ok(["workflow", "show", answer["run_id"]]).stdout
    assert "status: completed" in show


def test_the_step_cap_stops_a_runaway_workflow(repo: Path) -> None:
    settings = repo / ".team" / "settings.json"
    data = json.loads(settings.read_text())
    data.setdefault("team", {})["max_workflow_steps"] = 3
    settings.write_text(json.dumps(data))
    result = run(["workflow", "run", "loop", "--json"])
    assert result.exit_code == 1
    answer = json.loads(result.stdout)
    assert answer["status"] == "failed"
    assert "more than 3 agent() calls" in answer["error"]
    [finished] = _events(repo, "workflow.finished")
    assert finished.data["status"] == "failed"
    assert len(_events(repo, "workflow.step_completed")) == 3
