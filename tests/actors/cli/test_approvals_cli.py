"""teamctl plans / approve / reject in-process, against a team whose teammate uses its tools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.protocols import plan_mode_active
from actors.tools.toolsets import NO_HOOKS, lead_tools, teammate_tools
from tests.actors.cli.cli_support import fails, ok, ok_json, run
from tests.actors.team_support import Driver, RealTeam, real_team


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RealTeam]:
    team = real_team(tmp_path / "repo", {"approvals": {"plans": "human"}})
    monkeypatch.chdir(team.root)
    monkeypatch.delenv("TEAMCTL_SETTINGS", raising=False)
    yield team
    team.close()


@pytest.fixture
def ann(team: RealTeam) -> Driver:
    Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root).ok(
        "spawn_teammate", name="ann", prompt="work"
    )  # first: a teammate with no work claims a ready task itself
    team.board.create("refactor", "split the module", plan_required=True)
    driver = Driver(teammate_tools(team, "ann", hooks=NO_HOOKS), "ann", team.root)
    driver.ok("claim_task", task_id="task_1")
    return driver


def test_no_plans_and_no_permissions(team: RealTeam) -> None:
    assert ok(["plans"]).stdout.strip() == "no plans waiting"
    assert ok_json(["plans"]) == []
    assert ok(["permissions"]).stdout.strip() == "no permission requests waiting"
    assert "unknown request id 'x-1'" in fails(["approve", "x-1"])
    assert "unknown plan request 'plan-nope'" in fails(["approve", "plan-nope"])


def test_human_rejects_then_approves_a_plan(team: RealTeam, ann: Driver) -> None:
    ann.ok("submit_plan", plan="v1")
    [row] = ok_json(["plans"])
    rid = row["request_id"]
    assert (row["teammate"], row["task_id"], row["status"], row["plan"]) == (
        "ann",
        "task_1",
        "submitted",
        "v1",
    )
    assert row["subject"] == "refactor" and row["epoch"] == 1
    assert rid in ok(["plans"]).stdout
    usage = run(["reject", rid])
    assert usage.exit_code == 2 and "needs --feedback" in usage.stderr
    out = ok(["reject", rid, "--feedback", "too big"]).stdout.strip()
    assert out == f"rejected plan {rid} of ann for task_1"
    [response] = team.inbox("ann")
    assert (response.type, response.sender) == ("plan_approval_response", "user")
    assert response.body["feedback"] == "too big" and response.body["approve"] is False
    assert plan_mode_active(team.board.refresh(), "ann")
    assert "already reviewed" in fails(["approve", rid])
    ann.ok("submit_plan", plan="v2")
    [row] = ok_json(["plans"])
    result = ok_json(["approve", row["request_id"], "--as", "maria"])
    assert result == {
        "request_id": row["request_id"],
        "kind": "plan",
        "decision": "approved",
        "teammate": "ann",
        "task_id": "task_1",
    }
    assert not plan_mode_active(team.board.refresh(), "ann")
    assert ok_json(["plans"]) == []
    reviews = team.events("plan.reviewed")
    assert [(e.actor, e.data["approve"]) for e in reviews] == [("user", False), ("maria", True)]


def test_approving_a_plan_of_an_old_claim_is_refused(team: RealTeam, ann: Driver) -> None:
    ann.ok("submit_plan", plan="v1")
    [row] = ok_json(["plans"])
    ann.ok("release_task", task_id="task_1", reason="later")
    ann.ok("claim_task", task_id="task_1")
    line = fails(["approve", row["request_id"]])
    assert "epoch 1 was superseded by epoch 2" in line
    assert team.events("plan.reviewed") == []
