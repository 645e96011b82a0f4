"""Verified tasks from a terminal: ``teamctl task add --verify``, shown by ``tasks`` and
``task show``, enforced by ``task complete --as`` and ``worktree merge`` (in-process, real git)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.actors.cli.cli_support import ok, ok_json, run
from tests.actors.worktrees.worktree_support import commit_file, git, make_repo


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return make_repo(tmp_path, monkeypatch)


def test_add_shows_and_completion_waits_for_the_command(repo: Path) -> None:
    added = ok(["task", "add", "write done", "--verify", "test -f done.txt"]).stdout
    assert "verified by: test -f done.txt" in added
    data = ok_json(["task", "show", "task_1"])
    assert data["verify"] == "test -f done.txt" and data["verified"] is None
    ok(["task", "claim", "task_1", "--as", "ann"])

    refused = run(["task", "complete", "task_1", "--as", "ann"])
    assert refused.exit_code == 1
    assert "task_1 was not completed" in refused.stderr and "exited 1" in refused.stderr
    assert ok_json(["task", "show", "task_1"])["status"] == "in_progress"
    assert "last run failed" in ok(["task", "show", "task_1"]).stdout

    (repo / "done.txt").write_text("yes\n")
    assert "ann completed task_1" in ok(["task", "complete", "task_1", "--as", "ann"]).stdout
    shown = ok_json(["task", "show", "task_1"])
    assert shown["status"] == "completed" and shown["verified"] is True
    assert "test -f done.txt (passed)" in ok(["tasks", "--full"]).stdout


def test_an_agent_written_command_is_escaped(repo: Path) -> None:
    added = ok(["task", "add", "x", "--verify", "make\x1b[2J test"]).stdout
    assert "make\\x1b[2J test" in added
    for args in (["tasks"], ["task", "show", "task_1"]):
        out = ok(args).stdout
        assert "\x1b" not in out and "make\\x1b[2J test" in out


def test_worktree_merge_refuses_a_failing_merge_result(repo: Path) -> None:
    ok(["task", "add", "feature", "--verify", "test -f ok.txt"])
    ok(["worktree", "add", "feat", "--task", "task_1"])
    path = repo / ".worktrees" / "feat"
    commit_file(path, "f.txt", "f\n")
    ok(["task", "claim", "task_1", "--as", "ann"])
    (path / "ok.txt").write_text("only uncommitted in the worktree\n")
    ok(["task", "complete", "task_1", "--as", "ann"])  # passes in the worktree
    (path / "ok.txt").unlink()  # never committed: the merge result lacks it
    head = git(repo, "rev-parse", "main")

    result = run(["worktree", "merge", "feat"])
    assert result.exit_code == 1
    assert "not merged" in result.stderr and "test -f ok.txt" in result.stderr
    assert "main was not changed" in result.stderr
    assert git(repo, "rev-parse", "main") == head and not (repo / "f.txt").exists()

    commit_file(path, "ok.txt", "ok\n")
    merged = ok(["worktree", "merge", "feat"]).stdout
    assert "fast-forward, verified" in merged and (repo / "ok.txt").exists()


def test_the_merge_check_runs_in_the_teams_sandbox(repo: Path) -> None:
    from harness.shell.sandbox import probe_bwrap

    if not probe_bwrap().available:
        pytest.skip("bubblewrap cannot run here")
    settings = json.loads((repo / ".team" / "settings.json").read_text())
    settings["bash_sandbox"] = {"enabled": True}
    (repo / ".team" / "settings.json").write_text(json.dumps(settings))
    # Only inside the sandbox's own PID namespace is the shell one of the first processes.
    ok(["task", "add", "feature", "--verify", 'test "$$" -le 3'])
    ok(["worktree", "add", "feat", "--task", "task_1"])
    commit_file(repo / ".worktrees" / "feat", "f.txt", "f\n")
    ok(["task", "claim", "task_1", "--as", "ann"])
    ok(["task", "complete", "task_1", "--as", "ann"])
    assert "verified" in ok(["worktree", "merge", "feat"]).stdout
