"""Board behaviours mutation testing of ``actors/board/rules.py``, ``fold.py`` and ``state.py``
found unchecked, one test each: where a claim's search for a ready task starts (the pending
hint) and when the fold shares or lowers it, how many changes ``TeamState.recent`` keeps, the
exact refusals and errors a member sees, event shapes the fold must refuse like the payload
models do, the defaults a folded task or worktree starts with, and that a lease store that
cannot be reached releases nobody's claim."""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import MappingProxyType

import pytest

from actors.board.board import Board
from actors.board.fold import RECENT_MAX, fold_all
from actors.board.rules import (
    ClaimResult,
    Completion,
    alive,
    check_member_name,
    first_claimable,
)
from actors.board.state import EMPTY, PendingHint, Task, TeamState, UsageTotals
from actors.errors import InvalidMemberName, InvalidTransition, NotOwner
from mailboxes import events as ev
from mailboxes.errors import InvalidEvent, LivenessUnavailable
from mailboxes.journal.store import FileJournal
from mailboxes.liveness import FlockLiveness
from tests.actors.board.test_fold_fast_path import _event, _typed


@pytest.fixture
def board(tmp_path: Path) -> Board:
    team = tmp_path / ".team"
    team.mkdir()
    return Board(FileJournal(team), actor="lead")


def _pending(count: int) -> TeamState:
    """``count`` pending tasks, folded from their events."""
    created = [
        _typed(n, ev.TaskCreated(task_id=f"task_{n}", subject=f"s{n}")) for n in range(1, count + 1)
    ]
    return fold_all(EMPTY, created)


@pytest.mark.parametrize("start", [2, 3, 5])
def test_the_search_for_a_ready_task_starts_at_the_hint(start: int) -> None:
    # A hint that (falsely) says nothing below ``start`` is pending shows where the walk
    # begins: a claim late in a long run must not walk past every finished task again.
    state = _pending(6)
    hinted = dataclasses.replace(state, pending_hint=PendingHint(state.tasks, start))
    assert hinted.pending_from() == start
    found = first_claimable(hinted, None)
    assert found is not None and found.id == f"task_{start}"
    assert first_claimable(state, None) == state.tasks["task_1"]  # no hint: from the start


def test_a_task_map_with_a_gap_is_walked_whole() -> None:
    # Not dense (a state built by hand): the task at the hint's position is not task_<hint>,
    # so the search cannot skip by position and walks every task.
    tasks = MappingProxyType(
        {
            "task_1": Task(id="task_1", subject="a", status="completed", owner="w1"),
            "task_3": Task(id="task_3", subject="c"),
            "task_4": Task(id="task_4", subject="d"),
        }
    )
    state = TeamState(tasks=tasks, next_task=5, pending_hint=PendingHint(tasks, 3))
    found = first_claimable(state, None)
    assert found is not None and found.id == "task_3"


def test_claim_answers_are_immutable() -> None:
    task = Task(id="task_1", subject="s")
    result = ClaimResult(True, task)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ok = False  # type: ignore[misc]
    done = Completion(task, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.unblocked = ("task_2",)  # type: ignore[misc]


def test_member_name_refusals_say_exactly_why() -> None:
    with pytest.raises(InvalidMemberName) as unsafe:
        check_member_name("-rf")
    assert (
        unsafe.value.why
        == "use 1-64 letters, digits, '-', '_' or '.', not starting with '-' or '.'"
    )
    with pytest.raises(InvalidMemberName) as reserved:
        check_member_name("user")
    assert reserved.value.why == "the name is reserved for the program itself"


def test_editing_a_deleted_task_says_it_is_deleted(board: Board) -> None:
    board.create("a")
    board.delete("task_1")
    with pytest.raises(InvalidTransition) as info:
        board.update("task_1", subject="b")
    assert info.value.status == "deleted"
    assert str(info.value) == "cannot edit task task_1: it is deleted"


def test_a_fenced_write_by_a_stranger_names_the_holder(board: Board) -> None:
    board.create("a")
    claim = board.claim("task_1", "w1")
    with pytest.raises(NotOwner) as held:
        board.complete("task_1", "w2", claim.epoch)
    assert held.value.owner == "w1"
    assert "it is held by w1" in str(held.value)
    board.complete("task_1", "w1", claim.epoch)
    with pytest.raises(NotOwner) as done:
        board.release("task_1", "w1", claim.epoch)
    assert done.value.owner is None  # completed: it keeps w1 for the record, held by nobody


def test_a_claim_blocked_twice_names_every_unfinished_blocker(board: Board) -> None:
    board.create("a")
    board.create("b")
    board.create("c", blocked_by=["task_1", "task_2"])
    refused = board.claim("task_3", "w1")
    assert not refused.ok and refused.reason == "blocked by task_1, task_2"


class _Unreachable:
    """A lease store that cannot be reached (a NATS cluster down): every check raises."""

    def hold(self, agent: str) -> AbstractContextManager[None]:
        return nullcontext()

    def is_alive(self, agent: str) -> bool:
        raise LivenessUnavailable("the lease store cannot be reached")

    def close(self) -> None:
        pass


def test_an_unreachable_lease_store_releases_no_claim(tmp_path: Path) -> None:
    team = tmp_path / ".team"
    team.mkdir()
    Board(FileJournal(team)).create("a")
    assert Board(FileJournal(team)).claim("task_1", "w1").ok
    assert alive(_Unreachable(), "w1")  # nobody is judged dead on a guess
    blind = Board(FileJournal(team), liveness=_Unreachable(), actor="runtime")
    assert blind.reap_dead_owners() == []
    assert blind.get("task_1").owner == "w1"
    # The same claim with a store that answers (nobody holds w1's lease) is released.
    leases = FlockLiveness(team / "members")
    released = Board(FileJournal(team), liveness=leases, actor="runtime").reap_dead_owners()
    assert [t.id for t in released] == ["task_1"]


_CLAIMED = [
    _typed(1, ev.TaskCreated(task_id="task_1", subject="s")),
    _typed(2, ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1)),
]


