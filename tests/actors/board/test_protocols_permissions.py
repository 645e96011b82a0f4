"""Permission requests from teammates: answered by a human (CLI), by the lead (tool), denied by
settings, or timed out into a denial. Waits are Event-based; nothing sleeps."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.board import protocols as bp
from actors.runtime.permission_requests import (
    JournalDecisions,
    PermissionRefused,
    PermissionRouter,
    WatchJournal,
)
from actors.runtime.runtime import TeamRuntime
from actors.tools.toolsets import NO_HOOKS, lead_tools
from harness.model.scripted import ScriptedModel
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolUseBlock
from harness.tools.base import PermissionRequest, ToolContext
from mailboxes.ports import OnHints, Watcher
from mailboxes.watch import HintWatcher
from tests.actors.cli.cli_support import fails, ok, ok_json
from tests.actors.runtime.runtime_support import stop_actors, team_repo
from tests.actors.team_support import Driver, RealTeam, delivered, real_team

__all__ = ["stop_actors"]

WAIT_LIMIT_S = 30.0  # a generous bound for a test to fail rather than hang

BASH_RM = PermissionRequest(tool="bash", kind="shell", target="rm -rf build")


def ctx_for(team: RealTeam, agent: str = "ann") -> ToolContext:
    return ToolContext(agent=agent, root=team.root, cwd=team.root)


def spawn(team: RealTeam) -> Driver:
    lead = Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root)
    lead.ok("spawn_teammate", name="ann", prompt="work")
    return lead


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., RealTeam]]:
    made: list[RealTeam] = []

    def build(**approvals: object) -> RealTeam:
        team = real_team(tmp_path / f"repo{len(made)}", {"approvals": approvals})
        made.append(team)
        spawn(team)
        return team

    yield build
    for team in made:
        team.close()


class Asking:
    """Runs a router call on a thread; ``waiting`` is set once the teammate waits."""

    def __init__(self, router_for: Callable[[Callable[[bool], None]], PermissionRouter]) -> None:
        self.waiting = threading.Event()
        self.states: list[bool] = []
        self.outcome: list[object] = []

        def on_wait(waiting: bool) -> None:
            self.states.append(waiting)
            if waiting:
                self.waiting.set()

        self.router = router_for(on_wait)

    def start(self, team: RealTeam) -> Asking:
        def run() -> None:
            try:
                self.outcome.append(self.router(BASH_RM, ctx_for(team), "rm needs approval"))
            except PermissionRefused as exc:
                self.outcome.append(exc)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.waiting.wait(WAIT_LIMIT_S)
        return self

    def result(self) -> object:
        self.thread.join(WAIT_LIMIT_S)
        assert not self.thread.is_alive()
        assert self.states == [True, False]
        return self.outcome[0]


def journal_watch(team: RealTeam) -> WatchJournal:
    """The file watcher of ``team``'s journal (what ``Team.watch`` builds without inboxes)."""

    def build(on_hints: OnHints, rescan_s: float) -> Watcher:
        return HintWatcher(on_hints, journal=team.journal.path, rescan_s=rescan_s)

    return build


def journal_router(
    team: RealTeam, waits: JournalDecisions, rid: str, timeout_s: float | None = None
) -> Callable[[Callable[[bool], None]], PermissionRouter]:
    def build(on_wait: Callable[[bool], None]) -> PermissionRouter:
        return PermissionRouter(
            team, waits.wait, on_wait=on_wait, timeout_s=timeout_s, new_id=lambda: rid
        )

    return build


def test_human_answers_from_the_cli(
    make: Callable[..., RealTeam], monkeypatch: pytest.MonkeyPatch
) -> None:
    team = make(permissions="human")
    monkeypatch.chdir(team.root)
    waits = JournalDecisions(team.journal, journal_watch(team), rescan_s=0.5)
    try:
        asking = Asking(journal_router(team, waits, "perm-h1")).start(team)
        [listed] = ok_json(["permissions"])
        assert (listed["request_id"], listed["agent"], listed["tool"]) == ("perm-h1", "ann", "bash")
        assert listed["input"]["target"] == "rm -rf build"
        assert "perm-h1" in ok(["permissions"]).stdout
        assert team.inbox("lead") == []  # a human approver: the lead is not asked
        assert ok(["approve", "perm-h1"]).stdout.strip() == "allowed permission request perm-h1"
        assert asking.result() is True
    finally:
        waits.close()
    assert ok_json(["permissions"]) == []
    assert "already decided: allow by user" in fails(["reject", "perm-h1"])
    [decided] = team.events("permission.decided")
    assert (decided.data["decision"], decided.data["by"]) == ("allow", "user")


