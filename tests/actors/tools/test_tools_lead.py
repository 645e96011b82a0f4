"""The lead's team tools over a real ``TeamRuntime``: the board's, and what the runtime does
(spawning, mail, shutdown, cron)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.runtime import TeamRuntime
from actors.tools.toolsets import (
    LEAD_TOOL_NAMES,
    NO_HOOKS,
    TEAMMATE_TOOL_NAMES,
    lead_tools,
    teammate_tools,
)
from actors.tools.worktree import worktree_tools
from actors.worktrees.messages import Created, MergeResult
from mailboxes.events import Event
from mailboxes.messages import Envelope, parse_envelope
from tests.actors.runtime.runtime_support import stop_actors, team_repo
from tests.actors.team_support import Driver, Held, RealTeam, real_team

__all__ = ["stop_actors"]


@pytest.fixture
def team(tmp_path: Path) -> Iterator[RealTeam]:
    team = real_team(tmp_path / "repo")
    yield team
    team.close()


@pytest.fixture
def lead(team: RealTeam) -> Driver:
    return Driver(lead_tools(team, hooks=NO_HOOKS, now=lambda: 1e12), "lead", team.root)


def test_factories_give_each_role_its_tools_with_valid_schemas(team: RealTeam) -> None:
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


class _NoWorktrees:
    """Worktree ops for building the worktree tools' specs only."""

    def create(self, name: str, task_id: str, base: str | None = None) -> Created:
        raise AssertionError("not called")

    def merge(self, name: str, *, squash: bool = False) -> MergeResult:
        raise AssertionError("not called")


def test_the_lead_only_tool_specs_stay_small(team: RealTeam) -> None:
    """The lead's own tools go with every lead request and a solo agent never sends them: their
    specs as sent (name, description, schema; compact JSON) stay within a byte budget, and the
    answers to the lead's commonest calls do not echo what the call said."""
    tools = [*lead_tools(team, hooks=NO_HOOKS), *worktree_tools(_NoWorktrees())]
    own = [t.spec() for t in tools if t.name not in TEAMMATE_TOOL_NAMES]
    sizes = {s.name: len(json.dumps(s.model_dump(), separators=(",", ":"))) for s in own}
    assert len(sizes) == 14 and sum(sizes.values()) <= 7_500, sizes
    lead = Driver(tools, "lead", team.root)
    assert lead.ok("spawn_teammate", name="w1", prompt="Take tasks.") == "Spawned teammate w1."
    assert lead.ok("create_task", subject="Write notes/one.txt") == "Created task_1 (ready)."


