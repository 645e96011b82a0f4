"""Merging worktree branches back into the main checkout's branch (real git in tmp_path)."""

from __future__ import annotations

import pytest

from actors.worktrees.git import WorktreeError
from tests.actors.worktrees.worktree_support import Env, commit_file, env, git

__all__ = ["env"]


def _done(env: Env, name: str, files: dict[str, str], subject: str = "work") -> str:
    """A task with worktree ``name`` whose teammate wrote ``files`` and completed."""
    tid = env.task(subject)
    env.wt.create(name, tid)
    env.claim(tid)
    path = env.wt.path(name)
    for rel, text in files.items():
        (path / rel).write_text(text)
    env.wt.commit_all(name, f"{tid}: {subject}")
    env.complete(tid)
    return tid


def test_fast_forward(env: Env) -> None:
    tid = _done(env, "a", {"a.txt": "a\n"})
    tip = git(env.root, "rev-parse", "wt/a")
    result = env.wt.merge("a")
    assert result.ok and result.fast_forward and result.commit == tip and result.into == "main"
    assert env.status() == (tip, "")
    assert (env.root / "a.txt").read_text() == "a\n"
    record = env.team.board.refresh().worktrees["a"]
    assert record.merged_commit == tip and record.task_id == tid
    assert [e.type for e in env.team.journal.read_from(1)][-1] == "worktree.merged"
    again = env.wt.merge("a")
    assert again.ok and again.already_merged


def test_merge_commit_when_base_moved(env: Env) -> None:
    _done(env, "a", {"a.txt": "a\n"})
    commit_file(env.root, "main.txt", "main\n")
    result = env.wt.merge("a")
    assert result.ok and not result.fast_forward
    parents = git(env.root, "log", "-1", "--format=%P").split()
    assert len(parents) == 2
    assert "Merge wt/a (task_1: work)" in git(env.root, "log", "-1", "--format=%s")
    assert (env.root / "a.txt").exists() and (env.root / "main.txt").exists()
    assert env.status()[1] == ""


def test_squash(env: Env) -> None:
    _done(env, "a", {"a.txt": "a\n"})
    commit_file(env.root, "main.txt", "main\n")
    result = env.wt.merge("a", squash=True)
    assert result.ok and result.squash
    assert len(git(env.root, "log", "-1", "--format=%P").split()) == 1
    assert (env.root / "a.txt").read_text() == "a\n"
    # Its changes are in main now: merging again changes nothing, and removal sees no work lost.
    assert env.wt.merge("a").already_merged
    env.wt.remove("a")


def test_conflict_leaves_the_main_checkout_exactly_as_it_was(env: Env) -> None:
    _done(env, "a", {"README.md": "from the worktree\n", "other.txt": "x\n"})
    commit_file(env.root, "README.md", "from main\n")
    (env.root / "untracked.txt").write_text("mine\n")
    before = env.status()
    result = env.wt.merge("a")
    assert not result.ok and result.conflicts == ("README.md",)
    assert "README.md" in result.reason
    assert env.status() == before
    assert (env.root / "README.md").read_text() == "from main\n"
    assert not (env.root / ".git" / "MERGE_HEAD").exists()
    assert env.team.board.refresh().worktrees["a"].merged_commit is None


def test_merge_refusals(env: Env) -> None:
    tid = env.task()
    env.wt.create("a", tid)
    with pytest.raises(WorktreeError, match="only a completed task"):
        env.wt.merge("a")
    env.claim(tid)
    (env.wt.path("a") / "f.txt").write_text("f\n")
    env.complete(tid)
    with pytest.raises(WorktreeError, match="worktree 'a' has uncommitted changes"):
        env.wt.merge("a")
    env.wt.commit_all("a", "f")
    (env.root / "README.md").write_text("dirty\n")
    with pytest.raises(WorktreeError, match="main checkout has uncommitted changes"):
        env.wt.merge("a")
    git(env.root, "checkout", "-q", "README.md")
    git(env.root, "checkout", "-q", "-b", "other")
    with pytest.raises(WorktreeError, match="made from main but the main checkout is on other"):
        env.wt.merge("a")
    git(env.root, "checkout", "-q", "main")
    with pytest.raises(WorktreeError, match="no worktree named 'zz'"):
        env.wt.merge("zz")
    assert env.wt.merge("a").ok


def test_two_worktrees_in_parallel_then_merge_all(env: Env) -> None:
    """Two teammates edit at once in two worktrees; one command merges both, in task order."""
    import threading

    t1, t2 = env.task("one"), env.task("two")
    env.wt.create("one", t1)
    env.wt.create("two", t2)
    env.claim(t1, "w1")
    env.claim(t2, "w2")
    gate = threading.Barrier(2)

    def edit(name: str, rel: str) -> None:
        gate.wait(timeout=10)
        path = env.wt.path(name)
        (path / rel).write_text(f"{name}\n")

    threads = [
        threading.Thread(target=edit, args=("one", "one.txt")),
        threading.Thread(target=edit, args=("two", "two.txt")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    # Each worktree sees only its own file; the main checkout sees neither.
    assert not (env.wt.path("one") / "two.txt").exists()
    assert not (env.wt.path("two") / "one.txt").exists()
    assert env.status()[1] == ""
    env.wt.commit_all("one", f"{t1}: one")
    env.wt.commit_all("two", f"{t2}: two")
    env.complete(t2, "w2")
    env.complete(t1, "w1")
    results = env.wt.merge_all()
    assert [r.name for r in results] == ["one", "two"] and all(r.ok for r in results)
    assert results[0].fast_forward and not results[1].fast_forward
    assert (env.root / "one.txt").read_text() == "one\n"
    assert (env.root / "two.txt").read_text() == "two\n"
    assert env.status()[1] == ""
    assert env.wt.merge_all() == ()


def test_merge_all_reports_a_conflict_and_goes_on(env: Env) -> None:
    _done(env, "a", {"README.md": "a\n"})
    _done(env, "b", {"README.md": "b\n"})
    _done(env, "c", {"c.txt": "c\n"})
    pending = env.task()
    env.wt.create("d", pending)
    results = env.wt.merge_all()
    assert [(r.name, r.ok) for r in results] == [("a", True), ("b", False), ("c", True)]
    assert results[1].conflicts == ("README.md",)
    assert (env.root / "README.md").read_text() == "a\n" and (env.root / "c.txt").exists()
    assert env.status()[1] == ""
