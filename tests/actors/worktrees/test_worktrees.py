"""The Worktrees actor on real git repositories: create, bind, lock, commit, remove."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from actors.worktrees.git import WorktreeError
from tests.actors.worktrees.worktree_support import Env, commit_file, env, git

__all__ = ["env"]


def test_create_binds_a_pending_task(env: Env) -> None:
    tid = env.task()
    made = env.wt.create("alpha", tid)
    path = env.root / ".worktrees" / "alpha"
    assert made.path == str(path) and made.branch == "wt/alpha" and made.base == "main"
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD") == "wt/alpha"
    assert git(path, "rev-parse", "HEAD") == git(env.root, "rev-parse", "main")
    # No upstream tracking.
    assert "branch." not in git(env.root, "config", "--list", "--local")
    state = env.team.board.refresh()
    assert state.task(tid).worktree == "alpha"
    assert state.worktrees["alpha"].task_id == tid
    types = [e.type for e in env.team.journal.read_from(1)][-2:]
    assert types == ["worktree.created", "worktree.bound"]
    # The main checkout sees nothing of it (.worktrees/ is excluded by init).
    assert env.status()[1] == ""


def test_create_from_a_base_ref(env: Env) -> None:
    first = git(env.root, "rev-parse", "HEAD")
    commit_file(env.root, "b.txt", "b\n")
    made = env.wt.create("old", env.task(), base=first)
    assert made.base == first and made.base_commit == first
    with pytest.raises(WorktreeError, match="does not name a commit"):
        env.wt.create("nope", env.task(), base="no-such-ref")
    assert not (env.root / ".worktrees" / "nope").exists()


@pytest.mark.parametrize(
    "name", ["../x", ".git", "a/b", "x" * 65, ".hidden", "", "a..b", "sp ace", "x.lock"]
)
def test_bad_names_are_refused(env: Env, name: str) -> None:
    with pytest.raises(WorktreeError, match="invalid worktree name"):
        env.wt.create(name, env.task())
    assert list((env.root / ".worktrees").glob("*")) == [] or not (env.root / ".worktrees").exists()


def test_sixty_four_characters_is_fine(env: Env) -> None:
    name = "x" * 64
    tid = env.task()
    made = env.wt.create(name, tid)
    path = env.root / ".worktrees" / name
    assert (made.path, made.branch) == (str(path), f"wt/{name}")
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD") == f"wt/{name}"
    assert env.team.board.refresh().task(tid).worktree == name


def test_existing_branch_or_path_is_refused(env: Env) -> None:
    git(env.root, "branch", "wt/taken")
    with pytest.raises(WorktreeError, match="branch wt/taken already exists"):
        env.wt.create("taken", env.task())
    (env.root / ".worktrees" / "here").mkdir(parents=True)
    with pytest.raises(WorktreeError, match="already exists"):
        env.wt.create("here", env.task())
    assert env.team.board.refresh().worktrees == {}


def test_claimed_completed_or_bound_tasks_are_refused(env: Env) -> None:
    claimed = env.task()
    env.claim(claimed)
    with pytest.raises(WorktreeError, match="is in_progress"):
        env.wt.create("a", claimed)
    env.complete(claimed)
    with pytest.raises(WorktreeError, match="is completed"):
        env.wt.create("a", claimed)
    bound = env.task()
    env.wt.create("b", bound)
    with pytest.raises(WorktreeError, match="already bound"):
        env.wt.create("c", bound)
    with pytest.raises(WorktreeError, match="unknown task"):
        env.wt.create("d", "task_99")
    assert sorted(env.team.board.refresh().worktrees) == ["b"]
    assert not git(env.root, "branch", "--list", "wt/a", "wt/c", "wt/d")


def test_two_creates_at_once_one_wins(env: Env) -> None:
    tid = env.task()
    results: list[object] = []
    gate = threading.Barrier(2)

    def go(name: str) -> None:
        gate.wait(timeout=10)
        try:
            results.append(env.wt.create(name, tid))
        except WorktreeError as exc:
            results.append(exc)

    threads = [threading.Thread(target=go, args=(n,)) for n in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    errors = [r for r in results if isinstance(r, WorktreeError)]
    assert len(results) == 2 and len(errors) == 1
    assert "already bound" in str(errors[0])
    state = env.team.board.refresh()
    assert len(state.worktrees) == 1
    (winner,) = state.worktrees
    loser = "two" if winner == "one" else "one"
    assert not (env.root / ".worktrees" / loser).exists()
    assert not git(env.root, "branch", "--list", f"wt/{loser}")


def test_task_claimed_between_git_and_journal_is_undone(env: Env) -> None:
    """The journal step re-checks under the lock; the git step is rolled back."""
    from actors.worktrees.actor import WorktreesHandle

    tid = env.task()

    def claim_meanwhile(point: str) -> None:
        assert point == "worktree.after_git"
        env.claim(tid)

    handle = WorktreesHandle.start(env.root, env.team.board, fault=claim_meanwhile)
    with pytest.raises(WorktreeError, match="is in_progress") as info:
        handle.create("late", tid)
    assert info.value.exists == ()
    assert not (env.root / ".worktrees" / "late").exists()
    assert not git(env.root, "branch", "--list", "wt/late")
    assert "late" not in env.team.board.refresh().worktrees


def test_lock_unlock_and_commit_all(env: Env) -> None:
    tid = env.task("write the thing")
    env.wt.create("a", tid)
    path = env.wt.path("a")
    env.wt.lock("a", f"claimed by w1 for {tid}")
    env.wt.lock("a", "again")  # idempotent
    listing = git(env.root, "worktree", "list", "--porcelain")
    assert f"locked claimed by w1 for {tid}" in listing
    assert env.wt.list()[0].locked
    env.wt.unlock("a")
    env.wt.unlock("a")
    assert "locked" not in git(env.root, "worktree", "list", "--porcelain")
    assert env.wt.commit_all("a", "nothing") is None
    (path / "new.txt").write_text("new\n")
    (path / "README.md").write_text("changed\n")
    sha = env.wt.commit_all("a", f"{tid}: write the thing")
    assert sha == git(path, "rev-parse", "HEAD")
    assert git(path, "log", "-1", "--format=%s") == f"{tid}: write the thing"
    assert git(path, "status", "--porcelain") == ""
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD") == "wt/a"
    # The main checkout is untouched.
    assert (env.root / "README.md").read_text() == "hello\n" and env.status()[1] == ""


def test_list_shows_task_and_state(env: Env) -> None:
    tid = env.task()
    env.wt.create("a", tid)
    env.claim(tid)
    (view,) = env.wt.list()
    assert (view.name, view.task_id, view.task_status, view.owner) == (
        "a",
        tid,
        "in_progress",
        "w1",
    )
    assert view.exists and not view.removed and Path(view.path).is_dir()


def test_create_for_task_names_it_after_the_task(env: Env) -> None:
    tid = env.task()
    made = env.wt.create_for_task(tid)
    assert (made.name, made.branch, made.task_id) == (tid, f"wt/{tid}", tid)
    assert env.team.board.claim(tid, "w1").ok
