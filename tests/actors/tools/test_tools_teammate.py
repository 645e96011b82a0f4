"""A teammate's task tools on the real runtime: claims (a refusal is a normal answer), fencing,
release."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.tools.toolsets import NO_HOOKS, lead_tools, teammate_tools
from tests.actors.team_support import Driver, RealTeam, real_team


@pytest.fixture
def team(tmp_path: Path) -> Iterator[RealTeam]:
    team = real_team(tmp_path / "repo")
    yield team
    team.close()


def mate(team: RealTeam, name: str, **kw: bool) -> Driver:
    """``name`` spawned on the real runtime and held in a model call (the test speaks for it).
    Called before any task exists: a teammate with no work claims a ready task itself."""
    Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root).ok(
        "spawn_teammate", name=name, prompt="work"
    )
    return Driver(teammate_tools(team, name, hooks=NO_HOOKS), name, team.root, **kw)


def test_claim_complete_unblocks_dependents(team: RealTeam) -> None:
    ann = mate(team, "ann")
    a = team.board.create("a", "first")
    team.board.create("b", blocked_by=[a.id])
    text = ann.ok("claim_task", task_id="task_1")
    assert text.startswith("Claimed task_1 (epoch 1): a")
    assert json.loads(text.split("\n", 1)[1])["description"] == "first"
    assert ann.ok("complete_task", task_id="task_1", summary="done it") == (
        "Completed task_1. Now ready: task_2."
    )
    [done] = team.events("task.completed")
    assert (done.data["owner"], done.data["epoch"], done.data["summary"]) == ("ann", 1, "done it")
    detail = json.loads(ann.ok("get_task", task_id="task_2"))
    assert detail["status"] == "ready" and detail["dependency_outcomes"] == {"task_1": "done it"}


def test_refused_claims_are_normal_answers(team: RealTeam) -> None:
    ann, bob = mate(team, "ann"), mate(team, "bob")
    team.board.create("a")
    team.board.create("b", blocked_by=["task_1"])
    team.board.create("c")
    ann.ok("claim_task", task_id="task_1")
    assert bob.ok("claim_task", task_id="task_1") == (
        "Not claimed: task_1 — already claimed by ann."
    )
    assert bob.ok("claim_task", task_id="task_2") == "Not claimed: task_2 — blocked by task_1."
    assert ann.ok("claim_task", task_id="task_3") == (
        "Not claimed: task_3 — ann already holds task_1."
    )
    assert "unknown task 'task_9'" in bob.error("claim_task", task_id="task_9")
    assert [e.data["owner"] for e in team.events("task.claimed")] == ["ann"]


def test_fencing_a_teammate_that_lost_its_claim_cannot_complete(team: RealTeam) -> None:
    ann, bob = mate(team, "ann"), mate(team, "bob")
    team.board.create("a")
    ann.ok("claim_task", task_id="task_1")
    team.board.release("task_1", "ann", 1, "owner_dead")  # presumed dead
    bob.ok("claim_task", task_id="task_1")
    refused = ann.error("complete_task", task_id="task_1", summary="late")
    assert "ann does not hold task task_1 (it is held by bob)" in refused
    assert "does not hold" in ann.error("release_task", task_id="task_1", reason="x")
    assert team.events("task.completed") == []


def test_release_gives_the_task_back(team: RealTeam) -> None:
    ann = mate(team, "ann")
    team.board.create("a")
    ann.ok("claim_task", task_id="task_1")
    assert ann.ok("release_task", task_id="task_1", reason="stuck on setup") == (
        "Released task_1; it is pending again."
    )
    [rel] = team.events("task.released")
    assert (rel.data["reason"], rel.data["epoch"]) == ("stuck on setup", 1)
    assert json.loads(ann.ok("list_tasks", status="ready"))[0]["id"] == "task_1"
    assert "not claimed" in ann.error("release_task", task_id="task_1", reason="again")


def test_plan_mode_allows_team_tools_but_not_completion(team: RealTeam) -> None:
    ann = mate(team, "ann", read_only=True)
    team.board.create("a")
    ann.ok("list_tasks")
    ann.ok("claim_task", task_id="task_1")
    ann.ok("send_message", to="lead", text="reading first")
    assert "plan" in ann.error("complete_task", task_id="task_1", summary="x").lower()
    ann.ok("release_task", task_id="task_1", reason="handing over")


def test_journal_names_the_agent_behind_each_team_tool_call(team: RealTeam) -> None:
    """One board serves every agent of a runtime; the journal's actor is still who acted."""
    lead = Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root)
    ann = mate(team, "ann")
    lead.ok("create_task", subject="a")
    ann.ok("claim_task", task_id="task_1")
    ann.ok("complete_task", task_id="task_1", summary="done")
    actors = {e.type: e.actor for e in team.events()}
    assert actors["task.created"] == "lead"
    assert actors["task.claimed"] == "ann" and actors["task.completed"] == "ann"
    assert team.board.get("task_1").created_by == "lead"
    team.board.create("b")  # outside any tool: the board's own actor
    assert team.events("task.created")[-1].actor == team.board.actor


def test_the_tools_that_leave_a_teammate_nothing_to_say_end_its_turn(team: RealTeam) -> None:
    mates = teammate_tools(team, "ann", hooks=NO_HOOKS)
    assert {t.name for t in mates if t.ends_turn} == {
        "complete_task",
        "release_task",
        "submit_plan",
    }
    assert [t.name for t in lead_tools(team, hooks=NO_HOOKS) if t.ends_turn] == []


def test_a_teammate_carries_no_lead_only_tool(team: RealTeam) -> None:
    from actors.tools.toolsets import LEAD_TOOL_NAMES, TEAMMATE_TOOL_NAMES

    shared = {"list_tasks", "get_task", "send_message"}
    assert set(TEAMMATE_TOOL_NAMES) & set(LEAD_TOOL_NAMES) == shared
    assert {t.name for t in teammate_tools(team, "ann", hooks=NO_HOOKS)} == set(TEAMMATE_TOOL_NAMES)
