"""The scenario invariants on plain data: each one holds on a clean history and names the
violation in a broken one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.board.fold import fold_all
from actors.board.state import EMPTY
from actors.scenarios.facts import Facts
from actors.scenarios.invariants import INVARIANTS
from harness.ports import Message, TextBlock, ToolResultBlock, ToolUseBlock
from mailboxes.events import Event


def ev(seq: int, type_: str, actor: str = "runtime", **data: Any) -> Event:
    return Event(seq=seq, ts=float(seq), type=type_, actor=actor, data=data)


def created(seq: int, tid: str, *blocked_by: str) -> Event:
    return ev(
        seq,
        "task.created",
        blocked_by=list(blocked_by),
        description="",
        metadata={},
        plan_required=False,
        role=None,
        subject=f"subject of {tid}",
        task_id=tid,
    )


def spawned(seq: int, name: str, plan_required: bool = False) -> Event:
    return ev(
        seq,
        "member.spawned",
        "lead",
        kind="agent",
        model="m",
        name=name,
        plan_required=plan_required,
        prompt="",
        role="general",
        tools=None,
    )


def claimed(seq: int, tid: str, owner: str, epoch: int = 1) -> Event:
    return ev(seq, "task.claimed", epoch=epoch, human=False, owner=owner, task_id=tid)


def completed(seq: int, tid: str, owner: str, epoch: int = 1) -> Event:
    return ev(
        seq, "task.completed", epoch=epoch, owner=owner, summary="done", task_id=tid, unblocked=[]
    )


def facts(events: list[Event], transcripts: dict[str, list[Message]] | None = None) -> Facts:
    head = [ev(1, "team.created", "cli", name="t")]
    history = head + events
    return Facts(Path("/nowhere"), history, fold_all(EMPTY, history), [], transcripts or {}, [])


def check(name: str, f: Facts) -> list[str]:
    return INVARIANTS[name](f)


BASE = [spawned(2, "w1"), spawned(3, "w2"), created(4, "task_1"), created(5, "task_2", "task_1")]


def test_a_clean_dag_history_holds_every_claim_invariant() -> None:
    f = facts([*BASE, claimed(6, "task_1", "w1"), completed(7, "task_1", "w1")])
    f = facts([*f.events[1:], claimed(8, "task_2", "w2"), completed(9, "task_2", "w2")])
    assert check("single_claim_per_epoch", f) == []
    assert check("claims_respect_dependencies", f) == []


def test_a_task_claimed_twice_in_one_epoch_is_named() -> None:
    f = facts([*BASE, claimed(6, "task_1", "w1"), claimed(7, "task_1", "w2")])
    assert check("single_claim_per_epoch", f) == ["task_1 claimed twice in epoch 1 (seq 7)"]


def test_a_claim_before_its_dependency_completed_is_named() -> None:
    f = facts([*BASE, claimed(6, "task_2", "w2"), claimed(7, "task_1", "w1")])
    assert check("claims_respect_dependencies", f) == ["task_2 claimed before task_1 completed"]


def turn(write_ok: bool, *, approved_first: bool) -> list[Message]:
    use = ToolUseBlock(id="t1", name="write_file", input={"path": "x.py", "content": ""})
    result = ToolResultBlock(
        tool_use_id="t1", content="Created x.py (0 bytes)", is_error=not write_ok
    )
    approval = Message(
        role="user",
        content=(
            TextBlock(
                text="[plan_approval_response from lead] Your plan for task_1 was approved by lead."
            ),
        ),
    )
    writes = [Message(role="assistant", content=(use,)), Message(role="user", content=(result,))]
    return [approval, *writes] if approved_first else [*writes, approval]


PLANNED = [spawned(2, "rae", plan_required=True), created(3, "task_1"), claimed(4, "task_1", "rae")]


def test_a_write_after_the_approval_is_fine() -> None:
    history = [
        *PLANNED,
        ev(
            5,
            "plan.reviewed",
            "lead",
            approve=True,
            feedback="",
            request_id="r",
            reviewer="lead",
            task_id="task_1",
        ),
        completed(6, "task_1", "rae"),
    ]
    f = facts(history, {"rae": turn(True, approved_first=True)})
    assert check("no_write_before_plan_approval", f) == []


def test_a_refused_write_before_the_approval_is_fine() -> None:
    f = facts(PLANNED, {"rae": turn(False, approved_first=False)})
    assert check("no_write_before_plan_approval", f) == []


def test_a_write_before_the_approval_is_named() -> None:
    f = facts(PLANNED, {"rae": turn(True, approved_first=False)})
    assert check("no_write_before_plan_approval", f) == [
        "rae wrote before approval: Created x.py (0 bytes)"
    ]


def test_completing_a_planned_task_without_an_approval_is_named() -> None:
    f = facts([*PLANNED, completed(5, "task_1", "rae")], {"rae": []})
    assert check("no_write_before_plan_approval", f) == [
        "task_1 completed without an approved plan"
    ]


def test_an_edit_before_the_approval_is_named_too() -> None:
    use = ToolUseBlock(id="t1", name="edit_file", input={"path": "x.py"})
    result = ToolResultBlock(tool_use_id="t1", content="Edited x.py\n@@ -1 +1 @@", is_error=False)
    writes = [Message(role="assistant", content=(use,)), Message(role="user", content=(result,))]
    f = facts(PLANNED, {"rae": writes})
    assert check("no_write_before_plan_approval", f) == ["rae wrote before approval: Edited x.py"]


def test_a_teammate_without_a_plan_gate_may_write_at_once() -> None:
    history = [spawned(2, "w1"), created(3, "task_1"), claimed(4, "task_1", "w1")]
    f = facts([*history, completed(5, "task_1", "w1")], {"w1": turn(True, approved_first=False)})
    assert check("no_write_before_plan_approval", f) == []


def test_a_rejected_plan_is_no_approval() -> None:
    review = ev(
        5,
        "plan.reviewed",
        "lead",
        approve=False,
        feedback="no",
        request_id="r",
        reviewer="lead",
        task_id="task_1",
    )
    f = facts([*PLANNED, review, completed(6, "task_1", "rae")], {"rae": []})
    assert check("no_write_before_plan_approval", f) == [
        "task_1 completed without an approved plan"
    ]


def test_a_task_completed_twice_is_named() -> None:
    f = facts([*BASE, claimed(6, "task_1", "w1"), completed(7, "task_1", "w1")])
    f = facts([*f.events[1:], claimed(8, "task_1", "w2", epoch=2), completed(9, "task_1", "w2", 2)])
    assert check("single_claim_per_epoch", f) == ["task_1 completed twice (seq 9)"]


def test_a_teammate_that_submitted_a_plan_is_gated_by_it() -> None:
    history = [spawned(2, "w1"), created(3, "task_1"), claimed(4, "task_1", "w1")]
    submitted = ev(
        5,
        "plan.submitted",
        "runtime",
        task_id="task_1",
        request_id="r",
        owner="w1",
        epoch=1,
        plan="p",
    )
    # gated even once the task went to someone else (w2 claimed it again, in a new epoch)
    later = claimed(6, "task_1", "w2", epoch=2)
    f = facts([*history, submitted, later], {"w1": turn(True, approved_first=False)})
    assert f.state.tasks["task_1"].owner == "w2"
    assert check("no_write_before_plan_approval", f) == [
        "w1 wrote before approval: Created x.py (0 bytes)"
    ]
