"""The nothing-lost oracle itself: quiet on a sound repository, and it names each kind of loss."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from actors.board.board import Board
from actors.board.projections import Projections
from mailboxes import events as ev
from mailboxes.journal.store import FileJournal
from mailboxes.liveness import FlockLiveness
from mailboxes.maildir import Maildir, MessageDraft
from tests.support.oracle import Ledger, assert_nothing_lost, check_repository, child_pids

Oracle = functools.partial[list[str]]


@pytest.fixture
def earlier() -> list[int]:
    """Child processes that earlier tests left behind: not this test's business."""
    return child_pids()


@pytest.fixture
def oracle(earlier: list[int]) -> Oracle:
    """``check_repository`` blind to ``earlier`` children."""
    return functools.partial(check_repository, ignore_pids=earlier)


def sound_repo(root: Path) -> Ledger:
    """A small team: tasks claimed, completed and released, messages delivered and acked."""
    (root / ".team").mkdir(parents=True)
    ledger = Ledger()
    board = Board(FileJournal(root / ".team"), projections=Projections(root), actor="lead")
    for n in range(3):
        ledger.attempt(f"create-{n}")
        board.create(f"task {n}", op_id=f"create-{n}")
        ledger.ack(f"create-{n}")
    got = board.claim_next("ann", op_id="claim-ann")
    board.complete(got.unwrap().id, "ann", got.epoch, op_id="done-ann")
    got = board.claim_next("bob", op_id="claim-bob")
    board.release(got.unwrap().id, "bob", got.epoch)
    ledger.attempted |= {"claim-ann", "done-ann", "claim-bob"}
    box = Maildir(root / ".team" / "mailboxes", ids=ledger)
    for agent in ("lead", "ann"):
        box.ensure_inbox(agent)
    first = box.deliver("lead", MessageDraft.text("ann", "hello"))
    ledger.deliver(e.id for e in first)
    ledger.deliver(e.id for e in box.deliver("ann", MessageDraft.text("*", "all")))
    box.ack("ann", [first[0].id])
    return ledger


def raw_journal(root: Path, *drafts: ev.EventDraft) -> None:
    """Append events as given, bypassing the board's checks (a forged history)."""
    (root / ".team").mkdir(parents=True, exist_ok=True)
    FileJournal(root / ".team").append(lambda seen: list(drafts), after=0)


def created(tid: str) -> ev.EventDraft:
    return ev.draft("task.created", "lead", ev.TaskCreated(task_id=tid, subject=tid))


def claimed(tid: str, owner: str, epoch: int) -> ev.EventDraft:
    return ev.draft("task.claimed", owner, ev.TaskClaimed(task_id=tid, owner=owner, epoch=epoch))


def test_a_sound_repository_has_no_violations(
    tmp_path: Path, oracle: Oracle, earlier: list[int]
) -> None:
    ledger = sound_repo(tmp_path)
    assert oracle(tmp_path, **ledger.frozen()) == []
    assert_nothing_lost(tmp_path, **ledger.frozen(), ignore_pids=earlier)


def test_acknowledged_but_missing_and_stored_but_never_attempted(
    tmp_path: Path, oracle: Oracle, earlier: list[int]
) -> None:
    ledger = sound_repo(tmp_path)
    found = oracle(tmp_path, attempted={"create-0", "create-1"}, acked={"create-0", "ghost"})
    assert any("acknowledged op(s) missing" in v and "ghost" in v for v in found)
    assert any("never attempted" in v and "create-2" in v for v in found)
    with pytest.raises(AssertionError, match="ghost"):
        assert_nothing_lost(tmp_path, acked={"ghost"}, ignore_pids=earlier)
    assert oracle(tmp_path, acked=ledger.acked) == []


@pytest.mark.parametrize("where", ["middle", "tail"])
def test_damaged_journal_lines_are_reported(tmp_path: Path, oracle: Oracle, where: str) -> None:
    sound_repo(tmp_path)
    journal = tmp_path / ".team" / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    if where == "middle":
        lines[2] = lines[2].replace(b"task 2", b"task X")
        journal.write_bytes(b"".join(lines))
        found = oracle(tmp_path, projections=False)
        assert found == [
            "journal: corrupt line at line 3: CRC mismatch (bytes changed after writing)"
        ]
        assert oracle(tmp_path, allow_torn_tail=True, projections=False) == found
    else:
        journal.write_bytes(b"".join(lines)[:-7])
        found = oracle(tmp_path, projections=False)
        assert len(found) == 1 and found[0].startswith(f"journal: torn tail at line {len(lines)}")
        assert oracle(tmp_path, allow_torn_tail=True, projections=False) == []
        FileJournal(tmp_path / ".team")  # the repair appends journal.tail_repaired: sound again
        assert oracle(tmp_path, projections=False) == []


