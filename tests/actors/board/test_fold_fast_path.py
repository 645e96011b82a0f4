"""The fold reads the hot events (task creation, claim, release, completion, model usage, member
status) straight from ``event.data`` (no pydantic validation per event), and every other event
type it folds through a plain namespace of the payload's values (``_plain_body``), and gives
exactly the state the typed-payload path gives, for every shape of data: current ones, older
versions, values pydantic would coerce, and bad data (refused the same way). Folding canonical
events imports no pydantic."""

from __future__ import annotations

import gc
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from actors.board import fold as fold_module
from actors.board.fold import fold_all
from actors.board.state import EMPTY, Member, Task, TaskPlan, TeamState
from mailboxes import events as ev
from mailboxes.errors import InvalidEvent

FAST_PATHS = (
    "_claim_args",
    "_complete_args",
    "_created_args",
    "_release_args",
    "_usage_args",
    "_status_args",
    "_plain_body",
)


def _event(seq: int, type_: str, data: dict[str, Any], v: int, actor: str = "w") -> ev.Event:
    return ev.Event(seq=seq, ts=100.0 + seq, type=type_, actor=actor, data=data, v=v)


def _typed(seq: int, body: ev.Payload, actor: str = "w") -> ev.Event:
    return _event(seq, body.TYPE, body.model_dump(mode="json"), body.VERSION, actor)


def _slow(state: TeamState, events: list[ev.Event], monkeypatch: pytest.MonkeyPatch) -> TeamState:
    """The fold with the fast path switched off: every event through ``payload``."""
    with monkeypatch.context() as patch:
        for name in FAST_PATHS:
            patch.setattr(fold_module, name, lambda _event: None)
        return fold_all(state, events)


def _workload(seed: int, count: int) -> list[ev.Event]:
    """A random but valid history: creations (with dependencies, metadata, plans, roles),
    claims (human or not), releases, completions (with and without commits), updates,
    worktrees, plan events and usage."""
    rnd = random.Random(seed)
    events: list[ev.Event] = []
    owners: dict[str, str] = {}
    epochs: dict[str, int] = {}
    tasks: list[str] = []

    def add(body: ev.Payload, actor: str = "w") -> None:
        events.append(_typed(len(events) + 1, body, actor))

    add(ev.WorktreeCreated(name="wt1", branch="b", base="main", path="/x"), "lead")
    while len(events) < count:
        roll = rnd.random()
        free = [t for t in tasks if t not in owners]
        if roll < 0.3 or not tasks:
            tid = f"task_{len(tasks) + 1}"
            deps = tuple(rnd.sample(tasks, min(len(tasks), rnd.randint(0, 2))))
            add(
                ev.TaskCreated(
                    task_id=tid,
                    subject=f"s {tid}",
                    description=rnd.choice(["", "d"]),
                    blocked_by=deps,
                    metadata=rnd.choice([{}, {"k": 1, "n": None}]),
                    plan_required=rnd.random() < 0.2,
                    role=rnd.choice([None, "dev"]),
                    verify=rnd.choice([None, "true"]),
                ),
                "lead",
            )
            tasks.append(tid)
        elif roll < 0.55 and free:
            tid = rnd.choice(free)
            owner = f"w{rnd.randint(1, 4)}"
            epochs[tid] = epochs.get(tid, 0) + 1
            owners[tid] = owner
            add(
                ev.TaskClaimed(
                    task_id=tid, owner=owner, epoch=epochs[tid], human=rnd.random() < 0.1
                )
            )
        elif roll < 0.65 and owners:
            tid = rnd.choice(sorted(owners))
            add(
                ev.TaskReleased(
                    task_id=tid,
                    owner=owners.pop(tid),
                    epoch=epochs[tid],
                    reason="r",
                    forced_by=rnd.choice([None, "me"]),
                )
            )
        elif roll < 0.85 and owners:
            tid = rnd.choice(sorted(owners))
            if rnd.random() < 0.2:
                add(ev.WorktreeBound(name="wt1", task_id=tid), "lead")
            add(
                ev.TaskCompleted(
                    task_id=tid,
                    owner=owners.pop(tid),
                    epoch=epochs[tid],
                    summary=rnd.choice(["", "ok"]),
                    unblocked=tuple(rnd.sample(tasks, 1)),
                    commit=rnd.choice([None, "abc"]),
                    remote=rnd.choice([None, "wt/wt1"]),
                )
            )
        elif roll < 0.88:
            tid = rnd.choice(tasks)
            add(ev.TaskUpdated(task_id=tid, subject="new", metadata={"k": 2}), "lead")
        elif roll < 0.93:
            add(
                ev.MemberStatusChanged(
                    name=f"w{rnd.randint(1, 5)}",
                    status=rnd.choice(["active", "idle", "stopping"]),
                    reason=rnd.choice(["", "waiting"]),
                ),
                "runtime",
            )
        else:
            add(
                ev.UsageRecorded(
                    agent=f"w{rnd.randint(1, 3)}",
                    model="m",
                    task_id=rnd.choice([None, *tasks[-2:]]),
                    input_tokens=rnd.randint(0, 9),
                    output_tokens=rnd.randint(0, 9),
                    cache_read_input_tokens=rnd.choice([0, 5]),
                    cache_creation_input_tokens=rnd.choice([0, 7]),
                    cost_usd=rnd.choice([None, 0.0, 0.5, 1e-6]),
                )
            )
    return events