@pytest.mark.parametrize(
    ("type_", "data", "v"),
    [
        # an unknown key, or a version newer than this program, is refused, never half-read
        ("task.created", {"task_id": "task_2", "subject": "s", "colour": "red"}, 2),
        ("task.created", {"task_id": "task_2", "subject": "s"}, 3),
        (
            "task.released",
            {"task_id": "task_1", "owner": "w1", "epoch": 1, "reason": "r", "x": 1},
            2,
        ),
        ("task.released", {"task_id": "task_1", "owner": "w1", "epoch": 1, "reason": "r"}, 3),
        ("task.completed", {"task_id": "task_1", "owner": "w1", "epoch": 1, "forced_by": 5}, 3),
        # a value outside a field's allowed words
        ("member.spawned", {"name": "w2", "role": "dev", "kind": "robot"}, 2),
        (
            "task.verified",
            {"task_id": "task_1", "command": "true", "stage": "deploy", "passed": True},
            1,
        ),
    ],
)
def test_events_the_payload_models_refuse_are_refused_by_the_fold(
    type_: str, data: dict[str, object], v: int
) -> None:
    base = fold_all(EMPTY, _CLAIMED)
    with pytest.raises(InvalidEvent):
        fold_all(base, [_event(3, type_, data, v)])


def _creations(first: int, count: int, seq: int) -> list[ev.Event]:
    return [
        _typed(seq + i, ev.TaskCreated(task_id=f"task_{first + i}", subject="s"))
        for i in range(count)
    ]


def test_recent_keeps_exactly_recent_max_changes() -> None:
    one = fold_all(EMPTY, _creations(1, 1, 1))
    assert (one.recent, one.recent_from) == (("task_1",), 1)
    full = fold_all(one, _creations(2, RECENT_MAX - 1, 2))  # exactly RECENT_MAX in all
    assert (len(full.recent), full.recent_from) == (RECENT_MAX, 1)
    assert [t.id for t in full.changed_since(1)] == [f"task_{n}" for n in range(1, RECENT_MAX + 1)]


def test_a_batch_of_exactly_recent_max_changes_keeps_them_and_the_hint() -> None:
    done = fold_all(
        EMPTY, [*_CLAIMED, _typed(3, ev.TaskCompleted(task_id="task_1", owner="w1", epoch=1))]
    )
    assert first_claimable(done, None) is None
    assert done.pending_from() == 2  # task_1 is completed: the search starts at the next task
    after = fold_all(done, _creations(2, RECENT_MAX, 4))  # RECENT_MAX changes in one batch
    # done's 3 changes and these do not fit together: this batch's alone, complete from seq 4
    assert (len(after.recent), after.recent_from) == (RECENT_MAX, 4)
    assert after.pending_from() == 2  # not a replay: the bound is kept, lowered to the new tasks
    found = first_claimable(after, None)
    assert found is not None and found.id == "task_2"


def test_a_fold_without_task_changes_shares_what_searches_learn() -> None:
    state = fold_all(EMPTY, [*_CLAIMED, *_creations(2, 3, 3)])
    joined = fold_all(state, [_typed(6, ev.MemberSpawned(name="w2", role="dev"))])
    assert joined.tasks is state.tasks
    assert first_claimable(joined, None) == state.tasks["task_2"]
    # the same task map, the same fact: the search on the newer state taught the older one too
    assert state.pending_from() == joined.pending_from() == 2


