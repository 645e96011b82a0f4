"""The runtime's git never runs hooks or fsmonitor commands planted in the repository, and no
``GIT_*`` variable of the caller redirects it. Each test first proves its trap fires for plain
git, so it can fail."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from actors.worktrees.git import Git
from tests.actors.worktrees.worktree_support import Env, env, git

__all__ = ["env"]


def _trap(tmp: Path, marker: Path) -> Path:
    script = tmp / "trap.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\nexit 0\n')
    script.chmod(0o755)
    return script


def _merge_cycle(env: Env, tid: str, name: str) -> None:
    """Every runtime git write on one worktree: commit_all, lock/unlock, merge, remove."""
    path = env.wt.path(name)
    env.claim(tid)
    env.wt.lock(name, "claimed")
    (path / "work.txt").write_text("work\n")
    assert env.wt.commit_all(name, f"{tid}: work") is not None
    env.wt.unlock(name)
    env.complete(tid)
    env.wt.reconcile()
    env.wt.list()
    assert env.wt.merge(name).ok
    env.wt.remove(name, delete_branch=True)


def test_fsmonitor_in_the_worktree_config_never_runs(env: Env, tmp_path: Path) -> None:
    marker = tmp_path / "fsmonitor-ran"
    trap = _trap(tmp_path, marker)
    tid = env.task()
    env.wt.create("evil", tid)
    path = env.wt.path("evil")
    git(path, "config", "extensions.worktreeConfig", "true")
    git(path, "config", "--worktree", "core.fsmonitor", str(trap))
    subprocess.run(["git", "status"], cwd=path, capture_output=True, check=False)
    assert marker.exists(), "the trap must fire for plain git"
    marker.unlink()
    _merge_cycle(env, tid, "evil")
    assert not marker.exists(), marker.read_text()


def test_fsmonitor_in_the_repository_config_never_runs(env: Env, tmp_path: Path) -> None:
    marker = tmp_path / "fsmonitor-ran"
    git(env.root, "config", "core.fsmonitor", str(_trap(tmp_path, marker)))
    subprocess.run(["git", "status"], cwd=env.root, capture_output=True, check=False)
    assert marker.exists()
    marker.unlink()
    tid = env.task()
    env.wt.create("evil", tid)
    _merge_cycle(env, tid, "evil")
    assert not marker.exists(), marker.read_text()


def test_hooks_never_run(env: Env, tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    trap = _trap(tmp_path, marker).read_text()
    hooks = env.root / ".git" / "hooks"
    elsewhere = tmp_path / "hooks"
    elsewhere.mkdir()
    for folder in (hooks, elsewhere):
        for name in ("pre-commit", "commit-msg", "post-commit", "post-checkout", "post-merge",
                     "reference-transaction", "pre-merge-commit", "prepare-commit-msg"):  # fmt: skip
            hook = folder / name
            hook.write_text(trap)
            hook.chmod(0o755)
    git(env.root, "commit", "-q", "--allow-empty", "-m", "trap check")
    assert marker.exists()
    marker.unlink()
    tid = env.task()
    env.wt.create("evil", tid)
    # A per-worktree hooksPath planted by the agent is ignored too.
    path = env.wt.path("evil")
    git(path, "config", "extensions.worktreeConfig", "true")
    git(path, "config", "--worktree", "core.hooksPath", str(elsewhere))
    _merge_cycle(env, tid, "evil")
    assert not marker.exists(), marker.read_text()


def test_caller_git_variables_do_not_redirect(env: Env, tmp_path: Path) -> None:
    decoy = tmp_path / "decoy"
    subprocess.run(["git", "init", "-q", str(decoy)], check=True)
    environ = {
        **os.environ,
        "GIT_DIR": str(decoy / ".git"),
        "GIT_WORK_TREE": str(decoy),
        "GIT_INDEX_FILE": str(tmp_path / "index"),
    }
    g = Git(env.root, environ=environ)
    try:
        assert g.out("rev-parse", "--show-toplevel") == str(env.root)
        assert g.current_branch() == "main"
        assert g.hooks_dir.is_dir() and list(g.hooks_dir.iterdir()) == []
    finally:
        g.close()
    assert not g.hooks_dir.exists()