@pytest.mark.parametrize("seed", range(5))
def test_the_fast_path_folds_a_history_to_the_same_state(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _workload(seed, 600)
    fast = fold_all(EMPTY, events)
    assert fast == _slow(EMPTY, events, monkeypatch)
    assert repr(fast) == repr(_slow(EMPTY, events, monkeypatch))
    # ... and in pieces, from an intermediate state
    half = fold_all(EMPTY, events[:300])
    assert fold_all(half, events[300:]) == _slow(half, events[300:], monkeypatch) == fast


def test_canonical_task_events_need_no_pydantic_validation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = [
        _typed(1, ev.TaskCreated(task_id="task_1", subject="s", blocked_by=(), metadata={"a": 1})),
        _typed(2, ev.TaskCreated(task_id="task_2", subject="t", blocked_by=("task_1",))),
        _typed(3, ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1)),
        _typed(4, ev.TaskReleased(task_id="task_1", owner="w1", epoch=1, reason="r")),
        _typed(5, ev.TaskClaimed(task_id="task_1", owner="w2", epoch=2, human=True)),
        _typed(6, ev.TaskCompleted(task_id="task_1", owner="w2", epoch=2, summary="ok")),
        _typed(7, ev.UsageRecorded(agent="w2", model="m", task_id="task_1", input_tokens=3)),
        _typed(
            8,
            ev.UsageRecorded(
                agent="w2",
                model="m",
                output_tokens=4,
                cache_read_input_tokens=5,
                cache_creation_input_tokens=6,
                cost_usd=0.25,
            ),
        ),
        _typed(9, ev.MemberStatusChanged(name="w2", status="idle", reason="done")),
    ]

    def refuse(_event: ev.Event) -> ev.Payload:
        raise AssertionError("payload() called on the fast path")

    monkeypatch.setattr(fold_module, "payload", refuse)
    state = fold_all(EMPTY, events)
    one = state.task("task_1")
    assert (one.status, one.owner, one.epoch, one.human, one.summary) == (
        "completed",
        "w2",
        2,
        True,
        "ok",
    )
    assert state.task("task_1").blocks == ("task_2",)
    assert dict(one.metadata) == {"a": 1}
    assert (state.usage.calls, state.usage.input_tokens, state.usage.output_tokens) == (2, 3, 4)
    assert (state.usage.cost_usd, state.usage.unpriced_calls) == (0.25, 1)
    assert state.task_usage["task_1"] == (1, 3, 0, 0, 0, 0.0, 1)
    assert state.untasked_usage == (1, 0, 4, 5, 6, 0.25, 0)
    assert state.agent_usage["w2"] == state.usage == (2, 3, 4, 5, 6, 0.25, 1)
    assert (state.members["w2"].status, state.members["w2"].reason) == ("idle", "done")


