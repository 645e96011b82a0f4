"""``teamctl ask --goal / --goal-check`` against the local fake Messages API: the turn goes on
until the goal holds, stops at the cap of blocked stops, and never ends as a success when the
evaluator fails or judges the goal impossible (the README's "Goals")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from actors.cli.ask import ask_command
from harness.goal import GOAL_SYSTEM
from harness.model.fakeapi import FakeMessagesServer
from harness.transcript import load_transcript


def ask_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_url: str) -> Path:
    (tmp_path / ".git").mkdir()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
    monkeypatch.chdir(tmp_path)
    return tmp_path


STOPS_THEN_CREATES = {
    "agents": {
        "ask": {
            "steps": [
                "All done, nothing else to do.",
                {
                    "match": r"goal check `test -f done.txt` failed",
                    "tool_uses": [
                        {"name": "write_file", "input": {"path": "done.txt", "content": "ok\n"}}
                    ],
                },
                "Created done.txt.",
            ]
        }
    }
}


def test_a_goal_check_keeps_the_turn_going_until_it_passes_as_a_subprocess(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    with FakeMessagesServer(STOPS_THEN_CREATES) as server:
        env = {**os.environ, "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": server.base_url}
        proc = subprocess.run(
            [
                str(Path(sys.executable).parent / "teamctl"),
                "ask",
                "--goal-check",
                "test -f done.txt",
                *("--permission-mode", "acceptEdits", "--output-format", "json", "make done.txt"),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        calls = len(server.requests)
        errors = server.script_errors
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["subtype"] == "success" and result["result"] == "Created done.txt."
    assert result["goal"]["state"] == "met" and result["goal"]["evaluations"] == 2
    assert (tmp_path / "done.txt").read_text() == "ok\n"
    assert calls == 3 and errors == []
    records = load_transcript(tmp_path / ".team" / "transcripts" / "ask.jsonl").goal
    assert [(k, f.get("state")) for k, f in records] == [
        ("goal.set", None),
        ("goal.evaluated", "active"),
        ("goal.evaluated", "met"),
    ]
    assert "test -f done.txt" in records[1][1]["reason"]


def test_the_check_output_is_what_the_model_reads_and_runs_without_the_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "agents": {
            "ask": {
                "steps": [
                    "Stopping.",
                    {"match": r"KEY=<>\n", "text": "I see the check's output."},
                ]
            }
        }
    }
    with FakeMessagesServer(script) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
        check = 'echo "KEY=<$ANTHROPIC_API_KEY>"; test -f never'
        result = CliRunner().invoke(
            ask_command, ["--goal-check", check, "--goal-max-blocks", "1", "go"]
        )
        errors = server.script_errors
    assert errors == []
    assert result.exit_code == 4, result.output  # blocked once, then the cap
    assert "sk-secret" not in result.output


def test_an_unreachable_check_stops_at_the_cap_with_a_non_zero_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {"agents": {"ask": {"rules": [{"match": ".*", "text": "I give up for now."}]}}}
    with FakeMessagesServer(script) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(
            ask_command, ["--goal-check", "false", "--goal-max-blocks", "2", "do the impossible"]
        )
        calls = len(server.requests)
    assert result.exit_code == 4
    assert result.stdout == ""
    assert "error_goal_unmet: goal not met after 2 blocked stops (the cap)" in result.stderr
    assert calls == 3  # the first stop and two blocked ones: no evaluator call (no --goal)


def test_max_turns_bounds_a_goal_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = {"agents": {"ask": {"rules": [{"match": ".*", "text": "Stopping."}]}}}
    with FakeMessagesServer(script) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(
            ask_command,
            ["--goal-check", "false", "--max-turns", "2", "--output-format", "json", "go"],
        )
        calls = len(server.requests)
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["subtype"] == "error_max_turns" and out["goal"]["state"] == "active"
    assert calls == 2


def evaluator(*answers: Any) -> dict[str, Any]:
    return {"steps": list(answers)}


def test_the_evaluator_blocks_then_accepts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = {
        "agents": {
            "ask": {
                "steps": [
                    "I think it is fine.",
                    {"match": "Not done yet.*README lacks a title", "text": "Added the title."},
                ]
            },
            "ask.goal": evaluator(
                '{"ok": false, "reason": "README lacks a title", "impossible": false}',
                {"match": "Added the title", "text": '```json\n{"ok": true, "reason": "ok"}\n```'},
            ),
        }
    }
    with FakeMessagesServer(script) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(
            ask_command, ["--goal", "README has a title", "--output-format", "json", "fix it"]
        )
        goal_calls = [r for r in server.requests if r.agent == "ask.goal"]
        errors = server.script_errors
    assert errors == []
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["result"] == "Added the title." and out["goal"]["evaluations"] == 2
    assert len(goal_calls) == 2
    first = goal_calls[0].body
    assert first["system"][0]["text"] == GOAL_SYSTEM and "tools" not in first
    assert "README has a title" in json.dumps(first["messages"])


def test_an_impossible_goal_stops_non_zero_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "agents": {
            "ask": {"steps": ["Done."]},
            "ask.goal": evaluator(
                '{"ok": false, "reason": "there is no network here", "impossible": true}'
            ),
        }
    }
    with FakeMessagesServer(script) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(ask_command, ["--goal", "deploy to prod", "deploy"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "teamctl ask: error_goal_impossible: goal impossible: there is no network here\n"
    )


def test_an_evaluator_error_stops_non_zero_never_as_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "agents": {
            "ask": {"steps": ["Done."]},
            "ask.goal": evaluator({"fault": {"kind": "authentication"}, "text": "{}"}),
        }
    }
    with FakeMessagesServer(script) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(
            ask_command, ["--goal", "tests pass", "--output-format", "json", "go"]
        )
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["subtype"] == "error_goal_evaluator" and out["is_error"] is True
    assert out["result"].startswith("goal evaluator error: ")
    assert out["goal"]["state"] == "error"


def test_unparseable_evaluator_output_is_retried_once_then_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "agents": {
            "ask": {"steps": ["Done."]},
            "ask.goal": evaluator("Looks good to me!", "Yes, definitely."),
        }
    }
    with FakeMessagesServer(script) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(ask_command, ["--goal", "tests pass", "go"])
        retry = [r for r in server.requests if r.agent == "ask.goal"][1].body
    assert result.exit_code == 1
    assert "error_goal_evaluator: goal evaluator error: unparseable answer after a retry" in (
        result.stderr
    )
    assert "That is not the JSON asked for" in json.dumps(retry["messages"])


def test_resume_goes_on_judging_the_recorded_goal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = {"agents": {"ask": {"rules": [{"match": ".*", "text": "Stopping."}]}}}
    with FakeMessagesServer(first) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(
            ask_command, ["--goal-check", "test -f done.txt", "--max-turns", "1", "go"]
        )
    assert result.exit_code == 1  # max turns, goal still active
    (tmp_path / "done.txt").write_text("made by hand\n")
    with FakeMessagesServer({"agents": {"ask": {"steps": ["Checked."]}}}) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        result = CliRunner().invoke(
            ask_command, ["--resume", "--output-format", "json", "continue"]
        )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["goal"]["check"] == "test -f done.txt" and out["goal"]["state"] == "met"
