"""The pure fold of team state, tested with plain events (no store, no files)."""

from __future__ import annotations

from typing import Any

import pytest

from actors.board.fold import StateGap, fold, fold_all
from actors.board.state import EMPTY, TeamState, task_number
from actors.errors import UnknownTask
from mailboxes import events as ev


class Journal:
    """Builds dense events from payloads, like a store would."""

    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def add(self, body: ev.Payload, actor: str = "lead", op_id: str | None = None) -> ev.Event:
        event = ev.Event(
            seq=len(self.events) + 1,
            ts=100.0 + len(self.events),
            type=body.TYPE,
            actor=actor,
            op_id=op_id,
            data=body.model_dump(mode="json"),
            v=body.VERSION,
        )
        self.events.append(event)
        return event

    def task(self, n: int, *deps: int, **extra: Any) -> ev.Event:
        blocked = tuple(f"task_{d}" for d in deps)
        return self.add(
            ev.TaskCreated(task_id=f"task_{n}", subject=f"s{n}", blocked_by=blocked, **extra)
        )

    def state(self) -> TeamState:
        return fold_all(EMPTY, self.events)


def test_empty_state() -> None:
    assert EMPTY.seq == 0
    assert EMPTY.next_task == 1
    assert EMPTY.ready() == []
    with pytest.raises(UnknownTask):
        EMPTY.task("task_1")


def test_fold_does_not_mutate_its_input() -> None:
    j = Journal()
    j.task(1)
    before = j.state()
    after = fold(before, j.task(2))
    assert list(before.tasks) == ["task_1"]
    assert list(after.tasks) == ["task_1", "task_2"]
    assert before.seq == 1 and after.seq == 2
    with pytest.raises(TypeError):
        after.tasks["task_3"] = after.tasks["task_1"]  # type: ignore[index]


def test_one_at_a_time_equals_batch() -> None:
    j = Journal()
    j.task(1)
    j.task(2, 1)
    j.add(ev.TaskClaimed(task_id="task_1", owner="a", epoch=1))
    j.add(ev.TaskCompleted(task_id="task_1", owner="a", epoch=1, unblocked=("task_2",)))
    state = EMPTY
    for event in j.events:
        state = fold(state, event)
    assert state == j.state()


def test_created_task_fields_and_derived_blocks() -> None:
    j = Journal()
    j.task(1)
    j.task(2, 1, description="d", metadata={"k": 1}, role="tester", plan_required=True)
    state = j.state()
    t1, t2 = state.task("task_1"), state.task("task_2")
    assert t2.blocked_by == ("task_1",)
    assert t1.blocks == ("task_2",)
    assert t1.seq == 2, "a new dependent changes the blocker's projection"
    assert (t2.description, dict(t2.metadata), t2.role) == ("d", {"k": 1}, "tester")
    assert t2.plan.required and t2.plan.status == "required"
    assert t2.created_by == "lead" and t2.created_at == 101.0
    assert state.next_task == 3


def test_ready_requires_every_blocker_completed() -> None:
    j = Journal()
    j.task(1)
    j.task(2)
    j.task(3, 1, 2)
    assert [t.id for t in j.state().ready()] == ["task_1", "task_2"]
    j.add(ev.TaskClaimed(task_id="task_1", owner="a", epoch=1))
    j.add(ev.TaskCompleted(task_id="task_1", owner="a", epoch=1))
    assert [t.id for t in j.state().ready()] == ["task_2"]
    j.add(ev.TaskClaimed(task_id="task_2", owner="b", epoch=1))
    assert j.state().ready() == []
    j.add(ev.TaskCompleted(task_id="task_2", owner="b", epoch=1))
    assert [t.id for t in j.state().ready()] == ["task_3"]


def test_role_filter() -> None:
    j = Journal()
    j.task(1, role="tester")
    j.task(2)
    state = j.state()
    assert [t.id for t in state.ready("tester", any_role=False)] == ["task_1", "task_2"]
    assert [t.id for t in state.ready(None, any_role=False)] == ["task_2"]