def test_human_denial_reaches_the_teammate_with_the_reason(
    make: Callable[..., RealTeam], monkeypatch: pytest.MonkeyPatch
) -> None:
    team = make(permissions="human")
    monkeypatch.chdir(team.root)
    waits = JournalDecisions(team.journal, journal_watch(team), rescan_s=0.5)
    try:
        asking = Asking(journal_router(team, waits, "perm-h2")).start(team)
        ok(["reject", "perm-h2", "--feedback", "use make clean"])
        refused = asking.result()
    finally:
        waits.close()
    assert isinstance(refused, PermissionRefused)
    assert str(refused) == "permission request perm-h2 denied by user: use make clean"


def test_lead_answers_with_its_tool(make: Callable[..., RealTeam]) -> None:
    team = make(permissions="lead")
    lead = Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root)
    waits = JournalDecisions(team.journal, journal_watch(team))
    try:
        asking = Asking(journal_router(team, waits, "perm-l1")).start(team)
        [msg] = team.inbox("lead")
        assert (msg.type, msg.sender, msg.body["request_id"]) == (
            "permission_request",
            "ann",
            "perm-l1",
        )
        assert "answer_permission" in msg.text and "rm -rf build" in msg.text
        answer = lead.ok("answer_permission", request_id="perm-l1", allow=False, reason="no rm")
        assert answer == "Request perm-l1: deny."
        refused = asking.result()
    finally:
        waits.close()
    assert str(refused) == "permission request perm-l1 denied by lead: no rm"
    again = lead.ok("answer_permission", request_id="perm-l1", allow=True)
    assert again == "Request perm-l1 was already decided: deny by lead (no rm)."
    assert "unknown permission request" in lead.error(
        "answer_permission", request_id="perm-zz", allow=True
    )


def test_lead_answer_wakes_an_in_process_waiter_through_notify(
    make: Callable[..., RealTeam],
) -> None:
    team = make(permissions="lead")
    waits = JournalDecisions(team.journal, None)  # no watcher: only notify wakes it
    asking = Asking(journal_router(team, waits, "perm-n1")).start(team)
    waits.notify(bp.decide_permission(team.board, "perm-n1", True, by="lead"))
    assert asking.result() is True


def test_no_answer_times_out_into_a_journaled_denial(make: Callable[..., RealTeam]) -> None:
    team = make(permissions="human", timeout_s=0.05)
    waits = JournalDecisions(team.journal, journal_watch(team))
    try:
        refused = Asking(journal_router(team, waits, "perm-t1")).start(team).result()
    finally:
        waits.close()
    assert isinstance(refused, PermissionRefused)
    assert str(refused) == (
        "permission request perm-t1 timed out: no answer from the human "
        "(`teamctl approve|reject`) within 0.05s"
    )
    [decided] = team.events("permission.decided")
    assert (decided.data["decision"], decided.data["by"]) == ("deny", "timeout")
    late = bp.decide_permission(team.board, "perm-t1", True, by="user")
    assert (late.first, late.decision, late.by) == (False, "deny", "timeout")


def test_an_answer_racing_the_timeout_wins_if_journaled_first(
    make: Callable[..., RealTeam],
) -> None:
    team = make(permissions="lead")

    def answered_at_the_deadline(rid: str, timeout_s: float) -> bp.PermissionAnswer | None:
        bp.decide_permission(team.board, rid, True, by="lead")
        return None  # the wait ended before it saw the answer

    router = PermissionRouter(team, answered_at_the_deadline, new_id=lambda: "perm-r1")
    assert router(BASH_RM, ctx_for(team), "ask") is True
    assert [e.data["by"] for e in team.events("permission.decided")] == ["lead"]


