"""teamctl basics in-process: init, repository discovery, the error edge, status, settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.cli.main import cli
from tests.actors.cli.cli_support import fails, git_repo, ok, ok_json, run


def test_help_lists_the_commands() -> None:
    out = ok(["--help"]).stdout
    for name in ("init", "tasks", "task", "send", "inbox", "events", "replay", "journal", "status"):
        assert name in out


def test_not_a_git_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert "not a git repository" in fails(["tasks"])
    assert "not a git repository" in fails(["init"])


def test_team_missing_says_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo(tmp_path, monkeypatch, init=False)
    for args in (["tasks"], ["status"], ["send", "lead", "hi"], ["events"], ["journal", "check"]):
        line = fails(args)
        assert "`.team/` missing" in line and "teamctl init" in line


def test_init_creates_the_layout_and_is_idempotent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch, init=False)
    first = ok(["init"]).stdout
    assert "initialised team 'repo'" in first
    team = root / ".team"
    for sub in ("mailboxes/lead/new", "members", "transcripts", "jobs", "outputs"):
        assert (team / sub).is_dir(), sub
    assert json.loads((team / "settings.json").read_text())["team"]["max_teammates"] == 8
    exclude = (root / ".git" / "info" / "exclude").read_text().splitlines()
    assert [e for e in exclude if e.startswith(".")] == [".team/", ".tasks/", ".worktrees/"]
    assert not (root / ".gitignore").exists()
    journal = (team / "journal.jsonl").read_bytes()
    assert journal.count(b"\n") == 1 and b'"team.created"' in journal
    assert json.loads((team / "team.json").read_text())["team"] == "repo"

    second = ok(["init"]).stdout
    assert "already initialised" in second
    assert (team / "journal.jsonl").read_bytes() == journal
    assert (root / ".git" / "info" / "exclude").read_text().splitlines() == exclude
    events = [json.loads(line) for line in ok(["events", "--json"]).stdout.splitlines()]
    assert [e["type"] for e in events] == ["team.created"]


def test_every_command_works_from_a_sub_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    deep = root / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    ok(["task", "add", "from below"])
    assert (root / ".tasks" / "task_1.json").is_file()
    assert not (deep / ".team").exists()
    assert ok_json(["tasks"])[0]["subject"] == "from below"
    ok(["send", "lead", "hi"])
    assert ok_json(["inbox", "lead"])[0]["body"] == {"text": "hi"}
    assert ok_json(["status"])["tasks"]["pending"] == 1


def test_status_shows_tasks_members_and_inboxes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch)
    ok(["task", "add", "a"])
    ok(["task", "add", "b", "--blocked-by", "task_1"])
    ok(["send", "lead", "hello"])
    human = ok(["status"]).stdout
    assert "members: none yet" in human
    assert "pending 2" in human and "ready 1" in human
    status = ok_json(["status"])
    assert status["tasks"] == {"pending": 2, "ready": 1}
    assert status["members"] == []
    assert status["inboxes"] == {"lead": 1}
    ok(["task", "claim", "task_1", "--as", "ann"])
    members = ok_json(["status"])["members"]
    assert members == [
        {
            "name": "ann",
            "kind": "human",
            "role": "human",
            "status": "active",
            "tokens": 0,
            "cost_usd": 0.0,
        }
    ]


def test_settings_typo_is_one_line_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    (root / ".team" / "settings.json").write_text('{"team": {"max_teamates": 3}}')
    line = fails(["settings"], code=2)
    assert "unknown key 'team.max_teamates'" in line and "settings.json" in line
    assert "team.max_teamates" in fails(["init"])
    result = run(["status"])  # status still answers, with the warning
    assert result.exit_code == 0
    assert "warning: settings" in result.stderr and "team.max_teamates" in result.stderr


def test_settings_env_file_is_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo(tmp_path, monkeypatch)
    extra = tmp_path / "extra.json"
    extra.write_text('{"team": {"max_teammates": 2}}')
    monkeypatch.setenv("TEAMCTL_SETTINGS", str(extra))
    assert json.loads(ok(["settings", "--json"]).stdout)["settings"]["team"]["max_teammates"] == 2


def test_debug_shows_the_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo(tmp_path, monkeypatch)
    from click.testing import CliRunner

    from actors.errors import UnknownTask

    result = CliRunner().invoke(cli, ["--debug", "task", "show", "task_9"])
    assert isinstance(result.exception, UnknownTask)


def test_usage_errors_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo(tmp_path, monkeypatch)
    assert run(["task", "claim", "task_1"]).exit_code == 2  # --as missing
    assert run(["task", "edit", "task_1"]).exit_code == 2  # nothing to change
    assert run(["nonsense"]).exit_code == 2


def test_a_bad_member_name_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo(tmp_path, monkeypatch)
    ok(["task", "add", "a"])
    assert "invalid agent name" in fails(["task", "claim", "task_1", "--as", "../x"])
    assert ok_json(["tasks"])[0]["owner"] is None