def test_claim_release_complete_track_holdings_and_epoch() -> None:
    j = Journal()
    j.task(1)
    j.add(ev.TaskClaimed(task_id="task_1", owner="a", epoch=1))
    state = j.state()
    assert state.holding("a") == state.task("task_1")
    assert state.task("task_1").status == "in_progress" and state.task("task_1").epoch == 1
    assert state.team_seq == 2
    j.add(ev.TaskReleased(task_id="task_1", owner="a", epoch=1, reason="owner_dead"))
    state = j.state()
    assert state.holding("a") is None
    assert (state.task("task_1").status, state.task("task_1").owner) == ("pending", None)
    j.add(ev.TaskClaimed(task_id="task_1", owner="b", epoch=2, human=True))
    j.add(ev.TaskCompleted(task_id="task_1", owner="b", epoch=2, summary="done"))
    task = j.state().task("task_1")
    assert (task.status, task.owner, task.epoch, task.summary) == ("completed", "b", 2, "done")
    assert j.state().holdings == {}


def test_update_edits_fields_edges_and_merges_metadata() -> None:
    j = Journal()
    j.task(1)
    j.task(2)
    j.task(3, 1, metadata={"a": 1, "b": 2})
    j.add(
        ev.TaskUpdated(
            task_id="task_3",
            subject="new",
            add_blocked_by=("task_2",),
            remove_blocked_by=("task_1",),
            metadata={"b": None, "c": 3},
        )
    )
    state = j.state()
    t3 = state.task("task_3")
    assert (t3.subject, t3.description) == ("new", "")
    assert t3.blocked_by == ("task_2",)
    assert dict(t3.metadata) == {"a": 1, "c": 3}
    assert state.task("task_1").blocks == ()
    assert state.task("task_2").blocks == ("task_3",)


def test_delete_drops_edges_and_frees_owner() -> None:
    j = Journal()
    j.task(1)
    j.task(2, 1)
    j.task(3, 1, 2)
    j.add(ev.TaskClaimed(task_id="task_1", owner="a", epoch=1))
    j.add(ev.TaskDeleted(task_id="task_1", force=True))
    state = j.state()
    assert state.task("task_1").status == "deleted"
    assert state.task("task_1").owner is None
    assert state.holding("a") is None
    assert state.task("task_2").blocked_by == ()
    assert state.task("task_3").blocked_by == ("task_2",)
    assert [t.id for t in state.ready()] == ["task_2"]


def test_plan_lifecycle_and_void_on_release() -> None:
    j = Journal()
    j.task(1, plan_required=True)
    j.add(ev.TaskClaimed(task_id="task_1", owner="a", epoch=1))
    j.add(ev.PlanRequested(task_id="task_1", request_id="r1", teammate="a", epoch=1))
    assert j.state().plan_requests["r1"].status == "requested"
    j.add(ev.PlanSubmitted(task_id="task_1", request_id="r1", owner="a", epoch=1, plan="p"))
    state = j.state()
    assert state.plan_requests["r1"].plan == "p"
    assert state.task("task_1").plan.status == "submitted"
    assert not state.task("task_1").plan.approved
    j.add(ev.PlanReviewed(task_id="task_1", request_id="r1", approve=True, reviewer="lead"))
    state = j.state()
    assert state.task("task_1").plan.approved
    assert "r1" not in state.plan_requests
    j.add(ev.TaskReleased(task_id="task_1", owner="a", epoch=1, reason="released"))
    plan = j.state().task("task_1").plan
    assert plan.required and plan.status == "required" and not plan.approved


def test_release_voids_pending_plan_requests() -> None:
    j = Journal()
    j.task(1)
    j.add(ev.TaskClaimed(task_id="task_1", owner="a", epoch=1))
    j.add(ev.PlanRequested(task_id="task_1", request_id="r1", teammate="a", epoch=1))
    j.add(ev.TaskReleased(task_id="task_1", owner="a", epoch=1, reason="released"))
    assert j.state().plan_requests == {}


def test_members_and_team() -> None:
    j = Journal()
    j.add(ev.TeamCreated(name="alpha"))
    j.add(ev.MemberSpawned(name="w1", role="worker", model="m", tools=("bash",)))
    j.add(ev.MemberSpawned(name="ann", role="reviewer", kind="human"))
    j.add(ev.MemberStatusChanged(name="w1", status="idle", reason="turn ended"))
    state = j.state()
    assert state.name == "alpha"
    assert state.members["w1"].status == "idle" and state.members["w1"].tools == ("bash",)
    assert state.members["ann"].kind == "human"
    j.add(ev.MemberStopped(name="w1", reason="shutdown"))
    assert j.state().members["w1"].status == "stopped"
    assert j.state().team_seq == 5


