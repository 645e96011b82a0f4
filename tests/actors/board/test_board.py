"""Board commands against every event store: validation, claims, fencing, idempotency."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import pytest

from actors.board.board import Board
from actors.board.projections import Projections, verify
from actors.errors import (
    ClaimRefused,
    CycleError,
    HasDependents,
    InvalidTransition,
    NotOwner,
    StaleEpoch,
    TeamError,
    UnknownTask,
)
from mailboxes.journal.memory import MemoryEventStore
from mailboxes.journal.store import FileJournal
from mailboxes.ports import EventStore

StoreFactory = Callable[[], EventStore]


class FakeLiveness:
    """Leases as a set of live names."""

    def __init__(self) -> None:
        self.alive: set[str] = set()

    def hold(self, agent: str) -> AbstractContextManager[None]:
        self.alive.add(agent)
        return nullcontext()

    def is_alive(self, agent: str) -> bool:
        return agent in self.alive


@pytest.fixture(params=["memory", "file"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Stores over one backing: each call is a new handle, as another process would have."""
    team = tmp_path / ".team"
    team.mkdir()
    memory = MemoryEventStore()
    made: list[EventStore] = []

    def factory() -> EventStore:
        store: EventStore = memory if request.param == "memory" else FileJournal(team)
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()


@pytest.fixture
def board(make_store: StoreFactory, tmp_path: Path) -> Board:
    return Board(make_store(), projections=Projections(tmp_path), actor="lead")


def test_create_assigns_dense_ids_and_records_the_actor(board: Board) -> None:
    first = board.create("one", "first task", metadata={"k": "v"})
    second = board.create("two", blocked_by=["task_1", "task_1"])
    assert (first.id, second.id) == ("task_1", "task_2")
    assert first.created_by == "lead" and dict(first.metadata) == {"k": "v"}
    assert second.blocked_by == ("task_1",)
    assert board.get("task_1").blocks == ("task_2",)
    assert [t.id for t in board.list()] == ["task_1", "task_2"]


def test_create_refuses_unknown_or_deleted_blockers(board: Board) -> None:
    with pytest.raises(UnknownTask):
        board.create("x", blocked_by=["task_9"])
    board.create("one")
    board.delete("task_1")
    with pytest.raises(InvalidTransition):
        board.create("x", blocked_by=["task_1"])
    with pytest.raises(TeamError):
        board.create("   ")
    assert board.state.seq == 2


def test_update_refuses_cycles_and_writes_nothing(board: Board, make_store: StoreFactory) -> None:
    board.create("a")
    board.create("b", blocked_by=["task_1"])
    board.create("c", blocked_by=["task_2"])
    with pytest.raises(CycleError) as info:
        board.update("task_1", add_blocked_by=["task_3"])
    assert info.value.cycle == ("task_1", "task_3", "task_2", "task_1")
    with pytest.raises(CycleError):
        board.update("task_2", add_blocked_by=["task_2"])
    assert make_store().last_seq() == 3


def test_update_edges_fields_and_no_op(board: Board) -> None:
    board.create("a")
    board.create("b")
    board.create("c", blocked_by=["task_1"])
    task = board.update(
        "task_3", subject="C", add_blocked_by=["task_2"], remove_blocked_by=["task_1"]
    )
    assert (task.subject, task.blocked_by) == ("C", ("task_2",))
    assert board.get("task_1").blocks == () and board.get("task_2").blocks == ("task_3",)
    seq = board.state.seq
    board.update("task_3", subject="C", remove_blocked_by=["task_1"])
    assert board.state.seq == seq, "an update that changes nothing appends nothing"
    with pytest.raises(UnknownTask):
        board.update("task_7", subject="x")