def test_deny_route_refuses_at_once_through_the_policy(make: Callable[..., RealTeam]) -> None:
    team = make(permissions="deny")

    def never(rid: str, timeout_s: float) -> bp.PermissionAnswer | None:
        raise AssertionError("a deny route must not wait")

    router = PermissionRouter(team, never, new_id=lambda: "perm-d1")
    policy = HarnessPolicy(Permissions(ask=["Bash(rm:*)"]), approver=router)
    call = ToolUseBlock(id="toolu_1", name="bash", input={"command": "rm -rf build"})
    verdict = policy.before(call, BASH_RM, ctx_for(team))
    assert verdict.decision == "deny"
    assert "permission request perm-d1 denied by settings" in verdict.reason
    [decided] = team.events("permission.decided")
    assert decided.data["by"] == "settings"


def test_decisions_need_a_request_and_the_lead_tool_respects_routing(
    make: Callable[..., RealTeam],
) -> None:
    team = make(permissions="human")
    with pytest.raises(bp.ProtocolError, match="unknown permission request"):
        bp.decide_permission(team.board, "perm-none", True, by="user")
    lead = Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root)
    refused = lead.error("answer_permission", request_id="perm-x", allow=True)
    assert "answered by the human" in refused
    assert team.events("permission.decided") == []


def test_a_teammates_ask_reaches_the_lead_and_the_answer_the_teammate_in_the_runtime(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    """The whole route through a member's own agent loop (the tests above drive the router for
    the teammate, on a real runtime too): w1's bash call asks, the lead is told with the
    runtime's text, answers with its tool, and w1's call is refused with the lead's reason."""
    root = team_repo(tmp_path)
    (root / ".team" / "settings.json").write_text(
        json.dumps({"approvals": {"permissions": "lead"}})
    )
    script: dict[str, Any] = {
        "agents": {
            "lead": {
                "steps": [
                    {
                        "match": "Clean up",
                        "tool_uses": [
                            {"name": "create_task", "input": {"subject": "clean"}},
                            {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "go"}},
                        ],
                    },
                    "Team started.",
                ],
                "rules": [
                    {
                        "match": r"answer_permission\(request_id='(?P<rid>[^']+)'",
                        "tool_uses": [
                            {
                                "name": "answer_permission",
                                "input": {"request_id": "{rid}", "allow": False, "reason": "no rm"},
                            }
                        ],
                    },
                    {"match": ".", "text": "Noted.", "priority": -1},
                ],
            },
            "w1": {
                "rules": [
                    {
                        "match": r"You now hold task task_1 \(claim",
                        "tool_uses": [{"name": "bash", "input": {"command": "rm -rf build"}}],
                    },
                    {
                        "match": r"permission request (?P<rid>\S+) denied by lead: no rm",
                        "tool_uses": [
                            {
                                "name": "complete_task",
                                "input": {"task_id": "task_1", "summary": "refused {rid}"},
                            }
                        ],
                    },
                    {"match": ".", "text": "Done.", "priority": -1},
                ]
            },
        }
    }
    rt = TeamRuntime(
        root, model=ScriptedModel(script), jobs=False, worktrees=False, fsync_transcripts=False
    )
    stop_actors.append(rt)
    rt.start()
    rt.submit("Clean up")
    assert rt.wait_idle(timeout=WAIT_LIMIT_S)
    events = list(rt.team.journal.read_from(1))
    [asked] = [e for e in events if e.type == "permission.requested"]
    [decided] = [e for e in events if e.type == "permission.decided"]
    rid = asked.data["request_id"]
    assert (asked.actor, asked.data["agent"], asked.data["tool"]) == ("w1", "w1", "bash")
    assert (decided.data["request_id"], decided.data["decision"]) == (rid, "deny")
    assert (decided.data["by"], decided.data["reason"]) == ("lead", "no rm")
    [msg] = [m for m in delivered(rt.team.mailbox, "lead") if m.type == "permission_request"]
    assert (msg.sender, msg.body["request_id"]) == ("w1", rid)
    assert msg.text.startswith("w1 asks to use bash on ") and "rm -rf build" in msg.text
    assert msg.text.endswith(f"Answer with answer_permission(request_id={rid!r}, allow, reason).")
    # w1 read the lead's refusal, word for word, and gave up
    task = rt.board.refresh().task("task_1")
    assert (task.status, task.owner) == ("completed", "w1")
    assert task.summary == f"refused {rid}"
