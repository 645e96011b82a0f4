"""Removal is host-owned and refused while claimed, busy, dirty or unmerged unless forced."""

from __future__ import annotations

import threading
from pathlib import Path

import pykka
import pytest

from actors.worktrees.actor import WorktreesHandle
from actors.worktrees.git import WorktreeError
from tests.actors.worktrees.worktree_support import Env, commit_file, env, git

__all__ = ["env"]


def test_removal_while_claimed_is_refused(env: Env) -> None:
    tid = env.task()
    env.wt.create("a", tid)
    env.claim(tid)
    env.wt.lock("a", "claimed")
    with pytest.raises(WorktreeError, match=f"task {tid} is claimed by w1.*--force"):
        env.wt.remove("a")
    assert env.wt.path("a").is_dir()
    removed = env.wt.remove("a", force=True)
    assert removed.forced and not removed.branch_deleted
    assert not env.wt.path("a").exists() and git(env.root, "branch", "--list", "wt/a")
    state = env.team.board.refresh()
    assert state.worktrees["a"].removed and state.task(tid).worktree is None


def test_uncommitted_and_unmerged_work_is_refused(env: Env) -> None:
    tid = env.task()
    env.wt.create("a", tid)
    path = env.wt.path("a")
    (path / "new.txt").write_text("x\n")
    with pytest.raises(WorktreeError, match="1 uncommitted change"):
        env.wt.remove("a")
    env.wt.commit_all("a", "x")
    with pytest.raises(WorktreeError, match="wt/a has work not merged into main"):
        env.wt.remove("a")
    with pytest.raises(WorktreeError, match="no worktree named"):
        env.wt.remove("b")
    env.wt.remove("a", force=True, delete_branch=True)
    assert not git(env.root, "branch", "--list", "wt/a")


def test_clean_worktree_is_removed_and_its_name_reusable(env: Env) -> None:
    tid = env.task()
    env.wt.create("a", tid)
    env.wt.remove("a", delete_branch=True)
    assert [e.type for e in env.team.journal.read_from(1)][-1] == "worktree.removed"
    env.wt.create("a", tid)
    assert not env.team.board.refresh().worktrees["a"].removed


def test_a_running_job_blocks_removal(env: Env) -> None:
    busy = threading.Event()
    busy.set()
    seen: list[Path] = []

    def running(path: Path) -> bool:
        seen.append(path)
        return busy.is_set()

    handle = WorktreesHandle.start(env.root, env.team.board, job_running=running)
    tid = env.task()
    handle.create("a", tid)
    with pytest.raises(WorktreeError, match="a background job is running in it"):
        handle.remove("a")
    assert seen == [handle.path("a")]
    busy.clear()
    handle.remove("a")


def test_directory_deleted_by_hand_can_still_be_removed(env: Env) -> None:
    import shutil

    tid = env.task()
    env.wt.create("a", tid)
    shutil.rmtree(env.wt.path("a"))
    env.wt.remove("a", delete_branch=True)
    assert "/.worktrees/a" not in git(env.root, "worktree", "list", "--porcelain")


def test_the_actor_survives_errors_and_stops_cleanly(env: Env) -> None:
    with pytest.raises(WorktreeError):
        env.wt.create("../x", "task_1")
    tid = env.task()
    commit_file(env.root, "more.txt", "m\n")
    assert env.wt.create("fine", tid).name == "fine"
    env.wt.stop()
    with pytest.raises(pykka.ActorDeadError):
        env.wt.list()
