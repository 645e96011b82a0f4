"""``SharedCommits``: writes of several threads that meet go out in one journal commit, each
still decided against the caught-up state and acknowledged only once durable
(actors/runtime/commits.py; docs/RELIABILITY.md, "What is guaranteed")."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.board.board import Board
from actors.board.state import TeamState
from actors.errors import NotOwner, StaleEpoch
from actors.runtime.commits import (
    DEFER_S,
    Batch,
    SharedCommits,
    claim_next,
    complete,
    status_change,
)
from mailboxes.errors import WriteFailed
from mailboxes.events import Event, EventDraft, MemberSpawned
from mailboxes.journal.store import FileJournal
from tests.actors.runtime.test_stalls import ManualTimer

DEADLINE_S = 30.0


class GatedSync:
    """An ``Fsync`` that counts its calls; once armed, the next call waits for ``release``
    (``entered`` is set meanwhile) and, with ``fail`` set, the calls after it fail (EIO)."""

    def __init__(self) -> None:
        self.calls = 0
        self.armed = False
        self.fail = False
        self.entered = threading.Event()
        self.released = threading.Event()

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.armed:
            self.armed = False
            self.entered.set()
            assert self.released.wait(DEADLINE_S), "the gated fsync was never released"
        elif self.fail:
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)


def _team(tmp_path: Path, sync: GatedSync, tasks: int, members: int) -> Board:
    (tmp_path / ".team").mkdir()
    board = Board(FileJournal(tmp_path / ".team", fsync=sync), actor="runtime")
    for i in range(tasks):
        board.create(f"task {i + 1}")
    for i in range(members):
        board.add_member(MemberSpawned(name=f"w{i + 1}", role="general"))
    return board


def _until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


class Writers:
    """Threads that each make one write; their results or errors by name."""

    def __init__(self, commits: SharedCommits) -> None:
        self.commits = commits
        self.results: dict[str, tuple[TeamState, tuple[Event, ...]]] = {}
        self.errors: dict[str, BaseException] = {}
        self.threads: list[threading.Thread] = []

    def start(self, name: str, decide: Any) -> None:
        def run() -> None:
            try:
                self.results[name] = self.commits.write(decide)
            except BaseException as exc:
                self.errors[name] = exc

        thread = threading.Thread(target=run, name=name)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(DEADLINE_S)
            assert not thread.is_alive()


def _meet(commits: SharedCommits, sync: GatedSync, first: Any, queued: dict[str, Any]) -> Writers:
    """``first`` is being committed (held in its fsync) while the ``queued`` writes arrive;
    then the fsync goes on."""
    writers = Writers(commits)
    sync.armed = True
    writers.start("first", first)
    assert sync.entered.wait(DEADLINE_S)
    for name, decide in queued.items():
        writers.start(name, decide)
    _until(lambda: len(commits._queue) == len(queued))
    sync.released.set()
    writers.join()
    return writers


def _counting(board: Board) -> list[int]:
    """Counts ``board.execute`` calls (one per commit)."""
    executes: list[int] = []
    execute = board.execute

    def counted(decision: Callable[[TeamState], Any]) -> Any:
        executes.append(1)
        return execute(decision)

    board.execute = counted  # type: ignore[method-assign]
    return executes


def test_writes_that_meet_share_one_commit_and_each_gets_its_own_events(
    tmp_path: Path,
) -> None:
    sync = GatedSync()
    board = _team(tmp_path, sync, tasks=4, members=4)
    commits = SharedCommits(board)
    executes = _counting(board)
    sync.calls = 0
    writers = _meet(
        commits,
        sync,
        claim_next("w1"),
        {f"w{i}": claim_next(f"w{i}") for i in (2, 3, 4)},
    )
    assert writers.errors == {}
    # The first commit alone, then the three writes queued meanwhile together.
    assert len(executes) == 2 and sync.calls == 2
    claimed = {
        name: [(e.data["task_id"], e.data["owner"]) for e in events]
        for name, (_state, events) in writers.results.items()
    }
    assert claimed == {
        "first": [("task_1", "w1")],
        "w2": [("task_2", "w2")],
        "w3": [("task_3", "w3")],
        "w4": [("task_4", "w4")],
    }
    stored = list(FileJournal(tmp_path / ".team").read_from(1))
    assert [(e.type, e.actor) for e in stored[-4:]] == [
        ("task.claimed", f"w{i}") for i in range(1, 5)
    ]
    state = Board(FileJournal(tmp_path / ".team")).state
    assert {t.id: t.owner for t in state.tasks.values()} == {
        "task_1": "w1",
        "task_2": "w2",
        "task_3": "w3",
        "task_4": "w4",
    }


def test_claims_of_one_commit_never_take_the_same_task(tmp_path: Path) -> None:
    board = _team(tmp_path, GatedSync(), tasks=2, members=3)
    batch = Batch()
    drafts = [claim_next(f"w{i}")(board.state, batch) for i in (1, 2, 3)]
    assert [[d.data["task_id"] for d in each] for each in drafts] == [["task_1"], ["task_2"], []]
    # A member that claimed in the batch claims nothing more in it.
    assert claim_next("w1")(board.state, batch) == []


def test_status_changes_of_one_commit_see_the_ones_before_them(tmp_path: Path) -> None:
    board = _team(tmp_path, GatedSync(), tasks=0, members=1)
    batch = Batch()
    working = status_change("w1", "working")(board.state, batch)
    again = status_change("w1", "working")(board.state, batch)
    idle = status_change("w1", "idle")(board.state, batch)
    assert [len(working), len(again), len(idle)] == [1, 0, 1]


def test_a_write_whose_decision_fails_fails_alone(tmp_path: Path) -> None:
    sync = GatedSync()
    board = _team(tmp_path, sync, tasks=2, members=2)
    commits = SharedCommits(board)

    def broken(state: TeamState, batch: Batch) -> list[EventDraft]:
        raise ValueError("no such thing")

    writers = _meet(commits, sync, claim_next("w1"), {"broken": broken, "w2": claim_next("w2")})
    assert list(writers.errors) == ["broken"] and isinstance(writers.errors["broken"], ValueError)
    assert [e.data["task_id"] for e in writers.results["w2"][1]] == ["task_2"]


def test_a_failed_commit_fails_every_write_in_it_and_the_next_one_works(tmp_path: Path) -> None:
    sync = GatedSync()
    board = _team(tmp_path, sync, tasks=3, members=3)
    commits = SharedCommits(board)
    sync.fail = True  # the fsync after the gated one fails: the queued writes' commit
    writers = _meet(
        commits, sync, claim_next("w1"), {"w2": claim_next("w2"), "w3": claim_next("w3")}
    )
    sync.fail = False
    assert "first" in writers.results
    assert sorted(writers.errors) == ["w2", "w3"]
    assert all(isinstance(e, WriteFailed) for e in writers.errors.values())
    board.refresh()
    assert {t.id: t.owner for t in board.state.tasks.values()} == {
        "task_1": "w1",
        "task_2": None,
        "task_3": None,
    }
    _state, events = commits.write(claim_next("w2"))
    assert [e.data["task_id"] for e in events] == ["task_2"]
    stored = Board(FileJournal(tmp_path / ".team")).state
    assert {t.id: t.owner for t in stored.tasks.values()}["task_2"] == "w2"


def test_a_write_alone_is_committed_at_once(tmp_path: Path) -> None:
    board = _team(tmp_path, GatedSync(), tasks=1, members=1)
    state, events = SharedCommits(board).write(claim_next("w1", also=()))
    assert [e.type for e in events] == ["task.claimed"]
    assert state.task("task_1").owner == "w1"
    # Nothing to decide: no events, the state as committed.
    state, events = SharedCommits(board).write(claim_next("w1"))
    assert events == () and state.task("task_1").owner == "w1"


@pytest.mark.parametrize("role", [None, "tester"])
def test_a_claim_takes_only_tasks_of_its_role_that_it_accepts(
    tmp_path: Path, role: str | None
) -> None:
    board = _team(tmp_path, GatedSync(), tasks=0, members=1)
    board.create("for testers", role="tester")
    board.create("for anyone")
    board.create("refused")
    accept = lambda task: task.subject != "refused"  # noqa: E731
    drafts = claim_next("w1", role=role, accept=accept)(board.state, Batch())
    expected = "task_1" if role == "tester" else "task_2"
    assert [d.data["task_id"] for d in drafts] == [expected]


def _claimed_pair_and_dependent(tmp_path: Path, sync: GatedSync) -> Board:
    """task_1 held by w1 and task_2 by w2 (epoch 1 each); task_3 blocked by both."""
    board = _team(tmp_path, sync, tasks=2, members=2)
    board.create("after both", blocked_by=["task_1", "task_2"])
    assert board.claim("task_1", "w1").ok and board.claim("task_2", "w2").ok
    return board


def test_completions_of_one_commit_unblock_a_task_once_all_its_blockers_are_done(
    tmp_path: Path,
) -> None:
    sync = GatedSync()
    board = _claimed_pair_and_dependent(tmp_path, sync)
    commits = SharedCommits(board)
    sync.calls = 0
    writers = _meet(
        commits,
        sync,
        status_change("w1", "working"),
        {
            "w1": complete("task_1", "w1", 1, "one", commit="abc", remote="origin"),
            "w2": complete("task_2", "w2", 1, "two"),
        },
    )
    assert writers.errors == {} and sync.calls == 2  # the two completions: one commit
    stored = list(FileJournal(tmp_path / ".team").read_from(1))[-2:]
    assert [(e.type, e.actor) for e in stored] == [
        ("task.completed", stored[0].data["owner"]),
        ("task.completed", stored[1].data["owner"]),
    ]
    # As if committed one after the other: only the later one finds both blockers done.
    assert [list(e.data["unblocked"]) for e in stored] == [[], ["task_3"]]
    first = stored[0].data
    if first["task_id"] == "task_1":
        assert (first["summary"], first["commit"], first["remote"]) == ("one", "abc", "origin")
    for name, task_id in (("w1", "task_1"), ("w2", "task_2")):
        state, events = writers.results[name]
        assert [e.data["task_id"] for e in events] == [task_id]
        assert state.task(task_id).status == "completed"
    state = Board(FileJournal(tmp_path / ".team")).state
    assert [t.id for t in state.ready()] == ["task_3"]


def test_a_completion_is_fenced_and_fails_alone(tmp_path: Path) -> None:
    board = _claimed_pair_and_dependent(tmp_path, GatedSync())
    batch = Batch()
    with pytest.raises(StaleEpoch):
        complete("task_1", "w1", 2, "stale")(board.state, batch)
    with pytest.raises(NotOwner):
        complete("task_1", "w2", 1, "not mine")(board.state, batch)
    assert len(complete("task_1", "w1", 1, "done")(board.state, batch)) == 1
    # Completed earlier in the same commit: the claim is over.
    with pytest.raises(NotOwner):
        complete("task_1", "w1", 1, "again")(board.state, batch)
    assert batch.completed == {"task_1"}


def test_a_stale_completion_in_a_shared_commit_leaves_the_others_to_it(tmp_path: Path) -> None:
    sync = GatedSync()
    board = _claimed_pair_and_dependent(tmp_path, sync)
    writers = _meet(
        SharedCommits(board),
        sync,
        status_change("w1", "working"),
        {"stale": complete("task_1", "w1", 5, "late"), "w2": complete("task_2", "w2", 1, "ok")},
    )
    assert list(writers.errors) == ["stale"] and isinstance(writers.errors["stale"], StaleEpoch)
    state = Board(FileJournal(tmp_path / ".team")).state
    assert (state.task("task_1").status, state.task("task_2").status) == (
        "in_progress",
        "completed",
    )


def _stored_types(tmp_path: Path) -> list[tuple[str, str]]:
    return [(e.type, e.actor) for e in FileJournal(tmp_path / ".team").read_from(1)]


def test_a_deferred_write_waits_and_goes_out_in_the_next_writes_commit(tmp_path: Path) -> None:
    board = _team(tmp_path, GatedSync(), tasks=1, members=2)
    timer = ManualTimer()
    commits = SharedCommits(board, timer=timer)
    executes = _counting(board)
    before = _stored_types(tmp_path)
    deferred = commits.defer(status_change("w1", "working"))
    # Queued, not written: nothing new in the journal, nothing committed.
    assert not deferred.done and _stored_types(tmp_path) == before and executes == []
    _state, events = commits.write(claim_next("w2"))
    assert [e.type for e in events] == ["task.claimed"]
    assert deferred.done and executes == [1]  # one commit carried both
    assert _stored_types(tmp_path)[len(before) :] == [
        ("member.status_changed", "w1"),  # queued first, committed first
        ("task.claimed", "w2"),
    ]
    assert timer.fire(DEFER_S) == 0  # its timer was cancelled with the commit
    commits.settle(deferred)  # durable already: returns at once
    assert executes == [1]


def test_a_deferred_write_no_write_carries_is_committed_by_its_timer(tmp_path: Path) -> None:
    board = _team(tmp_path, GatedSync(), tasks=0, members=1)
    timer = ManualTimer()
    commits = SharedCommits(board, timer=timer)
    before = _stored_types(tmp_path)
    deferred = commits.defer(status_change("w1", "working"))
    assert _stored_types(tmp_path) == before
    assert timer.fire(DEFER_S) == 1
    assert deferred.done
    assert _stored_types(tmp_path)[len(before) :] == [("member.status_changed", "w1")]


def test_settle_commits_a_deferred_write_now_and_raises_what_it_raised(tmp_path: Path) -> None:
    board = _team(tmp_path, GatedSync(), tasks=0, members=1)
    timer = ManualTimer()
    commits = SharedCommits(board, timer=timer)
    before = _stored_types(tmp_path)
    deferred = commits.defer(status_change("w1", "working"))
    commits.settle(deferred)
    assert deferred.done
    assert _stored_types(tmp_path)[len(before) :] == [("member.status_changed", "w1")]
    assert timer.fire(DEFER_S) == 0

    def broken(state: TeamState, batch: Batch) -> list[EventDraft]:
        raise ValueError("no such thing")

    failed = commits.defer(broken)
    with pytest.raises(ValueError, match="no such thing"):
        commits.settle(failed)
    with pytest.raises(ValueError):  # asked again: still the same failure
        commits.settle(failed)


def test_flush_commits_every_deferred_write(tmp_path: Path) -> None:
    board = _team(tmp_path, GatedSync(), tasks=0, members=2)
    commits = SharedCommits(board, timer=ManualTimer())
    executes = _counting(board)
    commits.flush()  # nothing queued: no commit
    assert executes == []
    first = commits.defer(status_change("w1", "working"))
    second = commits.defer(status_change("w2", "working"))
    commits.flush()
    assert first.done and second.done and executes == [1]


def test_without_a_timer_a_deferred_write_is_committed_at_once(tmp_path: Path) -> None:
    board = _team(tmp_path, GatedSync(), tasks=0, members=1)
    before = _stored_types(tmp_path)
    deferred = SharedCommits(board).defer(status_change("w1", "working"))
    assert deferred.done
    assert _stored_types(tmp_path)[len(before) :] == [("member.status_changed", "w1")]
