"""Team tools are fail-closed: read-only only when they change nothing, usable while planning only
when they say so (the coordination a planning teammate needs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.tools.base import Input, TeamTool
from actors.tools.toolsets import NO_HOOKS, lead_tools, teammate_tools
from harness.permissions.checks import Permissions
from harness.tools.base import ToolContext, ToolOutput
from tests.actors.team_support import Driver, RealTeam, real_team

READ_ONLY = {"list_tasks", "get_task", "list_teammates", "list_crons"}
PLAN_SAFE = {"claim_task", "release_task", "send_message", "submit_plan"}


@pytest.fixture
def team(tmp_path: Path) -> Iterator[RealTeam]:
    team = real_team(tmp_path / "repo")
    yield team
    team.close()


def team_tools(team: RealTeam) -> dict[str, TeamTool[Any]]:
    tools = [*lead_tools(team, hooks=NO_HOOKS), *teammate_tools(team, "ann", hooks=NO_HOOKS)]
    return {t.name: t for t in tools if isinstance(t, TeamTool)}


def test_only_tools_that_change_nothing_are_read_only(team: RealTeam) -> None:
    tools = team_tools(team)
    assert {n for n, t in tools.items() if t.read_only} == READ_ONLY
    planning = {n for n, t in tools.items() if t.allowed_in_plan(t.input_model.model_construct())}
    assert planning == READ_ONLY | PLAN_SAFE


def test_a_new_team_tool_is_neither_read_only_nor_allowed_while_planning(tmp_path: Path) -> None:
    class Launch(TeamTool[Input]):
        name = "launch"
        description = "changes something"
        input_model = Input

        def call(self, args: Input, ctx: ToolContext) -> ToolOutput:
            return ToolOutput("launched")

    tool = Launch.__new__(Launch)
    assert not tool.is_read_only(Input()) and not tool.allowed_in_plan(Input())
    request = tool.permission_request(Input(), ToolContext("a", tmp_path, tmp_path))
    assert Permissions(mode="plan").check(
        request, ToolContext("a", tmp_path, tmp_path)
    ).decision == ("deny")


def test_a_lead_in_plan_mode_cannot_change_the_team(team: RealTeam) -> None:
    lead = Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root, read_only=True)
    lead.ok("list_tasks")
    lead.ok("list_teammates")
    assert "plan" in lead.error("create_task", subject="a").lower()
    assert "plan" in lead.error("spawn_teammate", name="bob", prompt="work").lower()
