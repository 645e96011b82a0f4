"""Merging a verified task's worktree: its ``verify`` command runs on the merge result (a
scratch checkout of the exact commit that would land) before the base branch moves; a failure
leaves the base branch and the main checkout as they were (real git in tmp_path)."""

from __future__ import annotations

import pytest

from actors.worktrees.git import WorktreeError
from mailboxes.events import TaskVerified, payload
from tests.actors.worktrees.worktree_support import Env, commit_file, env, git

__all__ = ["env"]


def _done(env: Env, name: str, files: dict[str, str], verify: str) -> str:
    """A verified task with worktree ``name`` whose teammate committed ``files`` and completed."""
    tid = env.team.board.create(f"work in {name}", verify=verify).id
    env.wt.create(name, tid)
    env.claim(tid)
    path = env.wt.path(name)
    for rel, text in files.items():
        (path / rel).write_text(text)
    env.wt.commit_all(name, f"{tid}: work")
    env.complete(tid)
    return tid


def _verified(env: Env) -> list[TaskVerified]:
    out = []
    for event in env.team.journal.read_from(1):
        if event.type == TaskVerified.TYPE:
            body = payload(event)
            assert isinstance(body, TaskVerified)
            out.append(body)
    return out


def test_a_failing_merge_result_is_refused_and_the_base_branch_is_unchanged(env: Env) -> None:
    _done(env, "a", {"a.txt": "a\n"}, "echo looking; test -f done.txt")
    commit_file(env.root, "main.txt", "main\n")  # a real merge, not a fast-forward
    before = env.status()
    worktrees_before = git(env.root, "worktree", "list", "--porcelain")

    result = env.wt.merge("a")
    assert not result.ok and result.verified is False
    assert "exited 1" in result.reason and "looking" in result.reason
    assert "main was not changed" in result.reason
    assert env.status() == before
    assert git(env.root, "rev-parse", "main") == before[0]
    assert not (env.root / "a.txt").exists()
    assert git(env.root, "worktree", "list", "--porcelain") == worktrees_before  # scratch gone
    assert env.team.board.refresh().worktrees["a"].merged_commit is None
    [run] = _verified(env)
    assert (run.stage, run.passed, run.exit_code, run.worktree) == ("merge", False, 1, "a")
    assert run.commit is not None and run.commit != before[0]


def test_the_command_runs_on_the_merge_result_not_on_the_branch(env: Env) -> None:
    # The branch alone lacks main.txt and the base lacks a.txt: only the merge has both.
    _done(env, "a", {"a.txt": "a\n"}, "test -f a.txt && test -f main.txt")
    commit_file(env.root, "main.txt", "main\n")
    result = env.wt.merge("a")
    assert result.ok and result.verified is True and not result.fast_forward
    head = git(env.root, "rev-parse", "HEAD")
    assert result.commit == head and len(git(env.root, "log", "-1", "--format=%P").split()) == 2
    assert "Merge wt/a (task_1: work in a)" in git(env.root, "log", "-1", "--format=%s")
    [run] = _verified(env)
    assert run.passed and run.commit == head  # the verified commit is the one that landed
    assert env.status()[1] == ""
    assert env.team.board.refresh().worktrees["a"].merged_commit == head


def test_fast_forward_and_squash_of_a_verified_task(env: Env) -> None:
    _done(env, "a", {"a.txt": "a\n"}, "test -f a.txt")
    tip = git(env.root, "rev-parse", "wt/a")
    fast = env.wt.merge("a")
    assert fast.ok and fast.fast_forward and fast.commit == tip and fast.verified
    _done(env, "b", {"b.txt": "b\n"}, "test -f b.txt")
    commit_file(env.root, "main.txt", "main\n")
    squashed = env.wt.merge("b", squash=True)
    assert squashed.ok and squashed.squash and squashed.verified
    assert len(git(env.root, "log", "-1", "--format=%P").split()) == 1
    assert "(squashed wt/b)" in git(env.root, "log", "-1", "--format=%s")
    assert [r.commit for r in _verified(env)] == [tip, squashed.commit]


def test_fixing_the_branch_lets_the_merge_land(env: Env) -> None:
    tid = _done(env, "a", {"a.txt": "a\n"}, "test -f done.txt")
    before = env.status()
    assert not env.wt.merge("a").ok and env.status() == before
    # A follow-up commit on the branch (as a teammate fixing it would make) passes.
    commit_file(env.wt.path("a"), "done.txt", "done\n")
    result = env.wt.merge("a")
    assert result.ok and result.verified and (env.root / "done.txt").exists()
    assert [r.passed for r in _verified(env)] == [False, True]
    assert env.team.board.state.task(tid).verified is True


def test_an_unverified_task_merges_without_running_anything(env: Env) -> None:
    tid = env.task("plain")
    env.wt.create("p", tid)
    env.claim(tid)
    (env.wt.path("p") / "p.txt").write_text("p\n")
    env.wt.commit_all("p", "p")
    env.complete(tid)
    result = env.wt.merge("p")
    assert result.ok and result.verified is None and _verified(env) == []


def test_merge_refusals_still_come_first(env: Env) -> None:
    tid = env.team.board.create("unfinished", verify="true").id
    env.wt.create("u", tid)
    with pytest.raises(WorktreeError, match="only a completed task's branch is merged"):
        env.wt.merge("u")
    assert _verified(env) == []
