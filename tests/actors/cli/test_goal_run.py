"""``teamctl run --goal / --goal-check``, ``teamctl resume`` and the console's ``/goal``: the
lead's stops are judged by its goal, recorded as ``goal.*`` journal events (the README's "Goals",
docs/ARCHITECTURE.md "Goals"). In-process, with scripted models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.goal import TeamGoal, team_work_pending
from harness.goal import Goal
from harness.model.scripted import ScriptedModel
from tests.actors.cli.cli_support import git_repo, run
from tests.actors.runtime.runtime_support import runtime, stop_actors

__all__ = ["stop_actors"]

_ANY = {"match": "(?s).", "text": "Noted.", "priority": -1}
_EMPTY = {"match": "^$", "text": "Noted.", "priority": -2}
_WRITE_DONE = {"name": "write_file", "input": {"path": "done.txt", "content": "ok\n"}}
_CHECK = ["--goal-check", "test -f done.txt", "--permission-mode", "acceptEdits"]


def _script(tmp_path: Path, name: str, data: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _goal_events(root: Path) -> list[tuple[str, str | None]]:
    from actors.factory import open_team

    with open_team(root) as team:
        return [
            (e.type, e.data.get("state"))
            for e in team.journal.read_from(1)
            if e.type.startswith("goal.")
        ]


def _result(stdout: str) -> dict[str, Any]:
    last: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    assert last["type"] == "result", last
    return last


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# A lead that first stops without the file, is told the check failed, then writes it.
_STOPS_THEN_WRITES = {
    "agents": {
        "lead": {
            "rules": [
                {"match": "^make done", "text": "All done, nothing else to do."},
                {
                    "match": r"goal check `test -f done\.txt` failed",
                    "tool_uses": [_WRITE_DONE],
                    "once": True,
                },
                {"match": "wrote|Wrote|created|Created", "text": "Created done.txt."},
                _ANY,
                _EMPTY,
            ]
        }
    }
}


def test_a_headless_run_goes_on_until_the_goal_check_passes_and_journals_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    script = _script(tmp_path, "lead", _STOPS_THEN_WRITES)
    result = run(["run", "--headless", "--script", script, *_CHECK, "make done.txt"])
    assert result.exit_code == 0, (result.output, result.stderr)
    assert (root / "done.txt").read_text() == "ok\n"
    assert "team idle: tasks {}; goal met" in result.stdout
    assert _goal_events(root) == [
        ("goal.set", None),
        ("goal.evaluated", "active"),  # the first stop, without the file: blocked
        ("goal.evaluated", "met"),
    ]


def test_the_stream_json_result_carries_the_goal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch)
    script = _script(tmp_path, "lead", _STOPS_THEN_WRITES)
    common = ["run", "--headless", "--script", script, "--output-format", "stream-json"]
    result = run([*common, *_CHECK, "make done.txt"])
    assert result.exit_code == 0, result.output
    outcome = _result(result.stdout)
    assert outcome["subtype"] == "success"
    assert outcome["goal"]["state"] == "met" and outcome["goal"]["evaluations"] == 2
    assert outcome["goal"]["check"] == "test -f done.txt"


_NEVER_DONE = {"agents": {"lead": {"rules": [{"match": "(?s).", "text": "Still nothing."}]}}}


def test_the_cap_of_blocked_stops_ends_the_run_unfinished_and_resume_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    script = _script(tmp_path, "never", _NEVER_DONE)
    common = ["run", "--headless", "--script", script, "--output-format", "stream-json"]
    result = run([*common, *_CHECK, "--goal-max-blocks", "2", "make done.txt"])
    assert result.exit_code == 3, result.output  # EXIT_UNFINISHED
    outcome = _result(result.stdout)
    assert (outcome["subtype"], outcome["is_error"]) == ("error_goal_unmet", True)
    assert outcome["goal"]["state"] == "unmet"
    errors = _errors(result.stderr)
    assert len(errors) == 1 and "goal not met after 2 blocked stops (the cap)" in errors[0]
    assert "teamctl resume" in errors[0]
    assert [s for _k, s in _goal_events(root)] == [None, "active", "active", "unmet"]

    # resume arms the same goal again (counters from zero) and sets the lead going on it
    writes = {
        "agents": {
            "lead": {
                "rules": [
                    {
                        "match": r"^\[goal\] Keep working until this holds: `test -f done\.txt`",
                        "tool_uses": [_WRITE_DONE],
                        "once": True,
                    },
                    {"match": "(?s).", "text": "Created done.txt.", "priority": -1},
                ]
            }
        }
    }
    again = run(
        [
            "resume",
            "--headless",
            *("--permission-mode", "acceptEdits"),
            *("--script", _script(tmp_path, "w", writes)),
        ]
    )
    assert again.exit_code == 0, (again.output, again.stderr)
    assert (root / "done.txt").exists()
    assert [s for _k, s in _goal_events(root)][4:] == [None, "met"]  # a new goal.set, then met


def test_resume_restores_an_active_goal_from_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.factory import open_team

    root = git_repo(tmp_path, monkeypatch)
    # A run that died mid-goal: the journal has the goal armed and one blocked stop.
    with open_team(root) as team:
        goal = TeamGoal(team.board)
        goal.record("goal.set", {"goal": Goal(check="test -f done.txt").model_dump(), "at": 1.0})
        fields = {"ok": False, "state": "active", "reason": "no file", "tokens": 0, "blocks": 1}
        goal.record("goal.evaluated", fields)
    lead = {
        "agents": {
            "lead": {
                "rules": [
                    {"match": r"^\[goal\] Keep working", "tool_uses": [_WRITE_DONE], "once": True},
                    {"match": "(?s).", "text": "Done.", "priority": -1},
                ]
            }
        }
    }
    result = run(
        [
            "resume",
            "--headless",
            "--permission-mode",
            "acceptEdits",
            "--output-format",
            "stream-json",
            "--script",
            _script(tmp_path, "lead", lead),
        ]
    )
    assert result.exit_code == 0, (result.output, result.stderr)
    outcome = _result(result.stdout)
    assert outcome["goal"]["state"] == "met"
    assert outcome["goal"]["evaluations"] == 2, "the restored evaluation counts"
    assert [s for _k, s in _goal_events(root)] == [None, "active", "met"], "not set again"


def test_an_impossible_goal_ends_the_run_non_zero_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch)
    script = {
        "agents": {
            "lead": {"rules": [{"match": "(?s).", "text": "Deployed."}]},
            "lead.goal": {
                "steps": ['{"ok": false, "reason": "there is no network here", "impossible": true}']
            },
        }
    }
    path = _script(tmp_path, "lead", script)
    result = run(["run", "--headless", "--script", path, "--goal", "prod is up", "deploy"])
    assert result.exit_code == 1, result.output
    assert _errors(result.stderr) == [
        "error: goal impossible: there is no network here — the team is paused; "
        "`teamctl resume` continues the team; the goal stays over"
    ]
    assert "team idle" not in result.stdout


def test_an_evaluator_error_is_never_a_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch)
    script = {
        "agents": {
            "lead": {"rules": [{"match": "(?s).", "text": "Done."}]},
            "lead.goal": {"steps": ["I think so.", "Yes, really."]},
        }
    }
    path = _script(tmp_path, "lead", script)
    common = ["run", "--headless", "--script", path, "--output-format", "stream-json"]
    result = run([*common, "--goal", "it works", "go"])
    assert result.exit_code == 1, result.output
    outcome = _result(result.stdout)
    assert outcome["subtype"] == "error_goal_evaluator" and outcome["goal"]["state"] == "error"
    errors = _errors(result.stderr)
    assert len(errors) == 1 and "goal evaluator error: unparseable answer" in errors[0]


def test_run_fresh_clears_the_recorded_goal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.factory import open_team

    root = git_repo(tmp_path, monkeypatch)
    with open_team(root) as team:
        goal = Goal(check="false").model_dump()
        TeamGoal(team.board).record("goal.set", {"goal": goal, "at": 1.0})
    script = _script(tmp_path, "lead", {"agents": {"lead": {"rules": [_ANY, _EMPTY]}}})
    result = run(["run", "--headless", "--fresh", "--script", script, "hello"])
    assert result.exit_code == 0, (result.output, result.stderr)
    assert _goal_events(root) == [("goal.set", None), ("goal.cleared", None)]


def test_an_empty_goal_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo(tmp_path, monkeypatch)
    result = run(["run", "--headless", "--goal", " ", "hello"])
    assert result.exit_code == 2 and "--goal / --goal-check must not be empty" in result.stderr


# -- the console's /goal ---------------------------------------------------------------------


def test_the_console_sets_shows_and_clears_the_goal_through_the_lead(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stop_actors: list[Any],
) -> None:
    from actors.cli.run import _goal_command

    root = git_repo(tmp_path, monkeypatch)
    model = ScriptedModel(
        {
            "agents": {
                "lead": {
                    "steps": [
                        {
                            "match": r"^\[goal\] Keep working until this holds: README exists$",
                            "text": "It exists.",
                        },
                    ]
                },
                "lead.goal": {"steps": ['{"ok": true, "reason": "the README is there"}']},
            }
        }
    )
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    _goal_command(rt, "")
    assert "no goal set" in capsys.readouterr().out
    _goal_command(rt, "README exists")
    assert capsys.readouterr().out == "goal set: README exists\n"
    assert rt.wait_until(lambda: rt.goal.status().state == "met", 30)
    assert rt.wait_idle(timeout=30)
    model.assert_consumed()
    _goal_command(rt, "")
    shown = capsys.readouterr().out
    assert "goal: README exists" in shown and "state: met; evaluations: 1" in shown
    assert "last reason: the README is there" in shown
    _goal_command(rt, "clear")
    assert rt.wait_until(lambda: rt.goal.status().goal is None, 30)
    _goal_command(rt, "")
    assert "no goal set" in capsys.readouterr().out.splitlines()[-1]
    kinds = [e.type for e in rt.team.journal.read_from(1) if e.type.startswith("goal.")]
    assert kinds == ["goal.set", "goal.evaluated", "goal.cleared"]
    assert all(
        e.actor == "lead" for e in rt.team.journal.read_from(1) if e.type.startswith("goal.")
    )


# -- what defers the judgement ---------------------------------------------------------------


def test_the_team_at_work_defers_judging_the_lead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.factory import open_team
    from mailboxes.events import MemberSpawned, MemberStatusChanged, draft

    root = git_repo(tmp_path, monkeypatch)
    with open_team(root) as team:
        board = team.board
        board.create("one")
        assert team_work_pending(board.refresh()) == 0, "no teammate to do it"
        body = MemberSpawned(name="w1", role="general")
        board.execute(lambda st: [draft(body.TYPE, "lead", body)])
        assert team_work_pending(board.refresh()) == 1, "a ready task w1 (starting) will claim"
        board.claim("task_1", "w1")
        assert team_work_pending(board.refresh()) == 1, "w1 works on it"
        idle = MemberStatusChanged(name="w1", status="idle")
        board.execute(lambda st: [draft(idle.TYPE, "w1", idle)])
        assert team_work_pending(board.refresh()) == 0, "w1 idle on its task: the lead decides"
        jobs = {"lead": 2}
        goal = TeamGoal(board, jobs_running=lambda owner: jobs.get(owner, 0))
        assert goal.pending_work() == 2, "the lead's background jobs"
