"""Stop means pause (issue 12 items 1, 2 and 13): the real ``teamctl run`` in a pseudo-terminal,
stopped in the middle of a team run by Ctrl-C, SIGTERM or ``/quit``; then ``teamctl resume
--headless`` finishes every task exactly once.

The first run's teammates claim a task each and end their turn without finishing it ("waiting for
a go"), so the run is still going (two ready tasks left) when the test stops it: that moment is
read from the run's own output, never from a timer. The resume's script finishes every brief.

Each case runs twice: with the scripted model inside ``teamctl`` (``TEAMCTL_SCRIPT``), and with
``teamctl`` talking through the real ``anthropic`` SDK to the local fake Messages API on loopback
(``ANTHROPIC_BASE_URL``), as against an Anthropic-compatible server.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.factory import init_team, open_team
from tests.e2e.team_support import TEAMCTL, ModelEnv, model_env, oracle, teamctl, write_script
from tests.support.oracle import check_repository

SUBJECTS = ("one", "two", "three", "four")
_NOTED = [
    {"match": "(?s).", "text": "Noted.", "priority": -1},
    {"match": "^$", "text": "Noted.", "priority": -2},
]
FIRST_RUN: dict[str, Any] = {
    "agents": {
        "lead": {
            "rules": [
                {
                    "match": "^Build four things",
                    "text": "Splitting the work.",
                    "tool_uses": [
                        *({"name": "create_task", "input": {"subject": s}} for s in SUBJECTS),
                        {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "Work."}},
                        {"name": "spawn_teammate", "input": {"name": "w2", "prompt": "Work."}},
                    ],
                },
                *_NOTED,
            ]
        },
        "*": {"rules": [{"match": "(?s).", "text": "Waiting for a go."}]},
    }
}
RESUME: dict[str, Any] = {
    "agents": {
        "lead": {"rules": _NOTED},
        "*": {
            "rules": [
                {
                    "match": r"You now hold task (?P<id>task_\d+) \(claim",
                    "tool_uses": [
                        {
                            "name": "complete_task",
                            "input": {"task_id": "{id}", "summary": "did {id}"},
                        }
                    ],
                },
                {"match": "(?s).", "text": "Finished.", "priority": -1},
                {"match": "^$", "text": "Finished.", "priority": -2},
            ]
        },
    }
}


def _repo(tmp_path: Path) -> Path:
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README.md").write_text("base\n")
    subprocess.run([*git, "add", "README.md"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=root, check=True)
    init_team(root)
    # The teammates wait for a go holding their tasks: no reminder, no release.
    settings = root / ".team" / "settings.json"
    merged = json.loads(settings.read_text())
    merged["team"]["task_reminders"] = None
    settings.write_text(json.dumps(merged))
    return root


class Terminal:
    """``teamctl ARGS`` on a pseudo-terminal (its controlling terminal, so Ctrl-C is a SIGINT
    from the line discipline, as at a keyboard); its output read line by line."""

    def __init__(self, root: Path, args: list[str], model: dict[str, str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}
        env.update(model)
        env["COLUMNS"] = "200"
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec at once
            try:
                os.chdir(root)
                os.execve(TEAMCTL, [TEAMCTL, *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.lines: list[str] = []
        self._rest = b""

    def read_until(self, done: Callable[[list[str]], bool], timeout_s: float = 60.0) -> None:
        """Read output until ``done(lines)`` holds (fails on EOF or ``timeout_s`` of silence)."""
        while not done(self.lines):
            assert self._read(timeout_s), f"no more output; so far:\n{self.text()}"

    def _read(self, timeout_s: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if not ready:
            raise AssertionError(f"silent for {timeout_s} s; so far:\n{self.text()}")
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            chunk = b""
        if not chunk:
            return False
        *whole, self._rest = (self._rest + chunk).split(b"\n")
        self.lines += [line.decode("utf-8", "replace").rstrip("\r") for line in whole]
        return True

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)

    def finish(self, timeout_s: float = 60.0) -> int:
        """Read to the end; the exit code."""
        while self._read(timeout_s):
            pass
        if self._rest:
            self.lines.append(self._rest.decode("utf-8", "replace").rstrip("\r"))
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def text(self) -> str:
        return "\n".join(self.lines[-60:])

    def json_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.lines:
            if line.startswith("{"):
                out.append(json.loads(line))
        return out


def _both_waiting_json(lines: list[str]) -> bool:
    ends = set()
    for line in lines:
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("type") == "turn_end" and event.get("text") == "Waiting for a go.":
                ends.add(event["agent"])
    return ends == {"w1", "w2"}


def _both_waiting_text(lines: list[str]) -> bool:
    return all(
        any(line.startswith(f"[{n}] Waiting for a go.") for line in lines) for n in ("w1", "w2")
    )


def _agents_served(model: ModelEnv) -> set[str]:
    """The agents whose model calls reached the fake API (every one answered from the script)."""
    assert model.server is not None
    assert model.server.script_errors == []
    return {r.agent for r in model.server.requests}


@pytest.mark.parametrize("via", ["script", "api"])
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "quit"])
def test_stopping_a_team_run_midway_then_resume_finishes_every_task_exactly_once(
    tmp_path: Path, how: str, via: str
) -> None:
    root = _repo(tmp_path)
    first = write_script(tmp_path / "first.yaml", FIRST_RUN)
    if how == "quit":  # the console: a person at the terminal types /quit
        args = ["run", "Build four things"]
    else:
        args = ["run", "--headless", "--output-format", "stream-json", "Build four things"]
    with model_env(first, via_api=via == "api") as model:
        term = Terminal(root, args, model.env)
        try:
            term.read_until(_both_waiting_text if how == "quit" else _both_waiting_json)
            if how == "ctrl-c":
                term.type(b"\x03")  # the terminal's interrupt character: SIGINT to the run
            elif how == "sigterm":
                os.kill(term.pid, signal.SIGTERM)
            else:
                term.type(b"/quit\n")
            code = term.finish()
        finally:
            term.kill()
        if via == "api":
            assert _agents_served(model) == {"lead", "w1", "w2"}
    expected = {"ctrl-c": 130, "sigterm": 130, "quit": 0}[how]
    assert code == expected, term.text()
    if how != "quit":
        result = term.json_lines()[-1]
        assert result["type"] == "result", term.text()
        assert (result["subtype"], result["is_error"], result["exit_code"]) == (
            "error_interrupted",
            True,
            130,
        )

    # Paused, not retired: every member kept its claim, nothing was released.
    with open_team(root) as team:
        state = team.state()
        events = list(team.journal.read_from(1))
    assert {m.name: m.status for m in state.members.values()} == {
        "lead": "paused",
        "w1": "paused",
        "w2": "paused",
    }
    held = {t.owner: t.id for t in state.tasks.values() if t.status == "in_progress"}
    assert set(held) == {"w1", "w2"}, state.tasks
    assert not any(e.type in ("task.released", "member.stopped") for e in events)
    assert check_repository(root) == []

    resume = write_script(tmp_path / "resume.yaml", RESUME)
    with model_env(resume, via_api=via == "api") as model:
        proc = teamctl(
            root, "resume", "--headless", "--output-format", "stream-json", env_extra=model.env
        )
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        if via == "api":
            assert {"w1", "w2"} <= _agents_served(model), err
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    resumed = next(e for e in lines if e["type"] == "resumed")
    assert {m["name"]: m["task_id"] for m in resumed["members"]} == {
        "lead": None,
        **{owner: tid for owner, tid in held.items()},
    }
    assert (lines[-1]["type"], lines[-1]["subtype"], lines[-1]["is_error"]) == (
        "result",
        "success",
        False,
    )

    with open_team(root) as team:
        state = team.state()
        events = list(team.journal.read_from(1))
    assert [t.status for t in state.tasks.values()] == ["completed"] * 4
    for kind in ("task.created", "task.claimed", "task.completed"):
        ids = sorted(str(e.data["task_id"]) for e in events if e.type == kind)
        assert ids == ["task_1", "task_2", "task_3", "task_4"], (kind, ids)
    assert not any(e.type == "task.released" for e in events)
    for owner, tid in held.items():  # each paused claim was finished by its holder
        assert state.tasks[tid].owner == owner
    assert check_repository(root, require_live_owners=True) == []
    oracle(root)
