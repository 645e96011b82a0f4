"""``teamctl run``/``stop`` at the CLI edge, in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from mailboxes.messages import MessageDraft
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


# -- stop means pause; exit codes (issue 12 items 1 and 2) ----------------------------------------


def _script(tmp_path: Path, name: str, data: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _keep_unfinished_tasks(root: Path) -> None:
    """Teammates that end their turns holding a task keep it (no reminder, no release)."""
    path = root / ".team" / "settings.json"
    settings = json.loads(path.read_text())
    settings["team"]["task_reminders"] = None
    path.write_text(json.dumps(settings))


def _result(stdout: str) -> dict[str, Any]:
    """The stream-json ``result``: it must be the last line."""
    last: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    assert last["type"] == "result", last
    return last


_ANY = {"match": "(?s).", "text": "Noted.", "priority": -1}
_EMPTY = {"match": "^$", "text": "Noted.", "priority": -2}
_TEAM_THAT_WAITS = {
    "agents": {
        "lead": {
            "rules": [
                {
                    "match": "^start",
                    "tool_uses": [
                        {"name": "create_task", "input": {"subject": "one"}},
                        {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "Work."}},
                    ],
                },
                _ANY,
                _EMPTY,
            ]
        },
        # w1 claims task_1 and ends its turn without finishing it
        "w1": {"rules": [{"match": "(?s).", "text": "Waiting for a go."}]},
    }
}
_TEAM_THAT_FINISHES = {
    "agents": {
        "lead": {"rules": [_ANY, _EMPTY]},
        "w1": {
            "rules": [
                {
                    "match": r"still hold this task\.\nYou now hold task (?P<id>task_\d+)",
                    "tool_uses": [
                        {"name": "complete_task", "input": {"task_id": "{id}", "summary": "done"}}
                    ],
                },
                {"match": "(?s).", "text": "OK.", "priority": -1},
            ]
        },
    }
}


def test_headless_exit_codes_and_the_stream_json_result_tell_how_the_run_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch)
    script = _script(
        tmp_path,
        "lead",
        {
            "agents": {
                "lead": {
                    "rules": [
                        {
                            "match": "^leave work",
                            "tool_uses": [{"name": "create_task", "input": {"subject": "x"}}],
                        },
                        _ANY,
                        _EMPTY,
                    ]
                }
            }
        },
    )
    common = ["run", "--headless", "--script", script, "--output-format", "stream-json"]
    done = run([*common, "hello"])
    assert done.exit_code == 0, done.output
    result = _result(done.stdout)
    assert (result["subtype"], result["is_error"], result["exit_code"]) == ("success", False, 0)

    left = run([*common, "leave work"])
    assert left.exit_code == 3, left.output
    result = _result(left.stdout)
    assert (result["subtype"], result["is_error"], result["exit_code"]) == (
        "error_unfinished_tasks",
        True,
        3,
    )
    assert result["unfinished"] == ["task_1"]
    text = run(["run", "--headless", "--script", script, "hello again"])
    assert text.exit_code == 3
    assert "unfinished tasks (task_1)" in text.stdout and "teamctl resume" in text.stderr


def test_a_member_out_of_restarts_ends_the_run_with_the_member_failed_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch)
    # Nothing answers the prompt: every call of the lead fails, and so does every restart.
    script = _script(tmp_path, "broken", {"agents": {"lead": {"rules": [{"match": "^x$"}]}}})
    result = run(["run", "--headless", "--script", script, "--output-format", "stream-json", "go"])
    assert result.exit_code == 4, result.output
    outcome = _result(result.stdout)
    assert outcome["subtype"] == "error_member_failed" and outcome["is_error"] is True
    assert list(outcome["failed"]) == ["lead"] and "after 3 restarts" in outcome["failed"]["lead"]


def test_a_rejected_api_key_fails_at_once_without_retry_or_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.model.fakeapi import FakeMessagesServer
    from harness.model.scripted import Fault

    git_repo(tmp_path, monkeypatch)
    monkeypatch.delenv("TEAMCTL_SCRIPT", raising=False)
    server = FakeMessagesServer({"agents": {"lead": {"rules": [_ANY]}}})
    server.inject(Fault(kind="authentication", times=20))
    with server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-rejected")
        result = run(["run", "--headless", "hello"])
        requests = server.requests
    assert result.exit_code == 4, result.output
    assert len(requests) == 1, "a 401 is neither retried nor restarted"
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: lead failed:"), result.stderr
    assert "team idle" not in result.stdout


def test_a_finished_run_pauses_the_team_and_resume_continues_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.factory import open_team

    root = git_repo(tmp_path, monkeypatch)
    _keep_unfinished_tasks(root)
    first = run(
        ["run", "--headless", "--script", _script(tmp_path, "a", _TEAM_THAT_WAITS), "start"]
    )
    assert first.exit_code == 3, first.output  # idle, with w1 holding an unfinished task
    with open_team(root) as team:
        state = team.state()
        assert {m.name: m.status for m in state.members.values()} == {
            "lead": "paused",
            "w1": "paused",
        }
        assert (state.tasks["task_1"].status, state.tasks["task_1"].owner) == ("in_progress", "w1")
        assert team.board.reap_dead_owners() == [], "a paused member's claim is not reaped"
        team.mailbox.deliver("cli", MessageDraft(to="w1", type="message", body={"text": "hi"}))
    again = run(["resume", "--headless", "--script", _script(tmp_path, "b", _TEAM_THAT_FINISHES)])
    assert again.exit_code == 0, again.output
    assert "[team] resumed " in again.stdout
    assert "w1 (paused, on task_1, 1 unread)" in again.stdout
    with open_team(root) as team:
        events = list(team.journal.read_from(1))
        state = team.state()
    kinds = [(e.type, e.data.get("task_id")) for e in events if e.type.startswith("task.")]
    assert kinds == [
        ("task.created", "task_1"),
        ("task.claimed", "task_1"),
        ("task.completed", "task_1"),
    ], "claimed once, completed once, never released"
    assert [e for e in events if e.type == "member.stopped"] == []
    assert not list((root / ".team" / "mailboxes" / "w1" / "new").iterdir())


def test_run_fresh_retires_the_paused_teammates_and_releases_their_claims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.factory import open_team

    root = git_repo(tmp_path, monkeypatch)
    _keep_unfinished_tasks(root)
    waits = _script(tmp_path, "a", _TEAM_THAT_WAITS)
    assert run(["run", "--headless", "--script", waits, "start"]).exit_code == 3
    fresh = run(["run", "--fresh", "--headless", "--script", waits, "hello"])
    assert fresh.exit_code == 3, fresh.output  # task_1 is pending again, nobody to do it
    assert "[team] resumed lead" in fresh.stdout and "w1" not in fresh.stdout.split("\n")[0]
    with open_team(root) as team:
        events = list(team.journal.read_from(1))
        state = team.state()
    assert state.members["w1"].status == "stopped"
    assert (state.tasks["task_1"].status, state.tasks["task_1"].owner) == ("pending", None)
    released = [(e.data["task_id"], e.data["reason"]) for e in events if e.type == "task.released"]
    assert released == [("task_1", "fresh")]
    stopped = [(e.data["name"], e.data["reason"]) for e in events if e.type == "member.stopped"]
    assert stopped == [("w1", "fresh")]
    transcript = (root / ".team" / "transcripts" / "lead.jsonl").read_text()
    assert "new_session" in transcript  # the lead started a new conversation


def test_resume_continues_a_held_task_with_no_mail_to_wake_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the restart reminder opens the paused teammate's turn: the headless resume must not
    find the team idle before it (the reminder once came as a message the actor sent itself)."""
    from actors.factory import open_team

    root = git_repo(tmp_path, monkeypatch)
    _keep_unfinished_tasks(root)
    first = run(
        ["run", "--headless", "--script", _script(tmp_path, "a", _TEAM_THAT_WAITS), "start"]
    )
    assert first.exit_code == 3, first.output
    again = run(["resume", "--headless", "--script", _script(tmp_path, "b", _TEAM_THAT_FINISHES)])
    assert again.exit_code == 0, again.output
    assert "w1 (paused, on task_1)" in again.stdout
    with open_team(root) as team:
        kinds = [e.type for e in team.journal.read_from(1) if e.type.startswith("task.")]
    assert kinds == ["task.created", "task.claimed", "task.completed"]