ODD_SHAPES = [
    # values pydantic coerces, which the fast path leaves to it
    ("task.claimed", {"task_id": "task_1", "owner": "w1", "epoch": "3"}, 1),
    ("task.claimed", {"task_id": "task_1", "owner": "w1", "epoch": 2.0}, 1),
    ("task.claimed", {"task_id": "task_1", "owner": "w1", "epoch": 1, "human": 0}, 1),
    ("task.created", {"task_id": "task_2", "subject": "s", "blocked_by": ("task_1",)}, 2),
    # older versions, upgraded by payload()
    ("task.created", {"task_id": "task_2", "subject": "s"}, 1),
    ("task.completed", {"task_id": "task_1", "owner": "w1", "epoch": 1}, 1),
    ("task.completed", {"task_id": "task_1", "owner": "w1", "epoch": 1, "summary": "x"}, 2),
    ("task.released", {"task_id": "task_1", "owner": "w1", "epoch": 1, "reason": "r"}, 1),
    # bad data: refused the same way
    ("task.claimed", {"task_id": "task_1", "owner": "w1", "epoch": "x"}, 1),
    ("task.claimed", {"task_id": "task_1", "owner": "w1"}, 1),
    ("task.claimed", {"task_id": "task_1", "owner": "w1", "epoch": 1, "extra": 1}, 1),
    ("task.created", {"task_id": "task_2", "subject": 5}, 2),
    ("task.created", {"task_id": "task_2", "subject": "s", "blocked_by": [1]}, 2),
    ("task.created", {"task_id": "task_2", "subject": "s", "metadata": []}, 2),
    ("task.completed", {"task_id": "task_1", "owner": "w1", "epoch": 1, "unblocked": "x"}, 3),
    ("task.completed", {"task_id": "task_1", "owner": "w1", "epoch": 1, "commit": 7}, 3),
    ("task.released", {"task_id": "task_1", "owner": "w1", "epoch": 1}, 2),
    ("task.completed", {"task_id": "task_1", "owner": "w1", "epoch": 1}, 9),
    # usage: coerced (an int cost becomes a float, a bool or "3" a count), bad or negative values
    ("usage.recorded", {"agent": "w1", "model": "m", "cost_usd": 1}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "input_tokens": True}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "output_tokens": "3"}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "input_tokens": 2.0}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "task_id": "task_1", "cost_usd": None}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "cache_read_input_tokens": -1}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "cost_usd": -0.5}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "cost_usd": float("inf")}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "cost_usd": float("nan")}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "cost_usd": "0.5"}, 1),
    ("usage.recorded", {"agent": "w1", "model": 3}, 1),
    ("usage.recorded", {"agent": "w1"}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "task_id": 1}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m", "tokens": 1}, 1),
    ("usage.recorded", {"agent": "w1", "model": "m"}, 2),
    # member status: a new member, coerced or bad values, unknown keys, other versions
    ("member.status_changed", {"name": "w9", "status": "idle"}, 1),
    ("member.status_changed", {"name": "w1", "status": "idle", "reason": 5}, 1),
    ("member.status_changed", {"name": "w1", "status": None}, 1),
    ("member.status_changed", {"name": "w1"}, 1),
    ("member.status_changed", {"name": "w1", "status": "idle", "why": "x"}, 1),
    ("member.status_changed", {"name": "w1", "status": "idle"}, 2),
]


@pytest.mark.parametrize(("type_", "data", "v"), ODD_SHAPES)
def test_odd_shapes_fold_or_fail_exactly_as_the_typed_payloads_do(
    type_: str, data: dict[str, Any], v: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = fold_all(
        EMPTY,
        [
            _typed(1, ev.TaskCreated(task_id="task_1", subject="s")),
            _typed(2, ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1)),
            _typed(3, ev.MemberSpawned(name="w1", role="dev")),
            _typed(4, ev.UsageRecorded(agent="w1", model="m", input_tokens=1, cost_usd=0.5)),
        ],
    )
    events = [_event(5, type_, data, v)]
    try:
        expected: TeamState | str = _slow(base, events, monkeypatch)
    except InvalidEvent as exc:
        expected = f"InvalidEvent: {exc}"
    try:
        got: TeamState | str = fold_all(base, events)
    except InvalidEvent as exc:
        got = f"InvalidEvent: {exc}"
    assert got == expected
    assert repr(got) == repr(expected)  # the same types too: 3 == 3.0 but a total must stay int


