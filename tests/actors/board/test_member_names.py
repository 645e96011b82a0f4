"""Names mean someone: member names are safe, not reserved and unique ignoring case, decided
under the journal lock (docs/ARCHITECTURE.md, "Event catalogue", ``member.spawned``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.board.board import Board
from actors.board.rules import RESERVED_NAMES, check_member_name
from actors.errors import DuplicateMember, InvalidMemberName, TeamError
from mailboxes.events import MemberSpawned, MemberStopped, draft
from mailboxes.journal.store import FileJournal
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo

__all__ = ["stop_actors"]


@pytest.fixture
def journal_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "team"
    folder.mkdir()
    return folder


def board_on(folder: Path) -> Board:
    """A board over its own journal handle: as if in its own process."""
    return Board(FileJournal(folder))


def agent(name: str) -> MemberSpawned:
    return MemberSpawned(name=name, role="general")


@pytest.mark.parametrize(
    "name", ["user", "cli", "runtime", "scheduler", "all", "User", "RUNTIME", "Lead", "lead"]
)
def test_reserved_names_are_refused_for_anyone_but_the_lead(name: str) -> None:
    with pytest.raises(InvalidMemberName, match="reserved"):
        check_member_name(name, lead=None)
    if name != "lead":
        with pytest.raises(InvalidMemberName, match="reserved"):
            check_member_name(name)
    else:
        assert check_member_name("lead") == "lead"  # the lead itself


@pytest.mark.parametrize("name", ["-rf", "--force", ".hidden", "a/b", "", "x" * 65, "é"])
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidMemberName, match="not starting with '-'"):
        check_member_name(name)


@pytest.mark.parametrize("name", ["alice", "Bob", "w1", "_x", "reviewer-2", "a.b"])
def test_ordinary_names_pass(name: str) -> None:
    assert check_member_name(name) == name


def test_every_actor_name_the_program_writes_is_reserved() -> None:
    from actors.cli.approvals import HUMAN
    from actors.jobs.actor import SENDER as JOBS
    from actors.jobs.cron import HOST_ACTORS
    from actors.jobs.scheduler import SENDER as SCHEDULER
    from actors.runtime.hosting import RUNTIME
    from actors.runtime.stop import SENDER as STOP

    used = {HUMAN, JOBS, SCHEDULER, RUNTIME, STOP, "supervisor", *HOST_ACTORS}
    assert used <= RESERVED_NAMES


def test_names_differing_only_in_case_cannot_both_exist(journal_dir: Path) -> None:
    board = board_on(journal_dir)
    assert board.add_member(agent("alice")) is True
    with pytest.raises(DuplicateMember, match="case-insensitive") as info:
        board.add_member(agent("Alice"))
    assert info.value.taken == "alice"
    with pytest.raises(DuplicateMember):
        board.add_member(agent("alice"))  # the same name while it has not stopped
    assert list(board.state.members) == ["alice"]


def test_a_stopped_agent_name_may_be_spawned_again_and_a_person_joins_once(
    journal_dir: Path,
) -> None:
    board = board_on(journal_dir)
    board.add_member(agent("w1"))
    body = MemberStopped(name="w1", reason="done")
    board.execute(lambda st: [draft(body.TYPE, "runtime", body)])
    assert board.add_member(agent("w1")) is True
    human = MemberSpawned(name="carol", role="human", kind="human")
    assert board.add_member(human) is True
    assert board.add_member(human) is False, "a person already on the team is left as is"
    with pytest.raises(TeamError, match="not a person"):
        board.add_member(MemberSpawned(name="w1", role="human", kind="human"))


def test_racing_spawns_of_alice_and_alice_cannot_both_win(journal_dir: Path) -> None:
    first, second = board_on(journal_dir), board_on(journal_dir)
    second.refresh()  # second decided on a state where neither exists...
    first.add_member(agent("Alice"))
    with pytest.raises(DuplicateMember):
        second.add_member(agent("alice"))  # ...but the decision runs on the journal's truth
    members = [e.data["name"] for e in FileJournal(journal_dir).read_from(1)]
    assert members == ["Alice"]


def test_a_persons_first_claim_joins_under_the_same_rules(journal_dir: Path) -> None:
    first, second = board_on(journal_dir), board_on(journal_dir)
    first.create("one")
    first.create("two")
    second.refresh()
    assert first.claim("task_1", "Bob", human=True).ok
    with pytest.raises(DuplicateMember):
        second.claim("task_2", "bob", human=True)
    with pytest.raises(InvalidMemberName):
        second.claim("task_2", "lead", human=True)
    types = [e.type for e in FileJournal(journal_dir).read_from(1)]
    assert types == ["task.created", "task.created", "member.spawned", "task.claimed"]
    state = second.refresh()
    assert state.task("task_2").owner is None
    assert state.members["Bob"].kind == "human"


def test_spawn_teammate_refuses_bad_names_with_one_tool_error(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    from actors.tools.toolsets import NO_HOOKS, lead_tools
    from harness.model.scripted import ScriptedModel
    from tests.actors.team_support import Driver

    root = team_repo(tmp_path)
    rt = runtime(root, ScriptedModel({"agents": {"*": {"rules": []}}}))
    stop_actors.append(rt)
    rt.start()
    lead = Driver(lead_tools(rt.services, hooks=NO_HOOKS), "lead", root)
    assert "Spawned teammate alice" in lead.ok("spawn_teammate", name="alice", prompt="hi")
    error = lead.error("spawn_teammate", name="Alice", prompt="hi")
    assert "'alice' already exists (names are case-insensitive)" in error
    assert "\n" not in error.strip()
    for bad in ("runtime", "User", "-rf"):
        assert "invalid member name" in lead.error("spawn_teammate", name=bad, prompt="hi")
    assert [m.name for m in rt.services.members()] == ["lead", "alice"]
    assert rt.wait_idle(timeout=30)
