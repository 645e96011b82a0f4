"""``worktree=True`` steps: the step's task is not claimable until its worktree is bound, so its
worker writes only inside that worktree (docs/ARCHITECTURE.md, "Workflows")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml

from actors.board.rules import AWAITS_WORKTREE, claimable
from actors.board.state import Task
from actors.errors import TeamError
from actors.factory import open_team
from actors.workflows.context import StepSpec
from actors.workflows.engine import BoardSteps
from tests.actors.cli.cli_support import git_repo, ok

WT = """
META = {"name": "wt", "description": "a step in a worktree of its own", "phases": []}

async def run(ctx, args):
    return await ctx.agent("Write out.txt", label="write", tools="all", worktree=True)
"""


def _commit(root: Path) -> None:
    (root / "README.md").write_text("base\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "README.md"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=root, check=True)


class Watching:
    """A Worktrees handle that notes whether the step's task was claimable when it was asked
    to bind it, then binds it (``inner``) or fails."""

    def __init__(self, board: Any, inner: Any = None) -> None:
        self.board, self.inner = board, inner
        self.claimable_then: list[bool] = []

    def create_for_task(self, task_id: str) -> Any:
        task = self.board.refresh().task(task_id)
        ready = [t.id for t in self.board.refresh().ready() if claimable(t)]
        self.claimable_then.append(claimable(task) or task_id in ready)
        if self.inner is None:
            raise TeamError("git is not available")
        return self.inner.create_for_task(task_id)


def _steps(team: Any, worktrees: Any) -> BoardSteps:
    services = SimpleNamespace(board=team.board, worktrees=worktrees)
    return BoardSteps(
        cast(Any, services), "wf_1", "wt", "cli", spawn_workers=False, waker=cast(Any, None)
    )


def test_a_worktree_step_is_bound_before_anyone_may_claim_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.worktrees.actor import WorktreesHandle

    root = git_repo(tmp_path, monkeypatch)
    _commit(root)
    team = open_team(root)
    handle = WorktreesHandle.start(root, team.board)
    try:
        watching = Watching(team.board, handle)
        spec = StepSpec(key="k", prompt="Write out.txt", label="write", worktree=True)
        task: Task = _steps(team, watching).create_task(spec, attempt=0, note=None)
        assert watching.claimable_then == [False]  # not claimable while it was being bound
        assert task.worktree == "task_1" and claimable(task)
        # A resume finds the same task (bound) and binds nothing again.
        again = _steps(team, watching).create_task(spec, attempt=0, note=None)
        assert again.id == task.id and watching.claimable_then == [False]
    finally:
        handle.stop()
        team.close()


def test_without_a_worktree_the_step_is_claimable_in_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    with open_team(root) as team:
        watching = Watching(team.board)
        spec = StepSpec(key="k", prompt="Write out.txt", worktree=True)
        task = _steps(team, watching).create_task(spec, attempt=0, note=None)
        assert watching.claimable_then == [False]
        assert task.worktree is None and AWAITS_WORKTREE not in task.metadata
        assert claimable(task)


SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {"rules": [{"match": "(?s).*", "text": "Noted.", "priority": -1}]},
        "*": {
            "rules": [
                {
                    "match": r"(?s)You now hold task (?P<id>task_\d+) \(claim \d+\): \[wt\] write"
                    r".*Working directory: (?P<wd>\S+)",
                    "tool_uses": [
                        {"name": "write_file", "input": {"path": "{wd}/out.txt", "content": "x"}},
                        {"name": "complete_task", "input": {"task_id": "{id}", "summary": "{wd}"}},
                    ],
                },
                {"match": "(?s).", "text": "OK.", "priority": -1},
                {"match": "^$", "text": "OK.", "priority": -2},
            ]
        },
    }
}


def test_a_worktree_steps_writes_land_in_its_worktree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    _commit(root)
    (root / ".team" / "workflows").mkdir()
    (root / ".team" / "workflows" / "wt.py").write_text(WT, encoding="utf-8")
    settings = root / ".team" / "settings.json"
    data = json.loads(settings.read_text())
    data.setdefault("permissions", {})["defaultMode"] = "acceptEdits"
    settings.write_text(json.dumps(data))
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
    monkeypatch.setenv("TEAMCTL_SCRIPT", str(script))
    answer = json.loads(ok(["workflow", "run", "wt", "--json"]).stdout)
    assert answer["status"] == "completed"
    wt = root / ".worktrees" / "task_1"
    assert Path(answer["result"]).resolve() == wt.resolve()
    assert not (root / "out.txt").exists()
    shown = subprocess.run(
        ["git", "show", "wt/task_1:out.txt"], cwd=root, capture_output=True, text=True
    )
    assert shown.returncode == 0 and shown.stdout == "x"  # committed on the step's branch


def test_the_waiting_mark_is_the_metadata_key_journals_already_hold() -> None:
    """A team's journal keeps the key that marks a step waiting for its worktree: a team made
    by an earlier version and opened by this one must still see its waiting steps as waiting."""
    waiting = Task(id="task_1", subject="s", metadata={"workflow_awaits_worktree": True})
    assert not claimable(waiting)
    assert claimable(waiting._replace(worktree="task_1"))
    assert claimable(waiting._replace(metadata={"workflow_awaits_worktree": None}))
