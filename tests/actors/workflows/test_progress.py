"""Workflow progress in the ``teamctl run`` console and headless text output: each
``workflow.*`` journal event (a ``team_event``) is one line, agent text escaped."""

from __future__ import annotations

import pytest

from actors.cli.run import _Printer

HOSTILE = "done \x1b[2J\x1b]0;PWNED\x07\r"


def _event(kind: str, **data: object) -> dict[str, object]:
    return {"type": "team_event", "seq": 1, "event": kind, "actor": "cli", "data": data}


def test_workflow_events_print_one_escaped_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    printer = _Printer("text")
    for event in (
        _event("workflow.phase", run_id="wf_1", title="audit"),
        _event("workflow.step_started", run_id="wf_1", key="k", name="rate a", task_id="task_3"),
        _event("workflow.step_cached", run_id="wf_1", key="j", name="rate b"),
        _event("workflow.step_completed", run_id="wf_1", key="k", name="rate a", result=1),
        _event("workflow.log", run_id="wf_1", text=HOSTILE + "\nsecond line"),
        _event("workflow.finished", run_id="wf_1", status="failed", error="boom"),
    ):
        printer(event)
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "[cli] workflow wf_1 phase: audit",
        "[cli] workflow wf_1 step rate a: started as task_3",
        "[cli] workflow wf_1 step rate b: cached",
        "[cli] workflow wf_1 step rate a: done",
        "[cli] workflow wf_1 log: done \\x1b[2J\\x1b]0;PWNED\\x07\\r\\nsecond line",
        "[cli] workflow wf_1 failed: boom",
    ]
    assert "\x1b" not in out and "\r" not in out
