"""The lead's held status notices are looked at again when the board changes, not on a timer:
no fixed delay stands between the last completion and the lead's digest (issue 18; docs/
ARCHITECTURE.md, "Fewer model calls")."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.board.state import Member, Task, TeamState
from actors.messages import BoardChanged, Wake
from actors.runtime.lead import Lead, team_at_work
from actors.settings import PermissionSettings, Settings
from harness.agent import Agent, AgentConfig
from harness.model.scripted import ScriptedModel, latest_input
from harness.ports import ModelRequest, ModelResponse
from mailboxes.maildir import Maildir
from mailboxes.messages import MessageDraft
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo
from tests.actors.runtime.test_lead_notifications import FOUR_FILES, Recording
from tests.support.fakes import AllowAll

__all__ = ["stop_actors"]


def test_a_hosted_teammate_between_its_completion_and_its_notice_is_at_work() -> None:
    # w2 completed its task and has not looked for the next one yet: no task in progress, its
    # status still ``working`` (it turns ``idle``, journaled, before its notice is sent).
    state = TeamState(
        tasks={"task_2": Task("task_2", "b", status="completed", owner="w2")},
        members={"w2": Member("w2", status="working")},
    )
    assert team_at_work(state, hosted=lambda name: name == "w2")
    # hosted elsewhere, it counts only with a task in progress (its process may be gone)
    assert not team_at_work(state, hosted=lambda name: False)
    assert not team_at_work(state)
    idle = TeamState(members={"w2": Member("w2", status="idle")})
    assert not team_at_work(idle, hosted=lambda name: True)
    lead = TeamState(members={"lead": Member("lead", status="working")})
    assert not team_at_work(lead, hosted=lambda name: True)  # the lead is not a teammate


class _Board:
    def __init__(self, state: TeamState) -> None:
        self.state = state

    def refresh(self) -> TeamState:
        return self.state


class _Host:
    """A ``LeadHost`` with a board whose state the test sets, and w2 hosted here."""

    def __init__(self, root: Path, state: TeamState) -> None:
        self.mailbox = Maildir(root / "mailboxes")
        self.board = _Board(state)
        self.statuses: list[str] = []

    def hosts(self, name: str) -> bool:
        return name == "w2"

    def set_status(self, name: str, status: str, reason: str = "") -> None:
        self.statuses.append(status)

    def set_busy(self, name: str, busy: bool) -> None:
        pass

    def input_taken(self, name: str) -> None:
        pass

    def emit(self, event: Any) -> None:
        pass

    def failed(self, name: str, error: str, generation: int, *, restart: bool = True) -> None:
        raise AssertionError(error)

    def paused(self) -> bool:
        return False

    def winding_down(self) -> bool:
        return False

    def over_cap(self, name: str, turn: object) -> bool:
        return False

    def storage_failed(self, name: str, error: str, generation: int) -> None:
        raise AssertionError(error)

    def hold_input(self, name: str, text: str) -> None:
        pass


class _Model:
    def __init__(self) -> None:
        self.inner = ScriptedModel(
            {"agents": {"lead": {"rules": [{"match": "(?s).", "text": "ok"}]}}}
        )
        self.inputs: list[str] = []
        self.called = threading.Event()

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.inputs.append(latest_input(request))
        self.called.set()
        return self.inner.complete(request)


@pytest.fixture(autouse=True)
def _stop_all() -> Any:
    yield
    pykka.ActorRegistry.stop_all()


def test_held_notices_reach_the_lead_on_the_board_change_that_leaves_nobody_at_work(
    tmp_path: Path,
) -> None:
    at_work = TeamState(
        tasks={
            "task_1": Task("task_1", "a", status="completed", owner="w1"),
            "task_2": Task("task_2", "b", status="completed", owner="w2"),
        },
        members={"w1": Member("w1", status="idle"), "w2": Member("w2", status="working")},
    )
    host = _Host(tmp_path, at_work)
    for name in ("lead", "w1", "w2"):
        host.mailbox.ensure_inbox(name)
    model = _Model()
    agent = Agent(
        AgentConfig(name="lead", subagents=False),
        root=tmp_path,
        model=model,
        policy=AllowAll(),
        transcript_dir=tmp_path / "transcripts",
    )
    # No notification window and no timer at all: only mail and board changes wake the lead.
    ref = Lead.start(agent, host, notify_window_s=0.0, timer=None)
    body = {"text": "", "task_id": "task_1", "task_status": "completed", "summary": "wrote a"}
    host.mailbox.deliver("w1", MessageDraft(to="lead", type="idle_notification", body=body))
    ref.tell(Wake(reason="mail"))
    ref.ask(BoardChanged())  # processed in order: the Wake has been handled too
    assert model.inputs == [], "held: w2 (hosted here) has not reported yet"
    assert host.mailbox.unread("lead") == 1

    host.board.state = TeamState(
        tasks=at_work.tasks,
        members={"w1": Member("w1", status="idle"), "w2": Member("w2", status="idle")},
    )
    ref.tell(BoardChanged())
    assert model.called.wait(30), "the board change woke the lead"
    assert model.inputs[0].startswith("[team status] 1 update")
    assert "task_1 w1: completed — wrote a" in model.inputs[0]


class _CountingMaildir(Maildir):
    """A real Maildir that counts the inbox reads."""

    reads = 0

    def pending(self, agent: str, *args: Any, **kwargs: Any) -> Any:
        _CountingMaildir.reads += 1
        return super().pending(agent, *args, **kwargs)


def test_a_board_change_while_a_teammate_is_at_work_leaves_the_held_notices_unread(
    tmp_path: Path,
) -> None:
    # Every commit of a busy team is a board change: while somebody is still at work the lead
    # keeps its notices held without reading its inbox again (the reads compete with the team).
    state = TeamState(
        tasks={"task_1": Task("task_1", "a", status="completed", owner="w1")},
        members={"w1": Member("w1", status="idle"), "w2": Member("w2", status="working")},
    )
    host = _Host(tmp_path, state)
    host.mailbox = _CountingMaildir(tmp_path / "mailboxes")
    for name in ("lead", "w1", "w2"):
        host.mailbox.ensure_inbox(name)
    model = _Model()
    agent = Agent(
        AgentConfig(name="lead", subagents=False),
        root=tmp_path,
        model=model,
        policy=AllowAll(),
        transcript_dir=tmp_path / "transcripts",
    )
    ref = Lead.start(agent, host, notify_window_s=0.0, timer=None)
    body = {"text": "", "task_id": "task_1", "task_status": "completed", "summary": "wrote a"}
    host.mailbox.deliver("w1", MessageDraft(to="lead", type="idle_notification", body=body))
    ref.ask(Wake(reason="mail"))
    held_at = _CountingMaildir.reads
    for _ in range(5):
        ref.ask(BoardChanged())
    assert model.inputs == [] and host.mailbox.unread("lead") == 1
    assert _CountingMaildir.reads == held_at, "the inbox was read again while w2 was at work"
    host.board.state = TeamState(
        tasks=state.tasks,
        members={"w1": Member("w1", status="idle"), "w2": Member("w2", status="idle")},
    )
    ref.tell(BoardChanged())
    assert model.called.wait(30), "the change that leaves nobody at work wakes the lead"
    assert "task_1 w1: completed — wrote a" in model.inputs[0]


def test_a_team_drains_and_goes_idle_with_no_timer_and_no_rescan_tick(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = Recording(FOUR_FILES)
    timers: list[float] = []

    def no_timer(delay_s: float, callback: Any) -> Any:
        timers.append(delay_s)  # never fires: nothing may wait on one
        return lambda: None

    settings = Settings(permissions=PermissionSettings(defaultMode="acceptEdits"))
    rt = runtime(root, model, settings=settings, tools=None, idle_timer=no_timer, rescan_s=3600.0)
    stop_actors.append(rt)
    rt.start()
    rt.submit("Write four files f1..f4")
    assert rt.wait_idle(timeout=60)
    assert rt.failures() == {}
    state = rt.board.refresh()
    assert [t.status for t in state.tasks.values()] == ["completed"] * 4
    woken = [text for text in model.inputs("lead") if text.startswith("[team status]")]
    assert woken and "open tasks: none" in woken[-1]
    assert 0.5 not in timers  # the lead opened no notification window (the old default)


def test_a_stop_pauses_every_member_in_one_journal_commit(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    from actors.services import TeammateSpec

    root = team_repo(tmp_path)
    model = Recording({"agents": {"*": {"rules": [{"match": "(?s).", "text": "ok"}]}}})
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    for name in ("w1", "w2"):
        rt.services.spawn_teammate(TeammateSpec(name=name), by="lead")
    assert rt.wait_idle(timeout=60)
    rt.stop("run_ended")
    events = [
        json.loads(line) for line in (root / ".team" / "journal.jsonl").read_text().splitlines()
    ]
    paused = [
        e
        for e in events
        if e["type"] == "member.status_changed" and e["data"]["status"] == "paused"
    ]
    assert [e["data"]["name"] for e in paused] == ["w1", "w2", "lead"]  # teammates first
    assert [e["actor"] for e in paused] == ["w1", "w2", "lead"]
    assert len({e["ts"] for e in paused}) == 1, "one append (one fsync) for all of them"
    assert [e["seq"] for e in paused] == list(range(paused[0]["seq"], paused[0]["seq"] + 3))
    for name in ("w1", "w2", "lead"):  # every lease freed after the record
        assert not rt.team.liveness.is_alive(name)


def test_a_stop_asks_every_actor_to_stop_before_waiting_for_any(
    tmp_path: Path, stop_actors: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The end of a run waits for its slowest actor, not for the sum of all: each teammate's
    # stop here only finishes once the other one is stopping too.
    from actors.runtime.teammate import Teammate
    from actors.services import TeammateSpec

    both_stopping = threading.Barrier(2, timeout=10)
    met: list[str] = []
    on_stop = Teammate.on_stop

    def meet_then_stop(self: Teammate) -> None:
        try:
            both_stopping.wait()
            met.append(self.name)
        except threading.BrokenBarrierError:
            pass
        on_stop(self)

    monkeypatch.setattr(Teammate, "on_stop", meet_then_stop)
    root = team_repo(tmp_path)
    model = Recording({"agents": {"*": {"rules": [{"match": "(?s).", "text": "ok"}]}}})
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    for name in ("w1", "w2"):
        rt.services.spawn_teammate(TeammateSpec(name=name), by="lead")
    assert rt.wait_idle(timeout=60)
    rt.stop("run_ended")
    assert sorted(met) == ["w1", "w2"], "one stop was waited for before the other was asked"


def test_a_teammate_sends_its_notice_before_its_status_turns_idle(
    tmp_path: Path, stop_actors: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # So a lead that holds status notices until nobody is at work is woken by that status
    # change with this notice already in its inbox (never with all but the last one).
    from actors.runtime.hosting import MemberHosting
    from actors.services import TeammateSpec

    order: list[tuple[str, str, str]] = []
    send, set_status = MemberHosting.send, MemberHosting.set_status

    def record_send(self: MemberHosting, sender: str, to: str, type: str, *a: Any, **k: Any) -> Any:
        order.append(("send", sender, type))
        return send(self, sender, to, type, *a, **k)

    def record_status(self: MemberHosting, name: str, status: str, reason: str = "") -> None:
        order.append(("status", name, status))
        set_status(self, name, status, reason)

    monkeypatch.setattr(MemberHosting, "send", record_send)
    monkeypatch.setattr(MemberHosting, "set_status", record_status)
    root = team_repo(tmp_path)
    rule = {
        "match": r"You now hold task (?P<id>task_1) ",
        "tool_uses": [{"name": "complete_task", "input": {"task_id": "{id}", "summary": "a"}}],
    }
    model = Recording(
        {
            "agents": {
                "w1": {"rules": [rule]},
                "lead": {"rules": [{"match": "(?s).", "text": "ok"}]},
            }
        }
    )
    rt = runtime(root, model, tools=None)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    assert rt.wait_idle(timeout=60)
    assert rt.failures() == {}
    mine = [entry for entry in order if entry[1] == "w1"]
    notice = mine.index(("send", "w1", "idle_notification"))
    assert ("status", "w1", "idle") in mine[notice:], mine
    assert ("status", "w1", "idle") not in mine[:notice], mine


def test_a_claim_and_its_teammate_turning_working_are_one_commit(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    # One fsync, not two, between a task becoming ready and the teammate's model call.
    from actors.services import TeammateSpec

    root = team_repo(tmp_path)
    model = Recording({"agents": {"*": {"rules": [{"match": "(?s).", "text": "ok"}]}}})
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.wait_idle(timeout=60)
    rt.board.create("one")
    assert rt.wait_until(lambda: rt.board.refresh().tasks["task_1"].owner == "w1", timeout=60)
    events = [
        json.loads(line) for line in (root / ".team" / "journal.jsonl").read_text().splitlines()
    ]
    at = next(i for i, e in enumerate(events) if e["type"] == "task.claimed")
    claimed, status = events[at], events[at + 1]
    assert (status["type"], status["data"]["name"], status["data"]["status"]) == (
        "member.status_changed",
        "w1",
        "working",
    )
    assert status["actor"] == claimed["actor"] == "w1"
    assert status["ts"] == claimed["ts"], "one append for both"
    working = [
        e
        for e in events
        if e["type"] == "member.status_changed" and e["data"]["status"] == "working"
    ]
    assert working == [status], "the turn journals no second working status"
