"""A team budget stops a headless run, and ``teamctl resume`` finishes the work once it is raised
(issue 14 items 4 to 6).

The real ``teamctl run --headless`` in-process (click's runner) with a scripted lead and teammate
whose every call reports a fixed usage, so the cost of each call is known: the lead's (Opus) costs
$0.0075, the teammate's (Sonnet) $0.0045. With ``team.max_cost_usd`` at $0.01, at most the
lead's second call and the teammate's first get past the check (both see the $0.0075 of the first
call), so the teammate completes at most ``task_1`` and ``task_2`` is left: the run stops with
exit code 3, one line naming the setting and the file, and every member paused. Raising the budget
in ``.team/settings.json`` and running ``teamctl resume`` completes both tasks, and ``teamctl cost
--json`` then totals exactly the usage the scripted model returned, call by call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.cli.run import EXIT_UNFINISHED
from tests.actors.cli.cli_support import git_repo, ok_json, run

LEAD_USAGE = {"input_tokens": 1000, "output_tokens": 100}  # claude-opus-4-8: $0.0075
MATE_USAGE = {"input_tokens": 1000, "output_tokens": 100}  # claude-sonnet-4-6: $0.0045
LEAD_COST, MATE_COST = 0.0075, 0.0045


def _script() -> dict[str, Any]:
    noted = [
        {"match": "(?s).", "text": "Noted.", "priority": -1, "usage": LEAD_USAGE},
        {"match": "^$", "text": "Noted.", "priority": -2, "usage": LEAD_USAGE},
    ]
    done = [
        {"match": "(?s).", "text": "Finished.", "priority": -1, "usage": MATE_USAGE},
        {"match": "^$", "text": "Finished.", "priority": -2, "usage": MATE_USAGE},
    ]
    return {
        "agents": {
            "lead": {
                "rules": [
                    {
                        "match": "^Start",
                        "usage": LEAD_USAGE,
                        "tool_uses": [
                            {"name": "create_task", "input": {"subject": "one"}},
                            {"name": "create_task", "input": {"subject": "two"}},
                            {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "Work."}},
                        ],
                    },
                    *noted,
                ]
            },
            "w1": {
                "rules": [
                    {
                        "match": r"You now hold task (?P<id>task_\d+) \(claim",
                        "usage": MATE_USAGE,
                        "tool_uses": [
                            {
                                "name": "complete_task",
                                "input": {"task_id": "{id}", "summary": "did {id}"},
                            }
                        ],
                    },
                    *done,
                ]
            },
        }
    }


HEADLESS = ("--headless", "--output-format", "stream-json", "--script")


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _set_team(root: Path, **values: Any) -> None:
    path = root / ".team" / "settings.json"
    settings = json.loads(path.read_text())
    settings.setdefault("team", {}).update(values)
    path.write_text(json.dumps(settings))


def _journal(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".team" / "journal.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_budget_stops_the_run_paused_and_resume_finishes_after_it_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    _set_team(root, max_cost_usd=0.01)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(_script()))

    first = run(["run", *HEADLESS, str(script), "--timeout", "60", "Start"])
    assert first.exit_code == EXIT_UNFINISHED, (first.stdout, first.stderr, first.exception)
    errors = [line for line in first.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, first.stderr
    assert errors[0].startswith("error: cap reached: the team has spent $0.0")
    assert "team.max_cost_usd $0.01 — the team is paused; raise team.max_cost_usd in " in errors[0]
    assert errors[0].endswith(".team/settings.json and run `teamctl resume`")
    events = _events(first.stdout)
    result = events[-1]
    assert result["type"] == "result" and result["subtype"] == "error_cap_reached"
    assert result["exit_code"] == EXIT_UNFINISHED and result["is_error"] is True
    assert result["cap"]["setting"] == "team.max_cost_usd" and result["cap"]["limit"] == 0.01
    assert "task_2" in result["unfinished"]
    assert [e["setting"] for e in events if e["type"] == "cap_reached"]  # told as it happened
    # At most two calls got past the check after the first: the budget was overshot by at most
    # one step per agent, and then nobody called the model again.
    calls = [e for e in _journal(root) if e["type"] == "usage.recorded"]
    spent = sum(c["data"]["cost_usd"] for c in calls)
    assert 0.01 <= spent <= LEAD_COST * 2 + MATE_COST + 1e-9
    assert result["total_cost_usd"] == pytest.approx(spent)
    status = ok_json(["status"])
    assert {m["name"]: m["status"] for m in status["members"]} == {"lead": "paused", "w1": "paused"}
    assert sum(m["cost_usd"] for m in status["members"]) == pytest.approx(spent)

    # Still over budget: a resume stops at once, calling nothing.
    again = run(["resume", *HEADLESS, str(script), "--timeout", "60"])
    assert again.exit_code == EXIT_UNFINISHED, (again.stdout, again.stderr)
    assert len([e for e in _journal(root) if e["type"] == "usage.recorded"]) == len(calls)

    _set_team(root, max_cost_usd=1.0)
    second = run(["resume", *HEADLESS, str(script), "--timeout", "60"])
    assert second.exit_code == 0, (second.stdout, second.stderr, second.exception)
    result = _events(second.stdout)[-1]
    assert result["subtype"] == "success" and result["tasks"] == {"completed": 2}

    # The cost report totals exactly what the model returned, call by call.
    calls = [e["data"] for e in _journal(root) if e["type"] == "usage.recorded"]
    report = ok_json(["cost"])
    total = report["total"]
    assert total["calls"] == len(calls)
    for key in ("input_tokens", "output_tokens"):
        assert total[key] == sum(c[key] for c in calls)
    lead_calls = [c for c in calls if c["agent"] == "lead"]
    mate_calls = [c for c in calls if c["agent"] == "w1"]
    assert {c["model"] for c in lead_calls} == {"claude-opus-4-8"}
    assert [c["cost_usd"] for c in calls] == [
        pytest.approx(LEAD_COST if c["agent"] == "lead" else MATE_COST) for c in calls
    ]
    by_agent = {row["name"]: row for row in report["agents"]}
    assert by_agent["lead"]["calls"] == len(lead_calls) and by_agent["w1"]["calls"] == len(
        mate_calls
    )
    assert by_agent["w1"]["input_tokens"] == 1000 * len(mate_calls)
    assert total["cost_usd"] == pytest.approx(
        LEAD_COST * len(lead_calls) + MATE_COST * len(mate_calls)
    )
    # A call is charged to the task its agent held: the lead's to none.
    by_task = {row["id"]: row for row in report["tasks"]}
    assert set(by_task) == {"task_1", "task_2"}
    assert sum(row["calls"] for row in by_task.values()) + report["no_task"]["calls"] == len(calls)
    assert report["no_task"]["calls"] >= len(lead_calls)
    # The stream-json result of the run carries the same totals.
    result = _events(second.stdout)[-1]
    assert {**result["usage"], "cost_usd": result["total_cost_usd"]} == {
        key: total[key]
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "cost_usd",
        )
    }


def test_a_task_that_takes_too_many_model_calls_stops_the_run_at_its_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    _set_team(root, max_turns_per_task=2)  # task_reminders stays at its default, 2
    finish = {
        "match": "(?s)Reminder 2 of|restarted",
        "tool_uses": [
            {"name": "complete_task", "input": {"task_id": "task_1", "summary": "at last"}}
        ],
    }
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "agents": {
                    "lead": {
                        "rules": [
                            {
                                "match": "^Start",
                                "tool_uses": [
                                    {"name": "create_task", "input": {"subject": "one"}},
                                    {
                                        "name": "spawn_teammate",
                                        "input": {"name": "w1", "prompt": "Work."},
                                    },
                                ],
                            },
                            {"match": "(?s).", "text": "Noted.", "priority": -1},
                            {"match": "^$", "text": "Noted.", "priority": -2},
                        ]
                    },
                    "w1": {
                        "rules": [
                            finish,  # the second reminder would finish it: past the cap
                            {"match": "(?s).", "text": "Working on it.", "priority": -1},
                            {"match": "^$", "text": "Working on it.", "priority": -2},
                        ]
                    },
                }
            }
        )
    )
    first = run(["run", "--headless", "--script", str(script), "--timeout", "60", "Start"])
    assert first.exit_code == EXIT_UNFINISHED, (first.stdout, first.stderr, first.exception)
    assert "[w1] stops: cap reached: w1 made 2 model calls on task_1" in first.stdout
    errors = [line for line in first.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: cap reached: w1 made 2 model calls on task_1 (team.max_turns_per_task 2) — the "
        "team is paused; raise team.max_turns_per_task in .team/settings.json and run "
        "`teamctl resume`"
    ]
    task = ok_json(["cost"])["tasks"][0]
    assert (task["id"], task["calls"]) == ("task_1", 2)

    _set_team(root, max_turns_per_task=3)
    second = run(["resume", "--headless", "--script", str(script), "--timeout", "60"])
    assert second.exit_code == 0, (second.stdout, second.stderr, second.exception)
    assert ok_json(["status"])["tasks"] == {"completed": 1, "ready": 0}
