"""Plan approval and shutdown protocols, driven through the team tools; journal checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.board import protocols as bp
from actors.errors import StaleEpoch
from actors.protocols import answer_shutdown, plan_mode_active
from actors.tools.toolsets import NO_HOOKS, lead_tools, teammate_tools
from tests.actors.runtime.runtime_support import stop_actors, team_repo
from tests.actors.team_support import Driver, Held, RealTeam, delivered, held_runtime, real_team

__all__ = ["stop_actors"]

WAIT_LIMIT_S = 30.0  # a generous bound for a test to fail rather than hang


@pytest.fixture
def team(tmp_path: Path) -> Iterator[RealTeam]:
    team = real_team(tmp_path / "repo")
    yield team
    team.close()


def drivers(team: RealTeam, *, plan_required: bool = False) -> tuple[Driver, Driver]:
    """The lead, and ann spawned on the real runtime and held in a model call (the test speaks
    for her). Called before any task exists: a teammate with no work claims a ready task."""
    lead = Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root)
    lead.ok("spawn_teammate", name="ann", prompt="work", plan_required=plan_required)
    return lead, Driver(teammate_tools(team, "ann", hooks=NO_HOOKS), "ann", team.root)


def gated(team: RealTeam, agent: str = "ann") -> bool:
    return plan_mode_active(team.board.refresh(), agent)


def last_request_id(team: RealTeam) -> str:
    [msg] = [m for m in team.inbox("lead") if m.type == "plan_approval_request"][-1:]
    return str(msg.body["request_id"])


def test_submit_reject_resubmit_approve(team: RealTeam) -> None:
    lead, ann = drivers(team)
    team.board.create("refactor", plan_required=True)
    assert not gated(team)
    ann.ok("claim_task", task_id="task_1")
    assert gated(team)
    assert "Plan submitted for task_1" in ann.ok("submit_plan", plan="v1: rewrite everything")
    first = last_request_id(team)
    assert first.startswith("plan-task_1-e1-")
    assert "still waiting for review" in ann.error("submit_plan", plan="v1b")
    assert "needs feedback" in lead.error("review_plan", request_id=first, approve=False)
    assert lead.ok("review_plan", request_id=first, approve=False, feedback="smaller steps") == (
        "Rejected the plan of ann for task_1; your feedback was sent."
    )
    [response] = team.inbox("ann")
    assert response.type == "plan_approval_response" and response.sender == "lead"
    assert response.body["approve"] is False and response.body["feedback"] == "smaller steps"
    assert "smaller steps" in response.text
    assert gated(team)
    assert "already reviewed" in lead.error("review_plan", request_id=first, approve=True)
    ann.ok("submit_plan", plan="v2: step by step")
    second = last_request_id(team)
    assert second != first
    assert "may now make changes" in lead.ok("review_plan", request_id=second, approve=True)
    assert not gated(team)
    assert team.inbox("ann")[-1].body["approve"] is True
    assert "already approved" in ann.error("submit_plan", plan="v3")
    plan_events = [e for e in team.events() if e.type.startswith("plan.")]
    assert [(e.type, e.actor, e.data["request_id"]) for e in plan_events] == [
        ("plan.submitted", "ann", first),
        ("plan.reviewed", "lead", first),
        ("plan.submitted", "ann", second),
        ("plan.reviewed", "lead", second),
    ]
    assert [e.data.get("epoch") for e in plan_events if e.type == "plan.submitted"] == [1, 1]
    assert [e.data["approve"] for e in plan_events if e.type == "plan.reviewed"] == [False, True]
    assert team.board.state.task("task_1").plan.plan == "v2: step by step"
    ann.ok("complete_task", task_id="task_1", summary="done in steps")


def test_an_approval_for_an_old_epoch_is_refused(team: RealTeam) -> None:
    lead, ann = drivers(team)
    team.board.create("refactor", plan_required=True)
    ann.ok("claim_task", task_id="task_1")
    ann.ok("submit_plan", plan="v1")
    old = last_request_id(team)
    ann.ok("release_task", task_id="task_1", reason="need a break")
    ann.ok("claim_task", task_id="task_1")
    refused = lead.error("review_plan", request_id=old, approve=True)
    assert "epoch 1 was superseded by epoch 2" in refused
    with pytest.raises(StaleEpoch):
        bp.review_plan(team.board, old, True, reviewer="lead")
    assert gated(team)
    assert team.events("plan.reviewed") == []


def test_release_and_reclaim_void_an_approval(team: RealTeam) -> None:
    lead, ann = drivers(team)
    team.board.create("refactor", plan_required=True)
    ann.ok("claim_task", task_id="task_1")
    ann.ok("submit_plan", plan="v1")
    lead.ok("review_plan", request_id=last_request_id(team), approve=True)
    assert not gated(team)
    ann.ok("release_task", task_id="task_1", reason="re-plan")
    ann.ok("claim_task", task_id="task_1")
    assert gated(team)


def test_a_teammate_cannot_approve_its_own_plan(team: RealTeam) -> None:
    _, ann = drivers(team)
    team.board.create("refactor", plan_required=True)
    ann.ok("claim_task", task_id="task_1")
    ann.ok("submit_plan", plan="trust me")
    rid = last_request_id(team)
    with pytest.raises(bp.ProtocolError, match="ann cannot review its own plan"):
        bp.review_plan(team.board, rid, True, reviewer="ann")
    assert "review_plan" not in [t for t in ann.executor.registry.names()]
    assert gated(team)


def test_an_approval_cannot_precede_the_submission(team: RealTeam) -> None:
    lead, ann = drivers(team)
    team.board.create("feature")
    assert "unknown plan request" in lead.error("review_plan", request_id="plan-x", approve=True)
    ann.ok("claim_task", task_id="task_1")
    assert not gated(team)
    text = lead.ok("request_plan", name="ann", task_id="task_1")
    assert gated(team)
    [ask] = team.inbox("ann")
    rid = str(ask.body["request_id"])
    assert rid in text and "submit_plan" in ask.text
    refused = lead.error("review_plan", request_id=rid, approve=True)
    assert "no plan has been submitted for request" in refused
    ann.ok("submit_plan", plan="now a plan")
    assert last_request_id(team) == rid  # the request's id is reused by the submission
    lead.ok("review_plan", request_id=rid, approve=True)
    assert not gated(team)
    assert [e.type for e in team.events() if e.type.startswith("plan.")] == [
        "plan.requested",
        "plan.submitted",
        "plan.reviewed",
    ]


def test_request_plan_needs_the_teammate_to_hold_the_task(team: RealTeam) -> None:
    lead, _ = drivers(team)
    team.board.create("feature")
    assert "ann does not hold task_1" in lead.error("request_plan", name="ann", task_id="task_1")
    assert "you hold no task" in Driver(
        teammate_tools(team, "ann", hooks=NO_HOOKS), "ann", team.root
    ).error("submit_plan", plan="p")


def test_a_plan_required_member_is_gated_until_approved(team: RealTeam) -> None:
    lead, ann = drivers(team, plan_required=True)
    team.board.create("plain task")
    assert gated(team)  # no task yet: still read-only
    ann.ok("claim_task", task_id="task_1")
    assert gated(team)
    ann.ok("submit_plan", plan="p")
    lead.ok("review_plan", request_id=last_request_id(team), approve=True)
    assert not gated(team)
    assert not plan_mode_active(team.board.state, "nobody")


def test_human_reviewer_gets_no_message_to_the_lead(tmp_path: Path) -> None:
    team = real_team(tmp_path / "repo", {"approvals": {"plans": "human"}})
    try:
        lead, ann = drivers(team)
        team.board.create("refactor", plan_required=True)
        ann.ok("claim_task", task_id="task_1")
        assert "a human (teamctl plans)" in ann.ok("submit_plan", plan="p")
        assert team.inbox("lead") == []
        rid = next(iter(team.board.refresh().plan_requests))
        assert "reviewed by a human" in lead.error("review_plan", request_id=rid, approve=True)
    finally:
        team.close()


def test_a_teammate_answers_a_shutdown_request_journaled_then_sent(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    """A real ``TeamRuntime``: ann's actor answers the request itself between two steps:
    journals, answers the lead, stops. (Its model answers at once.)"""
    root = team_repo(tmp_path)
    model = Held()
    model.release.set()
    rt = held_runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    journal, mailbox = rt.team.journal, rt.team.mailbox

    def events(kind: str) -> list[Any]:
        return [e for e in journal.read_from(1) if e.type == kind]

    def answered() -> bool:
        return rt.roster.gone("ann") and bool(events("shutdown.acknowledged"))

    try:
        lead = Driver(lead_tools(rt.services, hooks=NO_HOOKS), "lead", root)
        lead.ok("spawn_teammate", name="ann", prompt="work")
        rid = rt.services.request_shutdown("ann", by="lead")
        assert rt.wait_until(answered, timeout=WAIT_LIMIT_S)
        [ack] = events("shutdown.acknowledged")
        assert (ack.actor, ack.data["request_id"], ack.data["approve"]) == ("ann", rid, True)
        [msg] = delivered(mailbox, "lead")
        assert (msg.type, msg.sender, msg.body["request_id"]) == ("shutdown_response", "ann", rid)
        assert msg.text == "ann is shutting down."
        answer_shutdown(rt.services, "ann", rid)  # answered again: journaled once
        assert len(events("shutdown.acknowledged")) == 1
    finally:
        model.release.set()
