"""The lead's team tools over a fake runtime (real journal, real Maildir)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.tools.toolsets import (
    LEAD_TOOL_NAMES,
    NO_HOOKS,
    TEAMMATE_TOOL_NAMES,
    lead_tools,
    teammate_tools,
)
from tests.actors.team_fakes import Driver, FakeTeam, make_team


@pytest.fixture
def team(tmp_path: Path) -> Iterator[FakeTeam]:
    fake = make_team(tmp_path / "repo")
    yield fake
    fake.close()


@pytest.fixture
def lead(team: FakeTeam) -> Driver:
    return Driver(lead_tools(team, hooks=NO_HOOKS, now=lambda: 1e12), "lead", team.root)


def test_factories_give_each_role_its_tools_with_valid_schemas(team: FakeTeam) -> None:
    lead_set = lead_tools(team, hooks=NO_HOOKS)
    mate_set = teammate_tools(team, "ann", hooks=NO_HOOKS)
    assert [t.name for t in lead_set] == list(LEAD_TOOL_NAMES)
    assert [t.name for t in mate_set] == list(TEAMMATE_TOOL_NAMES)
    assert "review_plan" in LEAD_TOOL_NAMES and "review_plan" not in TEAMMATE_TOOL_NAMES
    assert "claim_task" in TEAMMATE_TOOL_NAMES and "spawn_teammate" not in TEAMMATE_TOOL_NAMES
    for tool in [*lead_set, *mate_set]:
        spec = tool.spec()
        assert spec.input_schema["type"] == "object"
        assert spec.input_schema.get("additionalProperties") is False
        assert len(spec.description) > 20


def test_create_update_list_and_get_tasks(team: FakeTeam, lead: Driver) -> None:
    assert lead.ok("list_tasks") == "No open tasks."
    assert lead.ok("create_task", subject="design", description="write it down") == (
        "Created task_1 (ready): design"
    )
    text = lead.ok("create_task", subject="build", blocked_by=["task_1"], role="coder")
    assert text == "Created task_2 (blocked): build"
    rows = json.loads(lead.ok("list_tasks"))
    assert [(r["id"], r["status"]) for r in rows] == [("task_1", "ready"), ("task_2", "blocked")]
    assert rows[1]["blocked_by"] == ["task_1"] and rows[1]["role"] == "coder"
    assert [r["id"] for r in json.loads(lead.ok("list_tasks", status="ready"))] == ["task_1"]
    assert lead.ok("update_task", task_id="task_2", description="compile") == (
        "Updated task_2: build (blocked by: task_1)."
    )
    assert lead.ok("update_task", task_id="task_2", description="compile") == "task_2 unchanged."
    detail = json.loads(lead.ok("get_task", task_id="task_2"))
    assert detail["description"] == "compile" and detail["status"] == "blocked"
    assert json.loads(lead.ok("get_task", task_id="task_1"))["blocks"] == ["task_2"]
    assert [e.data["subject"] for e in team.events("task.created")] == ["design", "build"]


def test_task_tool_errors_are_clean_tool_errors(lead: Driver) -> None:
    lead.ok("create_task", subject="a")
    lead.ok("create_task", subject="b", blocked_by=["task_1"])
    assert "unknown task 'task_9'" in lead.error("get_task", task_id="task_9")
    assert "unknown task 'task_7'" in lead.error("create_task", subject="c", blocked_by=["task_7"])
    cycle = lead.error("update_task", task_id="task_1", add_blocked_by=["task_2"])
    assert "dependency cycle refused: task_1 -> task_2 -> task_1" in cycle
    assert "subject" in lead.error("create_task", subject="")
    assert "Extra inputs" in lead.error("create_task", subject="x", owner="me")


def test_spawn_and_list_teammates(team: FakeTeam, lead: Driver) -> None:
    assert lead.ok("list_teammates") == "No teammates yet."
    lead.ok("create_task", subject="a")
    text = lead.ok(
        "spawn_teammate", name="ann", role="coder", prompt="do a", task_id="task_1", tools=["bash"]
    )
    assert text.startswith("Spawned teammate ann (role coder") and "working on task_1" in text
    assert team.spawned[0].tools == ("bash",) and team.spawned[0].task_id == "task_1"
    assert team.board.state.task("task_1").owner == "ann"
    lead.ok("spawn_teammate", name="bob", prompt="help", plan_required=True)
    rows = json.loads(lead.ok("list_teammates"))
    assert [(r["name"], r["task"], r["role"]) for r in rows] == [
        ("ann", "task_1", "coder"),
        ("bob", None, "general"),
    ]
    assert {"status", "tokens_used", "last_activity_s_ago"} <= set(rows[0])
    assert "already exists" in lead.error("spawn_teammate", name="ann", prompt="again")
    refused = lead.error("spawn_teammate", name="cy", prompt="x", task_id="task_1")
    assert "already claimed by ann" in refused
    assert "invalid agent name" in lead.error("spawn_teammate", name="../x", prompt="x")


def test_send_message_direct_broadcast_and_unknown(team: FakeTeam, lead: Driver) -> None:
    lead.ok("spawn_teammate", name="ann", prompt="p")
    lead.ok("spawn_teammate", name="bob", prompt="p")
    assert lead.ok("send_message", to="ann", text="hello").startswith("Message delivered to ann")
    assert lead.ok("send_message", to="*", text="standup") == ("Broadcast delivered to ann, bob.")
    [hello, standup] = team.inbox("ann")
    assert (hello.sender, hello.type, hello.text) == ("lead", "message", "hello")
    assert (standup.type, standup.text) == ("broadcast", "standup")
    assert [m.text for m in team.inbox("bob")] == ["standup"]
    assert team.inbox("lead") == []
    assert "unknown recipient 'zed'" in lead.error("send_message", to="zed", text="hi")
    assert "yourself" in lead.error("send_message", to="lead", text="hi")


def test_request_shutdown_sends_the_request(team: FakeTeam, lead: Driver) -> None:
    lead.ok("spawn_teammate", name="ann", prompt="p")
    text = lead.ok("request_shutdown", name="ann")
    [msg] = team.inbox("ann")
    assert msg.type == "shutdown_request" and msg.body["request_id"] in text
    assert team.events("shutdown.requested")[0].data["name"] == "ann"
    assert "unknown team member 'zed'" in lead.error("request_shutdown", name="zed")


def test_cron_tools(team: FakeTeam, lead: Driver) -> None:
    assert lead.ok("list_crons") == "No cron jobs scheduled."
    text = lead.ok("schedule_cron", cron="*/5 * * * *", prompt="check the build")
    assert text == "Scheduled recurring cron cron_1; next fire soon."
    rows = json.loads(lead.ok("list_crons"))
    assert rows[0]["prompt"] == "check the build" and rows[0]["recurring"] is True
    assert team.crons["cron_1"].owner == "lead"
    assert "bad cron expression" in lead.error("schedule_cron", cron="* *", prompt="x")
    assert lead.ok("cancel_cron", cron_id="cron_1") == "Cancelled cron cron_1."
    assert "unknown cron job" in lead.error("cancel_cron", cron_id="cron_1")
