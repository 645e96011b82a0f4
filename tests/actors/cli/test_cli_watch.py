"""``teamctl watch``, in-process against a real repository."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pytest

from actors.factory import open_team
from mailboxes.messages import MessageDraft
from tests.actors.cli.cli_support import git_repo, ok, ok_json, run
from tests.actors.live.live_support import populate


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return git_repo(tmp_path, monkeypatch)


def test_once_json_is_the_snapshot(repo: Path) -> None:
    ok(["task", "add", "first"])
    ok(["task", "add", "second", "--blocked-by", "task_1"])
    ok(["task", "claim", "task_1", "--as", "kim"])
    ok(["send", "lead", "hello"])
    doc = ok_json(["watch", "--once"])
    assert doc["team"] == "repo"
    assert [(t["id"], t["column"], t["owner"]) for t in doc["tasks"]] == [
        ("task_1", "in_progress", "kim"),
        ("task_2", "blocked", None),
    ]
    assert [(m["name"], m["kind"], m["task_id"]) for m in doc["members"]] == [
        ("kim", "human", "task_1")
    ]
    assert doc["unread"]["lead"] == 1
    assert doc["jobs"] == [] and doc["crons"] == [] and doc["worktrees"] == []


def test_once_prints_the_view(repo: Path) -> None:
    with open_team(repo) as team:
        populate(team)
        team.mailbox.deliver("cli", MessageDraft.text("lead", "three"))
    out = ok(["watch", "--once"]).stdout
    assert out.startswith("team repo  journal seq ")
    for word in ("alice", "waiting_permission", "task_4", "cleanup", "lead 3", "job_run", "wt-api"):
        assert word in out


def test_json_without_once_is_a_usage_error(repo: Path) -> None:
    result = run(["watch", "--json"])
    assert result.exit_code == 2
    assert "--json needs --once" in result.stderr


def test_outside_a_team_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo(tmp_path, monkeypatch, init=False)
    result = run(["watch", "--once"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr


class _Reader:
    """Reads a child's stdout on a thread; ``until(text)`` waits for ``text`` to appear."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.data = b""
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):
            with self._cond:
                self.data += chunk
                self._cond.notify_all()

    def until(self, text: str, timeout: float = 20.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: text.encode() in self.data, timeout)

    def join(self) -> None:
        self._thread.join(20.0)


def test_live_process_redraws_on_a_write_and_exits_cleanly_on_ctrl_c(repo: Path) -> None:
    code = "from actors.cli.main import main; main()"
    env = {**os.environ, "COLUMNS": "120"}
    child = subprocess.Popen(
        [sys.executable, "-c", code, "watch"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        out = _Reader(child.stdout)
        # Not a terminal: an append-only log, one line per change, never a redrawn panel.
        assert out.until("team repo at journal seq"), out.data
        ok(["task", "add", "written by another process"])
        assert out.until("task_1 added [ready]: written by another process\n"), out.data
        ok(["task", "claim", "task_1", "--as", "kim"])
        assert out.until("task_1 ready -> in progress (kim, human)"), out.data
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    out.join()
    assert child.returncode == 0, err
    assert b"Traceback" not in err and b"interrupted" not in err
    lines = out.data.decode().splitlines()
    assert not any("journal seq" in line for line in lines[1:]), lines  # no second snapshot
    assert all("\x1b" not in line and len(line) < 200 for line in lines), lines
