"""``teamctl ask``: the click command (prompt, ``--json-schema`` file, model client from the
environment, repository root), in-process through ``CliRunner``; the turn's logic is tested in
``tests/harness/test_headless.py``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from actors.cli import ask as ask_module
from actors.cli.ask import ask_command
from harness.model.fakeapi import FakeMessagesServer
from harness.model.scripted import Fault
from tests.support.fakes import FakeClock


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
                            {"name": "read_file", "input": {"path": "pkg/v.txt"}},
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
    settings.write_text(json.dumps({"bash_sandbox": {"no_such_field": 1}}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(ask_command, ["hello"])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: settings {settings}: ")
    assert "bash_sandbox.no_such_field" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


# -- empty prompts, refusals nobody can answer, waits, unreachable servers, rejected keys --------


def ask_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_url: str) -> Path:
    """A repository to ask in, with the fake API (or a dead port) as the model server."""
    (tmp_path / ".git").mkdir()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def on_fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    clock = FakeClock()
    monkeypatch.setattr(ask_module, "model_clock", lambda: clock)
    return clock


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize(("args", "stdin"), [([], ""), ([], " \n\n"), ([""], None), (["  "], None)])
def test_an_empty_prompt_is_a_usage_error_and_nothing_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], stdin: str | None
) -> None:
    with FakeMessagesServer({"agents": {"ask": {"steps": ["hi"]}}}) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(ask_command, args, input=stdin)
        assert result.exit_code == 2, result.output
        assert "the prompt is empty" in result.stderr
        assert server.requests == []


def test_a_write_nobody_can_approve_is_refused_with_how_to_allow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "agents": {
            "ask": {
                "steps": [
                    {
                        "tool_uses": [
                            {"name": "write_file", "input": {"path": "a.txt", "content": "x"}}
                        ]
                    },
                    "Could not write it.",
                ]
            }
        }
    }
    with FakeMessagesServer(script) as server:
        root = ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(ask_command, ["write a.txt"])  # stdin is not a terminal
        assert result.exit_code == 0, result.output
        assert result.stdout == "Could not write it.\n"
        [line] = [x for x in result.stderr.splitlines() if "refused" in x]
        assert line.startswith("teamctl ask: refused write_file(a.txt): ")
        assert "stdin is not a terminal" in line
        assert "--permission-mode acceptEdits" in line and '"Edit(a.txt)"' in line
        assert not (root / "a.txt").exists()


def test_a_shell_command_nobody_can_approve_names_the_allow_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "agents": {
            "ask": {
                "steps": [
                    {"tool_uses": [{"name": "bash", "input": {"command": "touch made.txt"}}]},
                    "No.",
                ]
            }
        }
    }
    with FakeMessagesServer(script) as server:
        root = ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(ask_command, ["touch it"])
        assert result.exit_code == 0, result.output
        assert '"Bash(touch:*)"' in result.stderr and "permissions.allow" in result.stderr
        assert not (root / "made.txt").exists()


def test_a_rate_limit_wait_is_one_line_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = on_fake_clock(monkeypatch)
    faults = [Fault(kind="rate_limit", retry_after=45)]
    with FakeMessagesServer({"agents": {"ask": {"steps": ["All good."]}}}, faults=faults) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(ask_command, ["hello"])
        base_url = server.base_url.rstrip("/")
    assert result.exit_code == 0, result.output
    assert result.stdout == "All good.\n"
    [line] = result.stderr.splitlines()
    assert line.startswith("teamctl ask: waiting 45s (until ")
    assert "rate limited" in line and base_url in line
    assert clock.sleeps == [45.0]  # waited on the injected clock, announced first


def test_waits_are_events_in_stream_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_fake_clock(monkeypatch)
    faults = [Fault(kind="rate_limit", retry_after=45)]
    with FakeMessagesServer({"agents": {"ask": {"steps": ["ok"]}}}, faults=faults) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(ask_command, ["hello", "--output-format", "stream-json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [wait] = [e for e in events if e.get("subtype") == "api_retry"]
    assert wait["type"] == "system" and wait["retry_delay_ms"] == 45_000
    assert wait["error_status"] == 429 and wait["until"].endswith("Z")
    assert wait["session_id"] == events[-1]["session_id"]
    assert "waiting 45s" in wait["message"]
    assert events[-1]["subtype"] == "success"
    assert result.stderr == ""


def test_an_unreachable_server_ends_the_ask_with_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = on_fake_clock(monkeypatch)
    base_url = f"http://127.0.0.1:{closed_port()}"
    ask_repo(tmp_path, monkeypatch, base_url)
    result = CliRunner().invoke(ask_command, ["hello"])
    assert result.exit_code == 1
    assert result.stdout == ""
    *waits, last = result.stderr.splitlines()
    assert last.startswith(
        f"teamctl ask: error_during_execution: cannot reach the Messages API at {base_url}"
    )
    assert waits and all(line.startswith("teamctl ask: waiting ") for line in waits)
    assert sum(clock.sleeps) == pytest.approx(20.0)  # the default connect timeout


def test_an_unreachable_server_gives_up_in_a_real_process(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    base_url = f"http://127.0.0.1:{closed_port()}"
    env = os.environ | {
        "ANTHROPIC_API_KEY": "",
        "ANTHROPIC_BASE_URL": base_url,
        "TEAMCTL_CONNECT_TIMEOUT": "1",
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "teamctl"), "ask", "hello"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert f"cannot reach the Messages API at {base_url}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("kind", "words"), [("authentication", "(401)"), ("permission", "(403)")])
def test_a_rejected_key_fails_the_ask_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, words: str
) -> None:
    clock = on_fake_clock(monkeypatch)
    faults = [Fault(kind=kind, times=9)]  # type: ignore[arg-type]
    with FakeMessagesServer({"agents": {"ask": {"steps": ["hi"]}}}, faults=faults) as server:
        ask_repo(tmp_path, monkeypatch, server.base_url)
        result = CliRunner().invoke(ask_command, ["hello"])
        assert len(server.requests) == 1
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("teamctl ask: error_during_execution: the API key ")
    assert words in line and "ANTHROPIC_API_KEY" in line
    assert clock.sleeps == []
