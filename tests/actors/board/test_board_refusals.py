"""What a refused board command says, at its boundaries (found by mutation testing of
``actors/board/rules.py``; see tools/README.md)."""

from __future__ import annotations

import pytest

from actors.board.board import Board
from actors.board.rules import MAX_SUBJECT_CHARS, check_member_name
from actors.errors import InvalidMemberName, TeamError
from mailboxes.journal.memory import MemoryEventStore


@pytest.fixture
def board() -> Board:
    return Board(MemoryEventStore(), actor="lead")


def test_a_subject_of_exactly_the_limit_is_taken_one_more_is_refused(board: Board) -> None:
    assert MAX_SUBJECT_CHARS == 500
    assert board.create("x" * 500).subject == "x" * 500
    with pytest.raises(TeamError, match=r"at most 500 characters \(this one has 501\)"):
        board.create("y" * 501)


def test_claiming_a_task_you_hold_again_is_ok_and_anyone_else_is_refused(board: Board) -> None:
    board.create("a")
    assert board.claim("task_1", "ann").epoch == 1
    again = board.claim("task_1", "ann")
    assert (again.ok, again.reason, again.epoch) == (True, "", 1)
    other = board.claim("task_1", "bob")
    assert (other.ok, other.reason, other.epoch) == (False, "already claimed by ann", 0)


def test_a_blocked_claim_names_only_the_blockers_not_yet_completed(board: Board) -> None:
    board.create("a")
    board.create("b")
    board.create("c", blocked_by=["task_1", "task_2"])
    claim = board.claim("task_1", "ann")
    board.complete("task_1", "ann", claim.epoch)
    refused = board.claim("task_3", "bob")
    assert (refused.ok, refused.reason) == (False, "blocked by task_2")


@pytest.mark.parametrize("name", ["team", "Team", "everyone", "system", "all"])
def test_collective_names_are_reserved(name: str) -> None:
    with pytest.raises(InvalidMemberName, match="reserved for the program"):
        check_member_name(name)