def test_removing_a_blocker_a_task_never_had_touches_only_that_task() -> None:
    # The board only journals removals of real blockers, but the fold records whatever the
    # journal holds (an event from another writer): nothing else changes, nothing breaks.
    state = fold_all(EMPTY, _creations(1, 2, 1))
    removed = ev.TaskUpdated(task_id="task_2", remove_blocked_by=("task_1", "task_9"))
    after = fold_all(state, [_typed(3, removed)])
    assert after.tasks["task_1"] == state.tasks["task_1"]  # its seq too: no projection write
    assert after.tasks["task_2"].seq == 3 and after.tasks["task_2"].blocked_by == ()
    assert [t.id for t in after.changed_since(3)] == ["task_2"]


def test_a_rejected_plan_reads_rejected() -> None:
    events = [
        *_CLAIMED,
        _typed(3, ev.PlanRequested(task_id="task_1", request_id="r1", teammate="w1", epoch=1)),
        _typed(
            4, ev.PlanSubmitted(task_id="task_1", request_id="r1", owner="w1", epoch=1, plan="p")
        ),
        _typed(
            5,
            ev.PlanReviewed(
                task_id="task_1", request_id="r1", approve=False, feedback="no", reviewer="lead"
            ),
        ),
    ]
    plan = fold_all(EMPTY, events).task("task_1").plan
    assert (plan.status, plan.feedback, plan.approved) == ("rejected", "no", False)


def test_a_persons_claim_released_or_deleted_is_no_longer_a_persons(board: Board) -> None:
    board.create("a")
    board.create("b")
    first = board.claim("task_1", "ann", human=True)
    assert board.get("task_1").human
    released = board.release("task_1", "ann", first.epoch)
    assert (released.status, released.owner, released.human) == ("pending", None, False)
    board.claim("task_2", "ann", human=True)
    deleted = board.delete("task_2", force=True)
    assert (deleted.status, deleted.owner, deleted.human) == ("deleted", None, False)


def test_a_search_on_a_state_without_a_hint_walks_every_task() -> None:
    tasks = _pending(3).tasks
    by_hand = TeamState(tasks=tasks, next_task=4)  # built by hand: no hint at all
    assert first_claimable(by_hand, None) == tasks["task_1"]
    assert by_hand.pending_from() == 1


def test_team_states_are_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        EMPTY.seq = 5  # type: ignore[misc]


def test_a_created_task_is_nobodys_and_a_created_worktree_is_not_removed(board: Board) -> None:
    task = board.create("a")
    assert (task.owner, task.human, task.status) == (None, False, "pending")
    created = ev.WorktreeCreated(name="wt1", branch="b", base="main", path=".worktrees/wt1")
    record = fold_all(EMPTY, [_typed(1, created)]).worktrees["wt1"]
    assert (record.removed, record.task_id, record.created_at) == (False, None, 101.0)


def test_ready_lists_every_roles_tasks_unless_asked_not_to() -> None:
    events = [
        _typed(1, ev.TaskCreated(task_id="task_1", subject="t", role="tester")),
        _typed(2, ev.TaskCreated(task_id="task_2", subject="s")),
    ]
    state = fold_all(EMPTY, events)
    assert [t.id for t in state.ready()] == ["task_1", "task_2"]
    assert [t.id for t in state.ready("dev", any_role=False)] == ["task_2"]


def test_usage_without_input_has_no_cache_hits_and_rates_keep_four_places() -> None:
    assert UsageTotals(calls=1, output_tokens=5).cache_hit_rate == 0.0
    usage = UsageTotals(calls=1, input_tokens=2, cache_read_input_tokens=1)
    assert usage.as_json()["cache_hit_rate"] == 0.3333


def test_an_in_progress_dependent_is_live() -> None:
    events = [
        *_creations(1, 2, 1),
        _typed(3, ev.TaskClaimed(task_id="task_2", owner="w1", epoch=1)),
        _typed(4, ev.TaskUpdated(task_id="task_2", add_blocked_by=("task_1",))),
    ]
    assert fold_all(EMPTY, events).live_dependents("task_1") == ["task_2"]


def test_a_task_waiting_on_two_is_unblocked_by_the_second_completion(board: Board) -> None:
    board.create("a")
    board.create("b")
    board.create("c", blocked_by=["task_1", "task_2"])
    first = board.claim("task_1", "w1")
    assert board.complete("task_1", "w1", first.epoch).unblocked == ()
    second = board.claim("task_2", "w1")
    assert board.complete("task_2", "w1", second.epoch).unblocked == ("task_3",)