def test_projection_drift_is_replay_verify_failing(tmp_path: Path, oracle: Oracle) -> None:
    sound_repo(tmp_path)
    task_file = tmp_path / ".tasks" / "task_2.json"
    task_file.write_text(task_file.read_text().replace('"pending"', '"completed"'))
    (tmp_path / ".tasks" / "task_9.json").write_text("{}")
    found = oracle(tmp_path)
    assert any(v.startswith("replay --verify:") and "task_2.json: differs" in v for v in found)
    assert any("task_9.json: extra" in v for v in found)


def test_a_double_claim_and_an_unfenced_completion_are_caught(
    tmp_path: Path, oracle: Oracle
) -> None:
    completed = ev.draft(
        "task.completed", "bob", ev.TaskCompleted(task_id="task_2", owner="bob", epoch=1)
    )
    raw_journal(
        tmp_path,
        created("task_1"),
        created("task_2"),
        claimed("task_1", "ann", 1),
        claimed("task_1", "bob", 1),  # a second claim of a claimed task at the same epoch
        claimed("task_2", "ann", 1),  # ann now holds two tasks
        completed,  # bob never held task_2
    )
    found = oracle(tmp_path, projections=False)
    assert any("seq 4 task.claimed task_1: double claim" in v for v in found)
    assert any("seq 4 task.claimed task_1: epoch 1 after 1" in v for v in found)
    assert any("seq 5 task.claimed task_2: ann already holds task_1" in v for v in found)
    assert any("seq 6 task.completed task_2: unfenced (bob@1" in v for v in found)


def test_claims_of_dead_owners_are_reported_when_they_must_be_reaped(
    tmp_path: Path, oracle: Oracle
) -> None:
    raw_journal(tmp_path, created("task_1"), claimed("task_1", "w1", 1))
    assert oracle(tmp_path, projections=False) == []
    found = oracle(tmp_path, projections=False, require_live_owners=True)
    assert found == ["owners: task_1 is held by w1, whose lease is free (not reaped)"]
    with FlockLiveness(tmp_path / ".team" / "members").hold("w1"):
        assert oracle(tmp_path, projections=False, require_live_owners=True) == []


def test_message_conservation(tmp_path: Path, oracle: Oracle) -> None:
    ledger = sound_repo(tmp_path)
    boxes = tmp_path / ".team" / "mailboxes"
    acked = os.listdir(boxes / "ann" / "cur")[0]
    shutil.copy(boxes / "ann" / "cur" / acked, boxes / "ann" / "new" / acked)
    stray = "00000000000000000001.0000000001.feedface"
    (boxes / "lead" / "new" / stray).write_text("{}")
    lost = next(iter(ledger.delivered - {acked.rsplit(".", 1)[-1]}))
    for name in os.listdir(boxes / "lead" / "new"):
        if name.endswith(lost):
            os.unlink(boxes / "lead" / "new" / name)
    found = oracle(tmp_path, **ledger.frozen())
    assert any("is in 2 places: ['ann/cur', 'ann/new']" in v for v in found)
    assert any("never sent" in v and "feedface" in v for v in found)
    assert any("delivered message(s) missing" in v and lost in v for v in found)


def test_leftover_processes_are_reported(tmp_path: Path, oracle: Oracle) -> None:
    sound_repo(tmp_path)
    code = "import sys; sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, cwd=tmp_path)
    try:
        found = oracle(tmp_path)
        assert any(f"child {child.pid}" in v for v in found)
        assert any(
            v.startswith(f"processes: {child.pid} (") and "still runs in" in v for v in found
        )
        assert any(f"child {child.pid}" in v for v in oracle(tmp_path, pids=[child.pid]))
    finally:
        child.kill()
        child.wait(timeout=30)
    assert oracle(tmp_path) == []
    assert oracle(tmp_path, pids=[child.pid]) == []