def test_worktree_binding() -> None:
    j = Journal()
    j.task(1)
    j.add(ev.WorktreeBound(name="wt1", task_id="task_1"))
    assert j.state().task("task_1").worktree == "wt1"
    j.add(ev.WorktreeRemoved(name="wt1"))
    assert j.state().task("task_1").worktree is None


def test_op_ids_and_unknown_types_only_advance_seq() -> None:
    j = Journal()
    j.task(1)
    j.add(ev.CronCancelled(cron_id="c1"), op_id="op-1")
    state = j.state()
    assert state.seq == 2
    assert state.ops == {"op-1": 2}


def test_old_events_ignored_and_gaps_refused() -> None:
    j = Journal()
    j.task(1)
    j.task(2)
    state = j.state()
    assert fold(state, j.events[0]).seq == 2
    j.task(3)
    j.task(4)
    with pytest.raises(StateGap):
        fold(state, j.events[3])


def test_find_cycle_reports_the_path() -> None:
    j = Journal()
    j.task(1)
    j.task(2, 1)
    j.task(3, 2)
    state = j.state()
    assert state.find_cycle("task_1", ["task_3"]) == ["task_1", "task_3", "task_2", "task_1"]
    assert state.find_cycle("task_1", ["task_1"]) == ["task_1", "task_1"]
    assert state.find_cycle("task_3", ["task_1"]) is None


def test_newly_ready_after_and_live_dependents() -> None:
    j = Journal()
    j.task(1)
    j.task(2)
    j.task(3, 1)
    j.task(4, 1, 2)
    state = j.state()
    assert state.newly_ready_after("task_1") == ("task_3",)
    assert state.live_dependents("task_1") == ["task_3", "task_4"]


def test_task_number() -> None:
    assert task_number("task_12") == 12
    for bad in ("task_", "task_x", "job_1"):
        with pytest.raises(UnknownTask):
            task_number(bad)


def _call(j: Journal, agent: str, task: str | None, cost: float | None, **tokens: int) -> None:
    body = ev.UsageRecorded(agent=agent, model="m", task_id=task, cost_usd=cost, **tokens)
    j.add(body, actor=agent)


def test_usage_is_folded_per_agent_per_task_and_for_the_team() -> None:
    j = Journal()
    j.task(1)
    _call(j, "lead", None, 0.5, input_tokens=100, output_tokens=10)
    _call(j, "w1", "task_1", 0.25, input_tokens=5, cache_read_input_tokens=90, output_tokens=1)
    _call(j, "w1", "task_1", None, cache_creation_input_tokens=7)
    _call(j, "w1", None, 0.125, input_tokens=1)
    state = j.state()
    assert state.usage.calls == 4 and state.usage.cost_usd == 0.875
    assert state.usage.tokens == 100 + 10 + 5 + 90 + 1 + 7 + 1
    assert state.usage.unpriced_calls == 1
    assert list(state.agent_usage) == ["lead", "w1"]
    w1 = state.agent_usage["w1"]
    assert (w1.calls, w1.input_tokens, w1.cache_read_input_tokens) == (3, 6, 90)
    assert (w1.cache_creation_input_tokens, w1.cost_usd) == (7, 0.375)
    task = state.task_usage["task_1"]
    assert (task.calls, task.tokens, task.cost_usd, task.unpriced_calls) == (2, 103, 0.25, 1)
    assert task.cache_hit_rate == 90 / (5 + 90 + 7)
    assert (state.untasked_usage.calls, state.untasked_usage.cost_usd) == (2, 0.625)
    # Usage changes neither a task's projection nor the team view.
    assert state.tasks["task_1"].seq == 1 and state.team_seq == 0


def test_usage_is_counted_once_however_the_journal_is_folded() -> None:
    j = Journal()
    for n in range(5):
        _call(j, "w1", None, 0.1, input_tokens=n)
    whole = j.state()
    stepwise = EMPTY
    for event in j.events:
        stepwise = fold(stepwise, event)
        stepwise = fold_all(stepwise, j.events)  # folding seen events again changes nothing
    assert stepwise.usage == whole.usage == whole.agent_usage["w1"]
    assert whole.usage.calls == 5 and whole.usage.input_tokens == 10
