"""A task's ``verify`` command on the board: created with the task (``task.created`` v2),
each run journaled as ``task.verified`` and folded into ``Task.verified``, shown in the
projection file, replayed identically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.board.board import Board
from actors.board.fold import fold_all
from actors.board.projections import Projections, verify
from actors.board.state import EMPTY
from actors.errors import TeamError, UnknownTask
from mailboxes import events as ev
from mailboxes.journal.store import FileJournal


def open_board(root: Path) -> Board:
    (root / ".team").mkdir(exist_ok=True)
    return Board(FileJournal(root / ".team"), projections=Projections(root), actor="lead")


def _run(tid: str, passed: bool) -> ev.TaskVerified:
    return ev.TaskVerified(
        task_id=tid,
        command="make test",
        stage="complete",
        passed=passed,
        exit_code=0 if passed else 2,
    )


def test_verify_is_created_with_the_task_and_each_run_is_folded(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    task = board.create("fix the cart", verify="make test")
    assert task.verify == "make test" and task.verified is None
    assert board.create("plain").verify is None
    event = next(iter(FileJournal(tmp_path / ".team").read_from(1)))
    assert event.v == 2 and event.data["verify"] == "make test"

    assert board.record_verification(_run(task.id, False)).verified is False
    assert board.record_verification(_run(task.id, True)).verified is True
    data = json.loads((tmp_path / ".tasks" / "task_1.json").read_text())
    assert data["verify"] == "make test" and data["verified"] is True
    state = fold_all(EMPTY, FileJournal(tmp_path / ".team").read_from(1))
    assert state.task("task_1") == board.state.task("task_1")
    assert verify(state, tmp_path) == []


def test_an_empty_command_or_an_unknown_task_is_refused(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    with pytest.raises(TeamError, match="verify command cannot be empty"):
        board.create("x", verify="  ")
    with pytest.raises(UnknownTask):
        board.record_verification(_run("task_9", True))
    assert list(FileJournal(tmp_path / ".team").read_from(1)) == []


def test_a_v1_task_created_has_no_verify() -> None:
    body = ev.parse_payload("task.created", 1, {"task_id": "task_1", "subject": "old"})
    assert isinstance(body, ev.TaskCreated) and body.verify is None
