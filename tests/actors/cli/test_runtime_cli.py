"""``teamctl run``/``stop`` at the CLI edge, in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from tests.actors.cli.cli_support import git_repo, ok, run
from tests.actors.runtime.runtime_support import runtime, stop_actors

__all__ = ["stop_actors"]


def test_run_without_an_api_key_says_how_to_get_going(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch)
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "TEAMCTL_SCRIPT"):
        monkeypatch.delenv(var, raising=False)
    result = run(["run", "--headless", "hello"])
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "ANTHROPIC_API_KEY" in lines[0] and "teamctl demo" in lines[0]


def test_run_headless_with_a_script_file_prints_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch)
    script = tmp_path / "script.yaml"
    script.write_text(
        'agents:\n  lead:\n    steps:\n      - {match: "^hello", text: "Hi there."}\n'
    )
    result = ok(["run", "--headless", "--script", str(script), "hello"])
    assert "[lead] Hi there." in result.stdout
    assert "team idle" in result.stdout


def test_stop_asks_a_hosted_teammate_and_force_records_an_unhosted_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_actors: list[Any]
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    rt = runtime(
        root, ScriptedModel({"agents": {"lead": {"rules": [{"match": "(?s).", "text": "ok"}]}}})
    )
    stop_actors.append(rt)
    rt.start()
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    rt.services.spawn_teammate(TeammateSpec(name="w2"), by="lead")
    assert "asked w1 to shut down" in ok(["stop", "w1"]).stdout
    assert rt.wait_until(lambda: rt.board.refresh().members["w1"].status == "stopped", 30)
    assert "stop it now" in ok(["stop", "w2", "--force"]).stdout
    assert rt.wait_until(lambda: rt.board.refresh().members["w2"].status == "stopped", 30)
    stopped = {
        e.data["name"]: e.data["reason"]
        for e in rt.team.journal.read_from(1)
        if e.type == "member.stopped"
    }
    assert stopped == {"w1": "shutdown", "w2": "forced"}
    result = run(["stop", "w1"])
    assert result.exit_code == 1 and "already stopped" in result.stderr
    rt.stop()
    assert run(["stop", "lead"]).exit_code == 1


def test_stop_force_of_a_member_nobody_hosts_releases_its_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.factory import open_team
    from mailboxes.events import MemberSpawned, draft

    root = git_repo(tmp_path, monkeypatch)
    with open_team(root) as team:
        body = MemberSpawned(name="w9", role="general")
        team.board.execute(lambda st: [draft(body.TYPE, "lead", body)])
        team.board.create("orphan")
        team.board.claim("task_1", "w9")
    assert "was not running" in ok(["stop", "w9", "--force"]).stdout
    with open_team(root) as team:
        state = team.state()
        assert state.members["w9"].status == "stopped"
        assert state.tasks["task_1"].owner is None


def test_the_console_talks_to_the_lead_and_runs_slash_commands(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stop_actors: list[Any],
) -> None:
    import io

    from actors.cli.run import _console

    root = git_repo(tmp_path, monkeypatch)
    model = ScriptedModel(
        {
            "agents": {
                "lead": {
                    "steps": [{"match": "^hello lead", "text": "hi"}],
                    "rules": [{"match": "(?s).", "text": "ok", "priority": -1}],
                },
                "w1": {"rules": [{"match": "(?s).", "text": "on it"}]},
            }
        }
    )
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("a task")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    lines = "/tasks\nhello lead\n/stop w1\n/approve perm-nope\n/status\n/quit\nnever read\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    _console(rt)
    assert rt.wait_until(lambda: rt.board.refresh().members["w1"].status == "stopped", 30)
    assert rt.wait_idle(timeout=30)
    model.assert_consumed()
    out = capsys.readouterr()
    assert "task_1 [" in out.out and "lead: " in out.out
    assert "error:" in out.err  # the unknown request id is one line, not a crash
    crashes = [e for e in rt.team.journal.read_from(1) if e.data.get("status") == "crashed"]
    assert crashes == []
