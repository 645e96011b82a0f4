"""Shared set-up for the worktree tests: a real repository with a team and a Worktrees actor."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pykka
import pytest

from actors.factory import Team, open_team
from actors.worktrees.actor import WorktreesHandle
from tests.actors.cli.cli_support import git_repo


def git(root: Path, *args: str) -> str:
    """Plain git in ``root`` (the test's own calls, not the runtime's)."""
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def commit_file(root: Path, rel: str, text: str, message: str | None = None) -> str:
    """Write ``rel`` and commit it in ``root``; returns the commit id."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git(root, "add", rel)
    git(root, "commit", "-q", "-m", message or f"edit {rel}")
    return git(root, "rev-parse", "HEAD")


@dataclass
class Env:
    root: Path
    team: Team
    wt: WorktreesHandle

    def task(self, subject: str = "do it") -> str:
        return self.team.board.create(subject).id

    def claim(self, tid: str, owner: str = "w1") -> int:
        return self.team.board.claim(tid, owner).unwrap().epoch

    def complete(self, tid: str, owner: str = "w1") -> None:
        epoch = self.team.board.state.task(tid).epoch
        self.team.board.complete(tid, owner, epoch, "done")

    def status(self) -> tuple[str, str]:
        """(HEAD, ``git status --porcelain``) of the main checkout."""
        return git(self.root, "rev-parse", "HEAD"), git(self.root, "status", "--porcelain")


def make_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = git_repo(tmp_path, monkeypatch)
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    git(root, "checkout", "-q", "-b", "main")
    commit_file(root, "README.md", "hello\n", "initial")
    return root


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    root = make_repo(tmp_path, monkeypatch)
    team = open_team(root, actor="runtime")
    handle = WorktreesHandle.start(root, team.board)
    try:
        yield Env(root, team, handle)
    finally:
        pykka.ActorRegistry.stop_all()
        team.close()
