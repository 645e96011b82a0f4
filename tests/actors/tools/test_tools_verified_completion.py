"""``complete_task`` of a task with a ``verify`` command: refused (a tool error with the
command's output and exit code, journaled ``task.verified``) until the command exits 0, run in
the task's worktree or the main checkout with the agent's command environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.tools.toolsets import NO_HOOKS, lead_tools, teammate_tools
from actors.worktrees.actor import WorktreesHandle
from mailboxes.events import TaskVerified, payload
from tests.actors.team_support import Driver, RealTeam, real_team


@pytest.fixture
def team(tmp_path: Path) -> Iterator[RealTeam]:
    team = real_team(tmp_path / "repo")
    yield team
    team.close()


def _claimed(team: RealTeam, verify: str) -> tuple[Driver, Driver]:
    lead = Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root)
    lead.ok("spawn_teammate", name="ann", prompt="work")  # first: it would claim a ready task
    assert (
        lead.ok("create_task", subject="make done.txt", verify=verify) == "Created task_1 (ready)."
    )
    assert team.board.refresh().task("task_1").verify == verify
    ann = Driver(teammate_tools(team, "ann", hooks=NO_HOOKS), "ann", team.root)
    ann.ok("claim_task", task_id="task_1")
    return lead, ann


def _verified(team: RealTeam) -> list[TaskVerified]:
    out = []
    for event in team.events("task.verified"):
        body = payload(event)
        assert isinstance(body, TaskVerified)
        out.append(body)
    return out


def test_completion_is_refused_until_the_command_passes(team: RealTeam) -> None:
    _, ann = _claimed(team, "echo checking for done.txt; test -f done.txt")
    assert '"verify": "echo checking for done.txt; test -f done.txt"' in ann.ok(
        "get_task", task_id="task_1"
    )

    refused = ann.error("complete_task", task_id="task_1", summary="done")
    assert "Completion of task_1 refused" in refused
    assert "exited 1" in refused and "checking for done.txt" in refused
    assert team.board.refresh().task("task_1").status == "in_progress"
    assert team.events("task.completed") == []
    first = _verified(team)
    assert [(v.stage, v.passed, v.exit_code) for v in first] == [("complete", False, 1)]
    assert "checking for done.txt" in first[0].output
    assert team.board.state.task("task_1").verified is False

    (team.root / "done.txt").write_text("yes\n")
    assert ann.ok("complete_task", task_id="task_1", summary="done") == "Completed task_1."
    task = team.board.refresh().task("task_1")
    assert task.status == "completed" and task.verified is True
    assert [(v.passed, v.exit_code) for v in _verified(team)] == [(False, 1), (True, 0)]


def test_the_command_gets_the_scrubbed_command_environment(
    team: RealTeam, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    _, ann = _claimed(team, 'test -z "$ANTHROPIC_API_KEY"')
    ann.ok("complete_task", task_id="task_1", summary="done")
    assert _verified(team)[0].passed


def test_a_command_that_outlives_the_timeout_fails(tmp_path: Path) -> None:
    team = real_team(tmp_path / "repo", {"team": {"verify_timeout_s": 0.5}})
    try:
        _, ann = _claimed(team, "sleep 30")
        refused = ann.error("complete_task", task_id="task_1", summary="done")
        assert "timed out after 0.5 s" in refused
        assert [(v.timed_out, v.exit_code) for v in _verified(team)] == [(True, None)]
    finally:
        team.close()


def test_a_task_bound_to_a_worktree_is_verified_in_it(tmp_path: Path) -> None:
    team = real_team(tmp_path / "repo", initial_commit=True, worktrees=True)
    try:
        _verified_in_its_worktree(team)
    finally:
        team.close()


def _verified_in_its_worktree(team: RealTeam) -> None:
    root = team.root
    handle = team.worktrees
    assert isinstance(handle, WorktreesHandle)  # the runtime's Worktrees actor
    lead = Driver(lead_tools(team, hooks=NO_HOOKS), "lead", root)
    lead.ok("spawn_teammate", name="ann", prompt="work")  # first: it would claim a ready task
    lead.ok("create_task", subject="make done.txt", verify="test -f done.txt")
    lead.ok("create_worktree", name="cart", task_id="task_1")
    ann = Driver(teammate_tools(team, "ann", hooks=NO_HOOKS), "ann", handle.path("cart"))
    ann.ok("claim_task", task_id="task_1")

    (root / "done.txt").write_text("in the main checkout: not the task's work\n")
    assert "exited 1" in ann.error("complete_task", task_id="task_1", summary="done")
    (handle.path("cart") / "done.txt").write_text("yes\n")
    text = ann.ok("complete_task", task_id="task_1", summary="done")
    assert text.startswith("Completed task_1. Your uncommitted changes were committed on wt/cart")
    assert [(v.worktree, v.passed) for v in _verified(team)] == [("cart", False), ("cart", True)]