def test_delete_rules(board: Board) -> None:
    board.create("a")
    board.create("b", blocked_by=["task_1"])
    with pytest.raises(HasDependents) as info:
        board.delete("task_1")
    assert info.value.dependents == ("task_2",)
    assert board.claim("task_2", "w1").ok is False
    board.delete("task_1", force=True)
    assert board.get("task_2").blocked_by == ()
    assert board.claim("task_2", "w1").ok
    with pytest.raises(InvalidTransition):
        board.delete("task_2")
    seq = board.state.seq
    assert board.delete("task_1").status == "deleted"
    assert board.state.seq == seq, "deleting twice is a no-op"
    board.delete("task_2", force=True)
    assert board.state.holding("w1") is None


def test_delete_with_only_finished_dependents_is_allowed(board: Board) -> None:
    board.create("a")
    board.create("b", blocked_by=["task_1"])
    board.complete("task_1", "w1", board.claim("task_1", "w1").epoch)
    board.complete("task_2", "w1", board.claim("task_2", "w1").epoch)
    assert board.delete("task_1").status == "deleted"


def test_claim_is_a_compare_and_swap(board: Board) -> None:
    board.create("a")
    board.create("b", blocked_by=["task_1"])
    board.create("c")
    won = board.claim("task_1", "w1")
    assert won.ok and won.epoch == 1 and won.unwrap().owner == "w1"
    lost = board.claim("task_1", "w2")
    assert not lost.ok and lost.reason == "already claimed by w1"
    with pytest.raises(ClaimRefused):
        lost.unwrap()
    blocked = board.claim("task_2", "w2")
    assert not blocked.ok and blocked.reason == "blocked by task_1"
    busy = board.claim("task_3", "w1")
    assert not busy.ok and busy.reason == "w1 already holds task_1"
    seq = board.state.seq
    again = board.claim("task_1", "w1")
    assert again.ok and again.epoch == 1 and board.state.seq == seq
    with pytest.raises(UnknownTask):
        board.claim("task_9", "w1")


def test_claim_next_takes_lowest_ready_allowed_task(board: Board) -> None:
    board.create("tests", role="tester")
    board.create("a")
    board.create("b", blocked_by=["task_2"])
    first = board.claim_next("w1")
    assert first.unwrap().id == "task_2", "a claimer without a role skips role tasks"
    assert board.claim_next("t1", role="tester").unwrap().id == "task_1"
    none = board.claim_next("w2")
    assert not none.ok and none.reason == "no ready task" and none.task is None
    assert board.claim_next("w1").reason == "w1 already holds task_2"
    done = board.complete("task_2", "w1", first.epoch, "ok")
    assert done.unblocked == ("task_3",)
    assert board.claim_next("w2").unwrap().id == "task_3"


def test_fencing_rejects_stale_epochs_and_strangers(board: Board) -> None:
    board.create("a")
    first = board.claim("task_1", "w1")
    with pytest.raises(NotOwner):
        board.complete("task_1", "w2", first.epoch)
    board.release("task_1", "w1", first.epoch, "owner_dead")
    second = board.claim("task_1", "w2")
    assert second.epoch == first.epoch + 1
    # The presumed-dead owner comes back: it can touch nothing.
    with pytest.raises(StaleEpoch):
        board.complete("task_1", "w1", first.epoch, "zombie")
    with pytest.raises(StaleEpoch):
        board.release("task_1", "w1", first.epoch)
    assert board.get("task_1").owner == "w2"
    done = board.complete("task_1", "w2", second.epoch, "real")
    assert done.task.status == "completed" and done.task.summary == "real"
    with pytest.raises(NotOwner):
        board.complete("task_1", "w2", second.epoch)


def test_release_after_release_is_not_owner(board: Board) -> None:
    board.create("a")
    claim = board.claim("task_1", "w1")
    board.release("task_1", "w1", claim.epoch)
    with pytest.raises(NotOwner):
        board.release("task_1", "w1", claim.epoch)