def test_the_fold_pauses_the_garbage_collector_and_leaves_it_as_it_found_it() -> None:
    events = _workload(1, 50)
    enabled: list[bool] = []

    def read() -> Iterator[ev.Event]:  # like a journal replay: events read while folding
        for event in events:
            enabled.append(gc.isenabled())
            yield event

    assert gc.isenabled()
    assert fold_all(EMPTY, read()) == fold_all(EMPTY, events)
    assert gc.isenabled()
    assert enabled[0] and not any(enabled[1:])  # paused once the first new event is seen
    bad = _event(51, "task.claimed", {"task_id": "task_1"}, 1)
    with pytest.raises(InvalidEvent):
        fold_all(fold_all(EMPTY, events), [bad])
    assert gc.isenabled()  # ... also when an event is refused
    gc.disable()
    try:
        fold_all(EMPTY, events)
        assert not gc.isenabled()  # a caller's own pause is left alone
    finally:
        gc.enable()


def test_a_created_task_and_a_status_change_hold_exactly_their_events_values() -> None:
    # both paths share these builders, so the equivalence tests above cannot see their mistakes
    events = [
        _typed(1, ev.MemberSpawned(name="w1", role="dev", model="m"), "lead"),
        _typed(
            2,
            ev.TaskCreated(
                task_id="task_7",
                subject="s",
                description="d",
                metadata={"a": 1},
                plan_required=True,
                role="dev",
                verify="true",
            ),
            "lead",
        ),
        _typed(3, ev.MemberStatusChanged(name="w1", status="idle", reason="waiting"), "rt"),
        _typed(4, ev.MemberStatusChanged(name="w2", status="active"), "rt"),
    ]
    state = fold_all(EMPTY, events)
    assert state.task("task_7") == Task(
        id="task_7",
        subject="s",
        description="d",
        plan=TaskPlan(required=True, status="required"),
        role="dev",
        created_by="lead",
        created_at=102.0,
        updated_at=102.0,
        metadata=MappingProxyType({"a": 1}),
        verify="true",
        seq=2,
    )
    assert state.next_task == 8
    assert state.members["w1"] == Member(
        name="w1", role="dev", model="m", status="idle", reason="waiting", joined_at=101.0
    )
    assert state.members["w2"] == Member(name="w2", status="active", joined_at=104.0)
    assert state.team_seq == 4


def test_the_fast_paths_know_the_current_shape_of_every_payload_they_read() -> None:
    from mailboxes import payloads

    spelled = {
        "task.created": (fold_module._CREATED_V, fold_module._CREATED_KEYS),
        "task.claimed": (fold_module._CLAIMED_V, fold_module._CLAIMED_KEYS),
        "task.released": (fold_module._RELEASED_V, fold_module._RELEASED_KEYS),
        "task.completed": (fold_module._COMPLETED_V, fold_module._COMPLETED_KEYS),
        "usage.recorded": (fold_module._USAGE_V, fold_module._USAGE_KEYS),
        "member.status_changed": (fold_module._STATUS_V, fold_module._STATUS_KEYS),
    }
    for type_, (version, keys, _) in fold_module._SHAPES.items():
        spelled[type_] = (version, keys)
    assert set(spelled) == set(fold_module._HANDLERS)  # every folded type has a fast path
    for type_, (version, keys) in spelled.items():
        model = payloads.PAYLOADS[type_]
        assert (version, keys) == (model.VERSION, frozenset(model.model_fields)), type_
    for type_, (_, _, fields) in fold_module._SHAPES.items():
        model = payloads.PAYLOADS[type_]
        for name, _, default in fields:
            info = model.model_fields[name]
            if default is fold_module._REQUIRED:
                assert info.is_required(), (type_, name)
            else:
                assert default == info.get_default(call_default_factory=True), (type_, name)


OTHER_TYPES: list[ev.Payload] = [
    ev.TeamCreated(name="crew"),
    ev.MemberSpawned(
        name="w3", role="dev", model="m", kind="human", prompt="p", plan_required=True, tools=("x",)
    ),
    ev.MemberSpawned(name="w4", role="dev"),
    ev.TaskCreated(task_id="task_2", subject="two"),
    ev.TaskUpdated(
        task_id="task_2",
        subject="2",
        description="d",
        add_blocked_by=("task_1",),
        metadata={"k": None, "j": [1]},
    ),
    ev.TaskUpdated(task_id="task_2", remove_blocked_by=("task_1",)),
    ev.PlanRequested(task_id="task_1", request_id="r1", teammate="w1", epoch=1),
    ev.PlanSubmitted(task_id="task_1", request_id="r1", owner="w1", epoch=1, plan="do it"),
    ev.PlanReviewed(task_id="task_1", request_id="r1", approve=False, reviewer="lead"),
    ev.TaskVerified(
        task_id="task_1", command="make", stage="merge", passed=False, exit_code=2, output="o"
    ),
    ev.TaskVerified(task_id="task_1", command="make", stage="complete", passed=True),
    ev.WorktreeCreated(name="wt", branch="b", base="main", path="/p"),
    ev.WorktreeBound(name="wt", task_id="task_1"),
    ev.WorktreeMerged(name="wt", into="main", commit="c0ffee", squash=True),
    ev.WorktreeRemoved(name="wt", branch_deleted=True),
    ev.MemberStopped(name="w3", reason="done"),
    ev.TaskDeleted(task_id="task_2", force=True),
]


