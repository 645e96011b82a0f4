"""``teamctl worktree …`` in-process, plus a create SIGKILLed between its git and journal steps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.actors.cli.cli_support import fails, ok, ok_json, run
from tests.actors.worktrees.worktree_support import commit_file, git, make_repo

_MAIN = "from actors.cli.main import main; main()"


def _task(subject: str = "work") -> str:
    out = ok_json(["task", "add", subject])
    return str(out["id"])


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return make_repo(tmp_path, monkeypatch)


def test_add_list_merge_remove(repo: Path) -> None:
    tid = _task()
    out = ok(["worktree", "add", "feat", "--task", tid]).stdout
    assert "created" in out and "wt/feat" in out
    listing = ok_json(["worktree", "list"])
    (view,) = listing["worktrees"]
    assert (view["name"], view["task_id"], view["branch"]) == ("feat", tid, "wt/feat")
    assert listing["drift"] == []
    assert "feat" in ok(["worktree", "list"]).stdout
    path = repo / ".worktrees" / "feat"
    commit_file(path, "f.txt", "f\n")
    ok(["task", "claim", tid, "--as", "ann"])
    assert "is claimed by ann" in fails(["worktree", "remove", "feat"])
    ok(["task", "complete", tid, "--as", "ann"])
    assert "not merged" in fails(["worktree", "remove", "feat"])
    merged = ok(["worktree", "merge", "feat"]).stdout
    assert "fast-forward" in merged and (repo / "f.txt").exists()
    assert ok(["worktree", "merge", "--all"]).stdout.strip() == "nothing to merge"
    assert "already merged" in ok(["worktree", "merge", "feat"]).stdout
    out = ok(["worktree", "remove", "feat", "--delete-branch"]).stdout
    assert "branch wt/feat deleted" in out
    assert not path.exists() and not git(repo, "branch", "--list", "wt/feat")
    assert ok_json(["worktree", "list"])["worktrees"] == []
    assert ok_json(["worktree", "list", "--all"])["worktrees"][0]["removed"] is True


def test_bad_input_is_one_line(repo: Path) -> None:
    tid = _task()
    assert "invalid worktree name '../x'" in fails(["worktree", "add", "../x", "--task", tid])
    assert "unknown task" in fails(["worktree", "add", "ok", "--task", "task_9"])
    assert run(["worktree", "merge"]).exit_code == 2
    assert run(["worktree", "merge", "x", "--all"]).exit_code == 2
    assert "no worktree named 'x'" in fails(["worktree", "remove", "x"])


def test_merge_conflict_exit_code_and_message(repo: Path) -> None:
    tid = _task()
    ok(["worktree", "add", "c", "--task", tid])
    commit_file(repo / ".worktrees" / "c", "README.md", "theirs\n")
    ok(["task", "claim", tid, "--as", "ann"])
    ok(["task", "complete", tid, "--as", "ann"])
    commit_file(repo, "README.md", "ours\n")
    before = git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")
    result = run(["worktree", "merge", "--all", "--json"])
    assert result.exit_code == 1
    (report,) = json.loads(result.stdout)
    assert report["conflicts"] == ["README.md"] and report["ok"] is False
    assert (git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")) == before


def test_directory_deleted_by_hand_is_reported_then_pruned(repo: Path) -> None:
    import shutil

    tid = _task()
    ok(["worktree", "add", "gone", "--task", tid])
    shutil.rmtree(repo / ".worktrees" / "gone")
    drift = ok_json(["worktree", "list"])["drift"]
    assert [d["kind"] for d in drift] == ["missing_directory"]
    assert "gone" in git(repo, "worktree", "list", "--porcelain")
    after = ok_json(["worktree", "list", "--prune"])
    assert after["pruned"] is True
    assert "gone" not in git(repo, "worktree", "list", "--porcelain")
    assert [d["kind"] for d in after["drift"]] == ["missing_directory"]
    repaired = ok_json(["worktree", "list", "--repair"])
    assert repaired["drift"] == [] and repaired["worktrees"] == []
    assert any("gone" in line for line in repaired["repaired"])
    # The task is free for a new worktree again.
    ok(["worktree", "add", "again", "--task", tid])


def test_sigkill_between_git_and_journal_then_reconcile_repairs(repo: Path) -> None:
    tid = _task()
    env = {**os.environ, "TEAMCTL_FAULT": "worktree.after_git"}
    proc = subprocess.run(
        [sys.executable, "-c", _MAIN, "worktree", "add", "half", "--task", tid],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # Git has it, the journal does not.
    assert (repo / ".worktrees" / "half").is_dir()
    assert git(repo, "branch", "--list", "wt/half")
    report = ok_json(["worktree", "list"])
    assert report["worktrees"] == []
    assert [(d["kind"], d["name"]) for d in report["drift"]] == [("unknown", "half")]
    assert "already exists" in fails(["worktree", "add", "half", "--task", tid])
    repaired = ok_json(["worktree", "list", "--repair"])
    assert repaired["drift"] == [] and len(repaired["repaired"]) == 1
    assert not (repo / ".worktrees" / "half").exists()
    assert not git(repo, "branch", "--list", "wt/half")
    ok(["worktree", "add", "half", "--task", tid])
    assert ok_json(["worktree", "list"])["worktrees"][0]["task_id"] == tid


def test_repair_keeps_an_unknown_worktree_with_work(repo: Path) -> None:
    git(repo, "worktree", "add", "-q", "-b", "wt/stray", ".worktrees/stray")
    commit_file(repo / ".worktrees" / "stray", "s.txt", "s\n")
    report = ok_json(["worktree", "list", "--repair"])
    assert [d["kind"] for d in report["drift"]] == ["unknown"] and report["repaired"] == []
    assert (repo / ".worktrees" / "stray" / "s.txt").exists()
