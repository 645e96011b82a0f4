"""The live status of ``teamctl run``'s console: one line of who works on what, redrawn from the
runtime's events (``LiveFeed``), and ``/watch`` for the whole panel."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest

from actors.cli.run import _console, _Printer, _run, _StatusLine, _tee, status_line
from actors.live.load import LiveSource
from actors.live.snapshot import MemberRow, Snapshot, TaskRow
from actors.scenarios.demo import LiveFeed
from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from tests.actors.cli.cli_support import git_repo
from tests.actors.runtime.runtime_support import Gate, runtime, stop_actors, stuck_tool, tools_with

__all__ = ["stop_actors"]


def _member(name: str, status: str, task: str | None = None, wt: str | None = None) -> MemberRow:
    return MemberRow(name, "agent", "general", status, "", True, task, None, wt, 0)


def _task(tid: str, column: Any) -> TaskRow:
    status = {"ready": "pending", "in_progress": "in_progress", "completed": "completed"}[column]
    return TaskRow(tid, tid, status, column, None, False, (), (), (), None, "none", 0)


def test_status_line_names_who_works_on_what_and_counts_tasks() -> None:
    snap = Snapshot(
        team="t",
        seq=9,
        members=(
            _member("lead", "idle"),
            _member("ada", "working", "task_1", "cart"),
            _member("ben", "working", "task_2"),
            _member("old", "stopped"),
        ),
        tasks=(
            _task("task_1", "in_progress"),
            _task("task_2", "in_progress"),
            _task("task_3", "ready"),
            _task("task_4", "completed"),
        ),
    )
    assert status_line(snap) == (
        "── lead idle · ada working on task_1 in cart · ben working on task_2 · "
        "tasks 2 in progress, 1 ready, 0 blocked, 1 done ──"
    )


class _Lines:
    """Status lines as printed, with a way to wait for one."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.changed = threading.Condition()

    def __call__(self, text: str) -> None:
        with self.changed:
            self.items.append(text)
            self.changed.notify_all()

    def wait_for(self, part: str, timeout: float = 30) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: any(part in x for x in self.items), timeout)


def test_the_status_line_follows_the_team_on_its_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_actors: list[Any]
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    gate = Gate()
    script = {
        "agents": {
            "lead": {"rules": [{"match": "(?s).", "text": "ok"}]},
            "w1": {
                "rules": [
                    {
                        "match": "You now hold task task_1",
                        "tool_uses": [
                            {"name": "stuck", "input": {}},
                            {"name": "complete_task", "input": {"task_id": "task_1"}},
                        ],
                    },
                    {"match": "(?s).", "text": "done", "priority": -1},
                ]
            },
        }
    }
    printer = _Printer("text")
    lines = _Lines()
    monkeypatch.setattr(printer, "line", lines)
    feed = LiveFeed(_StatusLine(printer, styled=False))
    rt = runtime(
        root,
        ScriptedModel(script),
        tools=tools_with(stuck_tool(gate)),
        on_event=_tee(printer, feed),
    )
    stop_actors.append(rt)
    rt.start()
    feed.attach(LiveSource(rt.team))
    assert lines.wait_for("── lead")
    rt.board.create("slow work")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert gate.entered.wait(30)
    assert lines.wait_for("w1 working on task_1 · tasks 1 in progress, 0 ready")
    gate.release.set()
    assert rt.wait_idle(timeout=30)
    feed.close()
    assert "w1 idle · tasks 0 in progress, 0 ready, 0 blocked, 1 done" in lines.items[-1]
    pairs = zip(lines.items, lines.items[1:], strict=False)
    assert all(a != b for a, b in pairs)  # printed again only when it changed


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_run_in_a_terminal_shows_the_status_line_and_watch_prints_the_panel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    git_repo(tmp_path, monkeypatch)
    script = tmp_path / "script.yaml"
    script.write_text('agents:\n  lead:\n    rules:\n      - {match: "(?s).", text: "Hi."}\n')
    monkeypatch.setattr("sys.stdin", _Tty("/watch\n/quit\n"))
    code = _run(
        None,
        headless=False,
        output_format="text",
        model=None,
        permission_mode=None,
        script=script,
        timeout=None,
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "── lead " in out and "tasks 0 in progress" in out  # stdout is no terminal: plain
    assert "\x1b[" not in out
    assert "team " in out and "journal seq" in out  # the /watch panel


def test_the_console_without_a_feed_still_watches(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stop_actors: list[Any],
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    rt = runtime(root, ScriptedModel({"agents": {}}))
    stop_actors.append(rt)
    rt.start()
    monkeypatch.setattr("sys.stdin", io.StringIO("/watch\n/quit\n"))
    _console(rt)
    assert "journal seq" in capsys.readouterr().out
