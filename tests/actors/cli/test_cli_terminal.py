"""Output that fits where it goes: long texts cut with an ellipsis (``--full``/``task show``
whole), subject and message size limits, agent text escaped and never markup, ``--json`` exact,
and a closed pipe that ends quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.factory import open_team
from tests.actors.cli.cli_support import git_repo, ok, ok_json, run

HOSTILE = "x \x1b[2J\x1b]0;PWNED\x07 [red]red[/red] [link=https://evil.example]click[/link]\r"
ESCAPED = "x \\x1b[2J\\x1b]0;PWNED\\x07 [red]red[/red] [link=https://evil.example]click[/link]\\r"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return git_repo(tmp_path, monkeypatch)


def test_long_subjects_are_cut_in_the_table_and_whole_with_full_or_show(repo: Path) -> None:
    subject = "start " + "y" * 480 + " end"
    ok(["task", "add", subject, "-d", "line one\nline two"])
    table = ok(["tasks"]).stdout
    assert "start yyy" in table and "…" in table and " end" not in table
    assert max(len(line) for line in table.splitlines()) < 200
    assert subject in ok(["tasks", "--full"]).stdout
    shown = ok(["task", "show", "task_1"]).stdout
    assert subject in shown
    assert "line one" in shown and "line two" in shown and "\\n" not in shown


def test_a_subject_over_500_characters_is_refused_in_one_line(repo: Path) -> None:
    ok(["task", "add", "y" * 500])
    for args in (["task", "add", "z" * 501], ["task", "edit", "task_1", "--subject", "z" * 501]):
        result = run(args)
        assert result.exit_code == 1
        [line] = result.stderr.splitlines()
        assert "a task subject is at most 500 characters (this one has 501)" in line
        assert len(line) < 200
    assert [t["subject"] for t in ok_json(["tasks"])] == ["y" * 500]


def test_board_refuses_a_long_subject_for_agents_too(repo: Path) -> None:
    from actors.errors import TeamError

    with open_team(repo) as team:
        with pytest.raises(TeamError, match="at most 500 characters"):
            team.board.create("z" * 501)
        task = team.board.create("short")
        with pytest.raises(TeamError, match="at most 500 characters"):
            team.board.update(task.id, subject="z" * 501)


def test_a_message_over_the_size_limit_is_refused_in_one_line(repo: Path) -> None:
    result = run(["send", "lead", "x" * (1 << 20)])
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert "exceeds the limit of 1048576 bytes" in line and len(line) < 300
    assert ok_json(["inbox", "lead"]) == []


def test_agent_text_is_escaped_and_never_markup_in_every_table(repo: Path) -> None:
    ok(["task", "add", HOSTILE, "-d", HOSTILE])
    ok(["send", "lead", HOSTILE + "\nsecond line"])
    outputs = {
        "tasks": ok(["tasks"]).stdout,
        "task show": ok(["task", "show", "task_1"]).stdout,
        "events": ok(["events"]).stdout,
        "inbox": ok(["inbox", "lead"]).stdout,
        "inbox --full": ok(["inbox", "lead", "--full"]).stdout,
        "watch --once": ok(["watch", "--once"]).stdout,
        "task add": ok(["task", "add", HOSTILE]).stdout,
    }
    for name, out in outputs.items():
        assert "\x1b" not in out and "\x07" not in out and "\r" not in out, name
        assert "[red]red[/red]" in out, name  # shown as written, not turned into colour
        assert "\\x1b[2J" in out, name
    assert ESCAPED in outputs["task show"]
    assert "\\nsecond line" in outputs["inbox"]
    assert "\nsecond line" in outputs["inbox --full"].replace("│ ", "\n")


def test_json_output_stays_exact(repo: Path) -> None:
    ok(["task", "add", HOSTILE])
    ok(["send", "lead", HOSTILE])
    assert ok_json(["tasks"])[0]["subject"] == HOSTILE
    assert ok_json(["task", "show", "task_1"])["subject"] == HOSTILE
    assert ok_json(["inbox", "lead"])[0]["body"]["text"] == HOSTILE
    events = [json.loads(line) for line in ok(["events", "--json"]).stdout.splitlines()]
    assert any(e["data"].get("subject") == HOSTILE for e in events)


def test_ids_never_wrap_in_a_narrow_terminal_or_a_pipe(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(["task", "add", "a subject long enough to need more room " * 2])
    ok(["send", "lead", "a text long enough to need more room than there is " * 2])
    [message_id] = [m["id"] for m in ok_json(["inbox", "lead"])]
    for columns in (None, "60"):
        if columns is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", columns)
        assert message_id in ok(["inbox", "lead"]).stdout, columns
        assert "task_1" in ok(["tasks"]).stdout


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from actors.cli.main import main; main()", *args]


def test_a_closed_pipe_ends_quietly(repo: Path) -> None:
    with open_team(repo) as team:
        for n in range(40):  # ~400 KB of JSON: more than a pipe holds
            team.board.create(f"task {n}", "d" * 10_000)
    child = subprocess.Popen(
        _cli("events", "--json"),
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.readline()
    assert json.loads(first)["seq"] == 1
    child.stdout.close()  # `| head -1`: the reader goes away
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 141
    assert err == ""