def test_op_id_makes_retries_no_ops(board: Board, make_store: StoreFactory) -> None:
    a = board.create("a", op_id="create-a")
    again = board.create("a", op_id="create-a")
    assert a.id == again.id and board.state.seq == 1
    claim = board.claim_next("w1", op_id="claim-1")
    retry = board.claim_next("w1", op_id="claim-1")
    assert retry.ok and retry.unwrap().id == claim.unwrap().id
    board.complete("task_1", "w1", claim.epoch, "ok", op_id="done-1")
    board.complete("task_1", "w1", claim.epoch, "ok", op_id="done-1")
    # A second handle (another process) retrying sees the same stored result.
    other = Board(make_store(), actor="w1")
    assert other.complete("task_1", "w1", claim.epoch, op_id="done-1").task.status == "completed"
    assert make_store().last_seq() == 3


def test_boards_over_one_journal_see_each_other(make_store: StoreFactory) -> None:
    lead = Board(make_store(), actor="lead")
    worker = Board(make_store(), actor="w1")
    lead.create("a")
    assert worker.state.tasks == {}
    assert worker.claim("task_1", "w1").ok, "commands decide against the caught-up journal"
    assert lead.claim("task_1", "w2").reason == "already claimed by w1"
    lead.create("b")
    assert [t.id for t in worker.refresh().tasks.values()] == ["task_1", "task_2"]


def test_refused_decision_still_catches_up(make_store: StoreFactory) -> None:
    lead = Board(make_store(), actor="lead")
    other = Board(make_store(), actor="w1")
    lead.create("a")
    with pytest.raises(UnknownTask):
        other.update("task_5", subject="x")
    assert other.state.seq == 1


def test_reap_releases_dead_agent_claims_only(make_store: StoreFactory) -> None:
    live = FakeLiveness()
    board = Board(make_store(), liveness=live, actor="runtime")
    for name in "abc":
        board.create(name)
    live.alive.add("w1")
    board.claim("task_1", "w1")
    board.claim("task_2", "w2")
    board.claim("task_3", "ann", human=True)
    released = board.reap_dead_owners()
    assert [t.id for t in released] == ["task_2"]
    assert board.get("task_2").status == "pending"
    assert board.get("task_3").owner == "ann" and board.get("task_3").human
    assert board.reap_dead_owners() == []
    assert Board(make_store()).reap_dead_owners() == [], "no liveness, no reaping"


def test_two_reapers_release_each_claim_once(make_store: StoreFactory) -> None:
    live = FakeLiveness()
    first = Board(make_store(), liveness=live)
    second = Board(make_store(), liveness=live)
    first.create("a")
    first.claim("task_1", "w1")
    assert len(first.reap_dead_owners()) == 1
    assert second.reap_dead_owners() == []
    types = [e.type for e in make_store().read_from(1)]
    assert types.count("task.released") == 1


def test_invalid_owner_names_are_refused(board: Board) -> None:
    board.create("a")
    with pytest.raises(Exception, match="agent name"):
        board.claim("task_1", "../etc")


def test_projections_follow_commands(board: Board, tmp_path: Path) -> None:
    board.create("a")
    board.create("b", blocked_by=["task_1"])
    claim = board.claim("task_1", "w1")
    board.complete("task_1", "w1", claim.epoch, "done")
    board.claim("task_2", "ann", human=True)
    proj = Projections(tmp_path)
    assert proj.read_task("task_1")["status"] == "completed"  # type: ignore[index]
    team = proj.read_team()
    assert team is not None
    assert team["members"] == [
        {
            "name": "ann",
            "kind": "human",
            "role": "human",  # a person's first claim makes it a member
            "model": None,
            "status": "active",
            "reason": "",
            "plan_required": False,
            "task": "task_2",
            "epoch": 1,
            "worktree": None,
        }
    ]
    assert verify(board.state, tmp_path) == []


def test_claim_next_honours_an_accept_filter(board: Board) -> None:
    board.create("needs gpu", metadata={"tools": ["gpu"]})
    board.create("plain")
    pick = board.claim_next("w1", accept=lambda t: "gpu" not in t.metadata.get("tools", ()))
    assert pick.unwrap().id == "task_2"
    assert board.claim_next("w2", accept=lambda t: False).reason == "no ready task"
