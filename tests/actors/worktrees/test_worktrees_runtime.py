"""The runtime's side of worktrees: the lead's tool pool, and locks that follow the claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.runtime.members import default_tools
from actors.scenarios.run import capabilities
from actors.services import TeammateSpec
from actors.settings import Settings, TeamSettings
from harness.model.scripted import ScriptedModel
from tests.actors.runtime.runtime_support import runtime, stop_actors
from tests.actors.worktrees.worktree_support import Env, env, git, make_repo

__all__ = ["env", "stop_actors"]

_QUIET = {"agents": {"*": {"rules": [{"match": "(?s).*", "text": "thinking it over"}]}}}
_HOLD = Settings(team=TeamSettings(task_reminders=None))
"""The quiet teammates keep the task they end their turns holding (no reminder, no release)."""


def _locked(root: Path) -> list[str]:
    """Paths of the worktrees git has locked."""
    blocks = [b.splitlines() for b in git(root, "worktree", "list", "--porcelain").split("\n\n")]
    return [
        b[0].removeprefix("worktree ") for b in blocks if any(x.startswith("locked") for x in b)
    ]


@pytest.mark.parametrize("worktrees", [True, False])
def test_the_lead_gets_the_worktree_tools_when_the_runtime_runs_worktrees(
    worktrees: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_actors: list[Any]
) -> None:
    root = make_repo(tmp_path, monkeypatch)
    rt = runtime(root, ScriptedModel(_QUIET), tools=default_tools, worktrees=worktrees)
    stop_actors.append(rt)
    rt.start()
    lead = [t.name for t in default_tools(rt.services, "lead", "lead")]
    mate = [t.name for t in default_tools(rt.services, "w1", "teammate")]
    assert ("create_worktree" in lead, "merge_worktree" in lead) == (worktrees, worktrees)
    assert "create_worktree" not in mate and "merge_worktree" not in mate
    assert not any("remove" in name for name in lead)
    assert "worktrees" in capabilities()


def test_a_stopped_teammate_leaves_its_worktree_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_actors: list[Any]
) -> None:
    root = make_repo(tmp_path, monkeypatch)
    rt = runtime(root, ScriptedModel(_QUIET), tools=default_tools, worktrees=True, settings=_HOLD)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("hold it")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1", worktree=True), by="lead")
    assert rt.wait_idle(timeout=30)
    path = str(root / ".worktrees" / "task_1")
    assert _locked(root) == [path]  # claimed: locked
    assert rt.force_stop("w1")
    task = rt.board.refresh().tasks["task_1"]
    assert (task.status, task.owner) == ("pending", None)
    assert _locked(root) == []


def test_reconcile_unlocks_a_worktree_left_locked_by_a_claim_that_is_gone(env: Env) -> None:
    tid = env.task()
    env.wt.create("a", tid)
    epoch = env.claim(tid)
    env.wt.lock("a", "claimed")
    assert env.wt.reconcile().repaired == ()  # still claimed: the lock stays
    env.team.board.release(tid, "w1", epoch, "owner_dead")  # as the reaper does
    report = env.wt.reconcile()
    assert report.repaired == ("unlocked worktree a (its task is not claimed)",)
    assert _locked(env.root) == [] and report.clean


def test_worktree_per_task_gives_a_task_assigned_at_spawn_its_own_worktree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_actors: list[Any]
) -> None:
    root = make_repo(tmp_path, monkeypatch)
    (root / ".team" / "settings.json").write_text(
        '{"team": {"worktree_per_task": true, "task_reminders": null}}'
    )
    rt = runtime(root, ScriptedModel(_QUIET), tools=default_tools, worktrees=True)
    stop_actors.append(rt)
    rt.start()
    assert rt.worktrees.per_task
    rt.board.create("assigned")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    task = rt.board.refresh().tasks["task_1"]
    assert (task.owner, task.worktree) == ("w1", "task_1")
    assert rt.wait_idle(timeout=30)
    assert _locked(root) == [str(root / ".worktrees" / "task_1")]
    assert rt.worktrees.ensure_for_task("task_1")  # it has one: nothing more to make
    assert not rt.worktrees.ensure_for_task("task_9")  # no such task
