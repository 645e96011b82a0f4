"""``teamctl settings`` and the settings warnings and refusals of ``run`` and ``ask``, in-process
through ``CliRunner``, on a real git repository with ``HOME`` pointed into ``tmp_path``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from actors.cli.ask import ask_command
from harness.model.fakeapi import FakeMessagesServer
from tests.actors.cli.cli_support import fails, git_repo, ok, run


def claude_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A repository after ``teamctl init``, and the home folder ``HOME`` points at."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    root = git_repo(tmp_path, monkeypatch)
    (root / ".claude").mkdir()
    return root, home


def write(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value))
    return path


def warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("teamctl: warning: ")]


def test_settings_shows_each_rule_and_hook_with_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, home = claude_repo(tmp_path, monkeypatch)
    user = write(home / ".claude" / "settings.json", {"permissions": {"allow": ["Bash(ls *)"]}})
    project = write(
        root / ".claude" / "settings.json",
        {
            "statusLine": {"type": "command", "command": "x"},
            "permissions": {"deny": ["Read(./.env)"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"command": "guard.sh"}]}]},
        },
    )
    result = ok(["settings"])
    out = result.stdout
    assert (
        f"user     {user}" in out and f"local    {root}/.claude/settings.local.json  (none)" in out
    )
    assert f"allow Bash(ls *)  <- {user} (user)" in out
    assert f"deny  Read(./.env)  <- {project} (project)" in out
    assert f"PreToolUse [Bash]: guard.sh  <- {project} (project)" in out
    assert '"deny": [\n      "Read(./.env)"' in out  # the merged settings follow
    assert warning_lines(result.stderr) == [
        f"teamctl: warning: {project}: statusLine: a Claude Code setting teamctl does not "
        "implement (ignored)"
    ]

    report = json.loads(ok(["settings", "--json"]).stdout)
    assert [f["scope"] for f in report["files"]] == ["user", "project", "local", "team"]
    assert report["rules"] == [
        {"list": "allow", "rule": "Bash(ls *)", "file": str(user), "scope": "user"},
        {"list": "deny", "rule": "Read(./.env)", "file": str(project), "scope": "project"},
    ]
    assert report["hooks"][0]["command"] == "guard.sh" and report["hooks"][0]["file"] == str(
        project
    )
    assert report["settings"]["permissions"]["deny"] == ["Read(./.env)"]
    assert len(report["warnings"]) == 1


def test_settings_exits_2_with_one_line_on_a_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = claude_repo(tmp_path, monkeypatch)
    team = root / ".team" / "settings.json"
    team.write_text('{"permissions": {"allow": "Bash"}}')
    line = fails(["settings"], code=2)
    assert line.startswith(f"error: settings {team}: permissions.allow")


def test_run_prints_the_warnings_once_and_refuses_a_disabled_bypass_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, home = claude_repo(tmp_path, monkeypatch)
    write(home / ".claude" / "settings.json", {"includeCoAuthoredBy": False})
    script = tmp_path / "script.yaml"
    script.write_text('agents:\n  lead:\n    steps:\n      - {match: "^hello", text: "Hi."}\n')
    result = ok(["run", "--headless", "--script", str(script), "hello"])
    assert "[lead] Hi." in result.stdout
    assert len(warning_lines(result.stderr)) == 1
    assert "includeCoAuthoredBy" in warning_lines(result.stderr)[0]

    project = write(
        root / ".claude" / "settings.json",
        {"permissions": {"disableBypassPermissionsMode": "disable"}},
    )
    args = ["run", "--headless", "--script", str(script), "--permission-mode", "bypassPermissions"]
    refused = run([*args, "hello"])
    assert refused.exit_code == 1
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "bypassPermissions is disabled" in errors[0]
    assert str(project) in errors[0]


def test_a_claude_deny_rule_stops_a_command_that_team_settings_allow_even_in_bypass_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".claude").mkdir()
    (root / ".team").mkdir()
    (root / "build").mkdir()
    project = write(
        root / ".claude" / "settings.json",
        {"$schema": "x", "outputStyle": "Explanatory", "permissions": {"deny": ["Bash(rm *)"]}},
    )
    write(root / ".team" / "settings.json", {"permissions": {"allow": ["Bash"]}})
    script = {
        "agents": {
            "ask": {
                "steps": [
                    {"tool_uses": [{"name": "bash", "input": {"command": "rm -rf build"}}]},
                    {"match": "(?s)denied", "text": "rm was refused."},
                ]
            }
        }
    }
    with FakeMessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.chdir(root)
        result = CliRunner().invoke(
            ask_command,
            ["clean up", "--permission-mode", "bypassPermissions", "--output-format", "json"],
        )
        assert result.exit_code == 0, result.output
        assert server.script_errors == []
    assert (root / "build").is_dir()
    assert warning_lines(result.stderr) == [
        f"teamctl: warning: {project}: outputStyle: a Claude Code setting teamctl does not "
        "implement (ignored)"
    ]
