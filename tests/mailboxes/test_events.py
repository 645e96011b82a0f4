"""Event envelope, payload models, registry and upgrade functions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mailboxes import events as ev
from mailboxes.errors import InvalidEvent

CONTRACT_TYPES = {
    "team.created",
    "member.spawned",
    "member.status_changed",
    "member.stopped",
    "task.created",
    "task.updated",
    "task.claimed",
    "task.released",
    "task.completed",
    "task.deleted",
    "task.verified",
    "plan.requested",
    "plan.submitted",
    "plan.reviewed",
    "shutdown.requested",
    "shutdown.acknowledged",
    "permission.requested",
    "permission.decided",
    "cron.scheduled",
    "cron.cancelled",
    "cron.fired",
    "job.started",
    "job.finished",
    "worktree.created",
    "worktree.bound",
    "worktree.removed",
    "worktree.merged",
    "journal.tail_repaired",
    "inbox.acknowledged",
    "usage.recorded",
    "workflow.started",
    "workflow.resumed",
    "workflow.step_completed",
    "workflow.step_started",
    "workflow.step_cached",
    "workflow.phase",
    "workflow.log",
    "workflow.finished",
    "goal.set",
    "goal.evaluated",
    "goal.cleared",
}


def test_registry_covers_exactly_the_contract_types() -> None:
    assert set(ev.PAYLOADS) == CONTRACT_TYPES
    for name, model in ev.PAYLOADS.items():
        assert name == model.TYPE
        assert model.model_config.get("frozen") is True
        assert model.model_config.get("extra") == "forbid"


def test_draft_round_trips_through_payload() -> None:
    body = ev.TaskCreated(task_id="task_1", subject="s", blocked_by=("task_0",), metadata={"k": 1})
    d = ev.draft("task.created", "lead", body, op_id="op-1")
    assert d.type == "task.created" and d.actor == "lead" and d.op_id == "op-1"
    assert d.data["blocked_by"] == ["task_0"]  # stored as plain JSON
    stored = ev.Event(seq=1, ts=1.0, **d.model_dump())
    parsed = ev.payload(stored)
    assert parsed == body
    assert isinstance(parsed, ev.TaskCreated)
    assert parsed.blocked_by == ("task_0",)


def test_draft_refuses_a_payload_of_another_type() -> None:
    with pytest.raises(InvalidEvent, match=r"task\.created"):
        ev.draft("task.deleted", "lead", ev.TaskCreated(task_id="t", subject="s"))


def test_payload_models_are_frozen_and_strict() -> None:
    claimed = ev.TaskClaimed(task_id="task_1", owner="a", epoch=1)
    with pytest.raises(ValidationError):
        claimed.owner = "b"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        ev.TaskClaimed.model_validate({"task_id": "t", "owner": "a", "epoch": 1, "extra": 1})


def test_unknown_type_and_bad_payload_are_invalid() -> None:
    with pytest.raises(InvalidEvent, match="unknown event type"):
        ev.validate_draft(ev.EventDraft(type="task.exploded", actor="lead"))
    with pytest.raises(InvalidEvent, match=r"bad task\.claimed"):
        ev.validate_draft(ev.EventDraft(type="task.claimed", actor="lead", data={"task_id": "t"}))
    with pytest.raises(InvalidEvent, match="decision"):
        ev.validate_draft(
            ev.EventDraft(
                type="permission.decided",
                actor="lead",
                data={"request_id": "r", "decision": "maybe", "by": "lead"},
            )
        )


def test_member_spawned_v1_is_upgraded_on_load() -> None:
    old = ev.Event(
        seq=3,
        ts=0.0,
        type="member.spawned",
        actor="lead",
        data={"name": "ann", "agent_type": "reviewer", "model": None, "kind": "agent"},
        v=1,
    )
    parsed = ev.payload(old)
    assert isinstance(parsed, ev.MemberSpawned)
    assert parsed.role == "reviewer" and parsed.name == "ann"
    assert old.data["agent_type"] == "reviewer"  # stored history is not rewritten


def test_current_drafts_carry_the_current_version() -> None:
    d = ev.draft("member.spawned", "lead", ev.MemberSpawned(name="ann", role="dev"))
    assert d.v == ev.MemberSpawned.VERSION == 2
    assert ev.payload(d) == ev.MemberSpawned(name="ann", role="dev")


def test_a_v1_draft_already_in_the_new_shape_passes_through() -> None:
    d = ev.EventDraft(type="member.spawned", actor="lead", data={"name": "a", "role": "dev"}, v=1)
    assert ev.payload(d) == ev.MemberSpawned(name="a", role="dev")


def test_newer_or_unupgradable_versions_are_refused() -> None:
    with pytest.raises(InvalidEvent, match="newer"):
        ev.upgrade_data("team.created", 2, {"name": "x"})
    with pytest.raises(InvalidEvent, match="no upgrade registered"):
        ev.upgrade_data("member.spawned", 0, {"name": "x", "role": "r"})


def test_registering_the_same_upgrade_twice_fails() -> None:
    with pytest.raises(ValueError, match="twice"):
        ev.upgrade("member.spawned", from_v=1)(lambda data: data)


@pytest.mark.parametrize("event_type", ["task.completed", "task.released"])
def test_v1_task_endings_load_as_not_forced(event_type: str) -> None:
    data = {"task_id": "task_1", "owner": "ann", "epoch": 1}
    if event_type == "task.released":
        data["reason"] = "released"
    old = ev.Event(seq=4, ts=0.0, type=event_type, actor="ann", data=data, v=1)
    parsed = ev.payload(old)
    assert isinstance(parsed, ev.TaskCompleted | ev.TaskReleased)
    assert parsed.forced_by is None and parsed.owner == "ann"
    body = ev.TaskCompleted(task_id="task_1", owner="ann", epoch=1, forced_by="user")
    forced = ev.draft(body.TYPE, "user", body)
    assert forced.v == ev.TaskCompleted.VERSION == 3 and ev.payload(forced) == body


def test_usage_recorded_keeps_the_tokens_and_refuses_negative_ones() -> None:
    body = ev.UsageRecorded(
        agent="w1",
        model="claude-sonnet-4-6",
        task_id="task_1",
        input_tokens=10,
        output_tokens=2,
        cache_read_input_tokens=300,
        cache_creation_input_tokens=40,
        cost_usd=0.001,
    )
    stored = ev.draft(body.TYPE, "w1", body)
    assert ev.payload(stored) == body
    unpriced = ev.payload(ev.draft(body.TYPE, "w1", ev.UsageRecorded(agent="w1", model="x")))
    assert isinstance(unpriced, ev.UsageRecorded)
    assert unpriced.cost_usd is None and unpriced.task_id is None
    with pytest.raises(ValidationError):
        ev.UsageRecorded(agent="w1", model="x", input_tokens=-1)
