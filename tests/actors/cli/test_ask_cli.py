"""``teamctl ask``: the click command (prompt, ``--json-schema`` file, model client from the
environment, repository root), in-process through ``CliRunner``; the turn's logic is tested in
``tests/harness/test_headless.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from actors.cli.ask import ask_command
from harness.model.fakeapi import FakeMessagesServer


def test_an_invalid_schema_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "schema.json"
    bad.write_text(json.dumps({"type": "objekt"}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    result = CliRunner().invoke(ask_command, ["--json-schema", str(bad), "hello"])
    assert result.exit_code == 1
    assert "invalid JSON schema" in result.output and "Traceback" not in result.output


def test_ask_command_without_a_key_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    result = CliRunner().invoke(ask_command, ["hello"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "ANTHROPIC_API_KEY" in lines[0] and "teamctl demo" in lines[0]


def test_ask_command_end_to_end_through_the_fake_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "v.txt").write_text("version = 1\n")
    (tmp_path / ".team").mkdir()
    (tmp_path / ".team" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}})
    )
    script = {
        "agents": {
            "ask": {
                "steps": [
                    {
                        "tool_uses": [
                            {"name": "bash", "input": {"command": "rm -rf pkg"}},
                            {
                                "name": "edit_file",
                                "input": {
                                    "path": "pkg/v.txt",
                                    "old_string": "1",
                                    "new_string": "2",
                                },
                            },
                        ]
                    },
                    {
                        "match": "(?s)denied|refused|not allowed",
                        "text": "Bumped to 2; rm was refused.",
                    },
                ]
            }
        }
    }
    with FakeMessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.chdir(tmp_path / "pkg")
        result = CliRunner().invoke(
            ask_command,
            ["bump the version", "--permission-mode", "acceptEdits", "--output-format", "json"],
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["result"] == "Bumped to 2; rm was refused."
        assert (tmp_path / "pkg" / "v.txt").read_text() == "version = 2\n"
        assert (tmp_path / ".team" / "transcripts" / "ask.jsonl").exists()  # found the repo root
        assert server.script_errors == []


def test_a_bad_sandbox_setting_is_an_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".team").mkdir()
    settings = tmp_path / ".team" / "settings.json"
    settings.write_text(json.dumps({"sandbox": {"no_such_field": 1}}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(ask_command, ["hello"])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {settings}: ")
    assert "no_such_field" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
