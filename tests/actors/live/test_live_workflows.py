"""Workflow progress in the live view (``teamctl watch``): phase changes, steps started, done
or cached and log lines, from the ``workflow.*`` events of a real journal; agent text escaped."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from actors.cli.main import cli
from actors.live.changes import ChangeLog, change_lines
from actors.live.load import LiveSource
from actors.live.render import render
from actors.workflows.record import Recorder
from tests.actors.live.live_support import new_team

HOSTILE = "x \x1b[2J\x1b]0;PWNED\x07 [red]red[/red]\r"
_SGR = re.compile(rb"\x1b\[[0-9;]*m")


def test_progress_of_a_run_is_told_line_by_line_and_escaped(tmp_path: Path) -> None:
    written: list[str] = []
    log = ChangeLog(written.append)
    with new_team(tmp_path) as team:
        source = LiveSource(team)
        log(source.load())
        rec = Recorder(team.board, "wf_1", "cli")
        rec.started("review", {"x": 1}, "/w/review.py", "h")
        rec.phase("audit")
        rec.step_cached("k1", name="first look", phase="audit")
        rec.step_started("k2", name="check speed", phase="audit", task_id="task_1", attempt=0)
        log(source.load())
        rec.step("k2", {"ok": True}, label=None, phase="audit", task_id="task_1", name="speed")
        rec.log(HOSTILE)
        rec.finished("completed", result=[1])
        log(source.load())
        snap = source.load()
    lines = [line[9:] for line in written]
    assert lines[1:] == [
        "workflow wf_1 (review) started",
        "workflow wf_1 phase: audit",
        "workflow wf_1 step first look: cached",
        "workflow wf_1 step check speed: started as task_1",
        "workflow wf_1 step speed: done",
        "workflow wf_1 log: x \\x1b[2J\\x1b]0;PWNED\\x07 [red]red[/red]\\r",
        "workflow wf_1 completed",
    ]
    [row] = snap.workflows
    assert (row.status, row.phase, row.done, row.running, row.cached) == (
        "completed",
        "audit",
        2,
        0,
        1,
    )
    # A first snapshot says where each run is, not its history.
    assert change_lines(None, snap)[1][9:] == (
        "workflow wf_1 (review) completed: 2 steps done, 0 running, phase audit"
    )


def test_render_shows_runs_with_escaped_text_and_watch_json_has_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with new_team(tmp_path) as team:
        rec = Recorder(team.board, "wf_2", "cli")
        rec.started("fan", None, "/w/fan.py", "h")
        rec.phase(HOSTILE)
        rec.step_started("k", name="rate a", phase=HOSTILE, task_id="task_1", attempt=0)
        snap = LiveSource(team).load()
        root = team.repo.root
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="truecolor", width=400).print(render(snap))
    raw = out.getvalue().encode()
    rest = _SGR.sub(b"", raw)
    assert b"\x1b" not in rest and b"\x07" not in rest and b"\r" not in rest
    plain = rest.decode()
    assert "workflow runs" in plain and "wf_2" in plain and "1 running" in plain
    assert "rate a: started as task_1" in plain
    assert "\\x1b[2J\\x1b]0;PWNED\\x07 [red]red[/red]" in plain

    monkeypatch.chdir(root)
    result = CliRunner().invoke(cli, ["watch", "--once", "--json"])
    assert result.exit_code == 0, result.output
    [run] = json.loads(result.output)["workflows"]
    assert (run["run_id"], run["status"], run["running"]) == ("wf_2", "running", 1)
    assert run["progress"][-1][1] == "workflow wf_2 step rate a: started as task_1"