def test_the_other_folded_types_need_no_payload_model(monkeypatch: pytest.MonkeyPatch) -> None:
    events = [
        _typed(1, ev.TaskCreated(task_id="task_1", subject="s")),
        _typed(2, ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1)),
    ]
    events += [_typed(len(events) + 1 + i, body) for i, body in enumerate(OTHER_TYPES)]
    expected = _slow(EMPTY, events, monkeypatch)

    def refuse(_event: ev.Event) -> ev.Payload:
        raise AssertionError("payload() called on the fast path")

    monkeypatch.setattr(fold_module, "payload", refuse)
    state = fold_all(EMPTY, events)
    assert state == expected and repr(state) == repr(expected)
    assert state.name == "crew" and state.members["w3"].tools == ("x",)
    assert state.task("task_2").status == "deleted" and state.worktrees["wt"].removed


OTHER_ODD_SHAPES = [
    ("member.spawned", {"name": "w1", "agent_type": "dev"}, 1),  # v1, upgraded
    ("member.spawned", {"name": "w1", "role": "dev", "kind": "robot"}, 2),
    ("member.spawned", {"name": "w1", "role": "dev", "tools": ["a", 1]}, 2),
    ("member.spawned", {"name": "w1", "role": "dev", "plan_required": 1}, 2),
    ("member.spawned", {"name": "w1"}, 2),
    ("team.created", {"name": "x", "extra": 1}, 1),
    ("team.created", {"name": "x"}, 2),
    ("task.updated", {"task_id": "task_1", "metadata": [1]}, 1),
    ("task.updated", {"task_id": "task_1", "add_blocked_by": "task_1"}, 1),
    ("task.deleted", {"task_id": "task_1", "force": "yes"}, 1),
    ("task.verified", {"task_id": "task_1", "command": "c", "stage": "later", "passed": True}, 1),
    ("task.verified", {"task_id": "task_1", "command": "c", "stage": "merge", "passed": 1}, 1),
    ("plan.requested", {"task_id": "task_1", "request_id": "r", "teammate": "w1", "epoch": "1"}, 1),
    ("worktree.created", {"name": "wt", "branch": "b", "base": "m"}, 1),
    ("worktree.merged", {"name": "wt", "into": "m", "commit": "c", "squash": None}, 1),
]


@pytest.mark.parametrize(("type_", "data", "v"), OTHER_ODD_SHAPES)
def test_odd_shapes_of_the_other_types_fold_or_fail_as_the_typed_payloads_do(
    type_: str, data: dict[str, Any], v: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    test_odd_shapes_fold_or_fail_exactly_as_the_typed_payloads_do(type_, data, v, monkeypatch)


def test_folding_a_journal_of_canonical_events_imports_no_pydantic(tmp_path: Path) -> None:
    from mailboxes.journal.store import FileJournal

    journal = FileJournal(tmp_path)
    bodies = [
        ev.TaskCreated(task_id="task_1", subject="s"),
        ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1),
        *OTHER_TYPES,
    ]
    drafts = [ev.draft(b.TYPE, "lead", b) for b in bodies]
    journal.append(lambda _seen: drafts, after=0)
    journal.close()
    code = (
        "import sys\n"
        "from actors.board.fold import fold_all\n"
        "from actors.board.state import EMPTY\n"
        "from mailboxes.journal.store import FileJournal\n"
        f"state = fold_all(EMPTY, FileJournal({str(tmp_path)!r}).read_from(1))\n"
        "print(state.seq, sorted(m for m in sys.modules if m.startswith('pydantic')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(len(drafts)), "[]"]