def test_create_update_list_and_get_tasks(team: RealTeam, lead: Driver) -> None:
    assert lead.ok("list_tasks") == "No open tasks."
    assert lead.ok("create_task", subject="design", description="write it down") == (
        "Created task_1 (ready)."
    )
    text = lead.ok("create_task", subject="build", blocked_by=["task_1"], role="coder")
    assert text == "Created task_2 (blocked)."
    rows = json.loads(lead.ok("list_tasks"))
    assert [(r["id"], r["status"]) for r in rows] == [("task_1", "ready"), ("task_2", "blocked")]
    assert rows[1]["blocked_by"] == ["task_1"] and rows[1]["role"] == "coder"
    assert [r["id"] for r in json.loads(lead.ok("list_tasks", status="ready"))] == ["task_1"]
    assert lead.ok("update_task", task_id="task_2", description="compile") == (
        "Updated task_2 (blocked by: task_1)."
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


# -- what the runtime does (spawning, mail, shutdown, cron): the real TeamRuntime -------------------


@dataclass
class Real:
    rt: TeamRuntime
    lead: Driver

    def inbox(self, agent: str) -> list[Envelope]:
        """Every message delivered to ``agent``, read or not (its actor may have taken one)."""
        box = Path(self.rt.team.mailbox.inbox(agent))
        files = [p for sub in ("new", "cur") for p in (box / sub).iterdir()]
        return sorted((parse_envelope(p.read_bytes()) for p in files), key=lambda e: e.ts)

    def events(self, kind: str) -> list[Event]:
        return [e for e in self.rt.team.journal.read_from(1) if e.type == kind]


@pytest.fixture
def real(tmp_path: Path, stop_actors: list[Any]) -> Iterator[Real]:
    root = team_repo(tmp_path)
    model = Held()
    rt = TeamRuntime(
        root, model=model, jobs=False, worktrees=False, fsync_transcripts=False, scheduler=True
    )
    stop_actors.append(rt)
    rt.start()
    try:
        yield Real(rt, Driver(lead_tools(rt.services, hooks=NO_HOOKS), "lead", root))
    finally:
        model.release.set()


def test_spawn_and_list_teammates(real: Real) -> None:
    lead, rt = real.lead, real.rt
    assert lead.ok("list_teammates") == "No teammates yet."
    lead.ok("create_task", subject="a")
    text = lead.ok(
        "spawn_teammate", name="ann", role="coder", prompt="do a", task_id="task_1", tools=["bash"]
    )
    assert text == "Spawned teammate ann, working on task_1."
    [spawned] = real.events("member.spawned")[1:]  # after the lead's own
    assert (spawned.data["name"], spawned.data["tools"]) == ("ann", ["bash"])
    assert rt.board.refresh().task("task_1").owner == "ann"
    lead.ok("spawn_teammate", name="bob", prompt="help", plan_required=True)
    rows = json.loads(lead.ok("list_teammates"))
    assert [(r["name"], r["task"], r["role"]) for r in rows] == [
        ("ann", "task_1", "coder"),
        ("bob", None, "general"),
    ]
    assert {"status", "tokens_used", "last_activity_s_ago"} <= set(rows[0])
    assert lead.error("spawn_teammate", name="ann", prompt="again") == (
        "team member 'ann' already exists"
    )
    refused = lead.error("spawn_teammate", name="cy", prompt="x", task_id="task_1")
    assert "already claimed by ann" in refused
    assert "cy" not in rt.board.refresh().members
    assert "invalid agent name" in lead.error("spawn_teammate", name="../x", prompt="x")


def test_send_message_direct_broadcast_and_unknown(real: Real) -> None:
    lead = real.lead
    lead.ok("spawn_teammate", name="ann", prompt="p")
    lead.ok("spawn_teammate", name="bob", prompt="p")
    assert lead.ok("send_message", to="ann", text="hello").startswith("Message delivered to ann")
    assert lead.ok("send_message", to="*", text="standup") == ("Broadcast delivered to ann, bob.")
    [hello, standup] = real.inbox("ann")
    assert (hello.sender, hello.type, hello.text) == ("lead", "message", "hello")
    assert (standup.type, standup.text) == ("broadcast", "standup")
    assert [m.text for m in real.inbox("bob")] == ["standup"]
    assert real.inbox("lead") == []
    assert "unknown recipient 'zed'" in lead.error("send_message", to="zed", text="hi")
    assert "yourself" in lead.error("send_message", to="lead", text="hi")


def test_request_shutdown_sends_the_request(real: Real) -> None:
    lead = real.lead
    lead.ok("spawn_teammate", name="ann", prompt="p")
    text = lead.ok("request_shutdown", name="ann")
    [msg] = real.inbox("ann")
    assert msg.type == "shutdown_request" and msg.body["request_id"] in text
    assert (
        msg.text == "lead asks you to shut down: finish your step, release or complete your task."
    )
    assert real.events("shutdown.requested")[0].data["name"] == "ann"
    assert lead.error("request_shutdown", name="zed") == "unknown team member 'zed'"
    assert lead.error("request_shutdown", name="lead") == "you cannot request your own shutdown"


def test_cron_tools(real: Real) -> None:
    lead = real.lead
    assert lead.ok("list_crons") == "No cron jobs scheduled."
    text = lead.ok("schedule_cron", cron="*/5 * * * *", prompt="check the build")
    assert re.fullmatch(r"Scheduled recurring cron (cron_\w+); next fire .+\.", text), text
    [row] = json.loads(lead.ok("list_crons"))
    assert row["prompt"] == "check the build" and row["recurring"] is True
    assert row["cron"] == "*/5 * * * *" and text.split()[3].rstrip(";") == row["cron_id"]
    [scheduled] = real.events("cron.scheduled")
    assert (scheduled.actor, scheduled.data["cron_id"]) == ("lead", row["cron_id"])
    assert lead.error("schedule_cron", cron="* *", prompt="x") == (
        "cron expression '* *' has 2 fields; expected 5 (minute hour day-of-month month day-of-week)"
    )
    cron_id = row["cron_id"]
    assert lead.ok("cancel_cron", cron_id=cron_id) == f"Cancelled cron {cron_id}."
    assert lead.ok("list_crons") == "No cron jobs scheduled."
    # cancelling it again changes nothing (one cron.cancelled); an id never scheduled is an error
    assert lead.ok("cancel_cron", cron_id=cron_id) == f"Cancelled cron {cron_id}."
    assert [e.data["cron_id"] for e in real.events("cron.cancelled")] == [cron_id]
    assert lead.error("cancel_cron", cron_id="cron_nope") == "unknown cron job 'cron_nope'"
