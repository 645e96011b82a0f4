"""The lead's held status notices are looked at again when the board changes, not on a timer:
no fixed delay stands between the last completion and the lead's digest (issue 18; docs/
ARCHITECTURE.md, "Fewer model calls")."""

from __future__ import annotations

import json
import threading
import time
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

    def notice_on_its_way(self, name: str) -> bool:
        return False

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

    def wake_taken(self, name: str) -> None:
        pass

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


def test_a_teammate_turns_idle_while_its_notice_is_delivered_and_the_lead_gets_every_notice(
    tmp_path: Path, stop_actors: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The status change does not wait for the notice's delivery (their fsyncs overlap), yet a
    # lead holding status notices until nobody is at work is never woken with all but the last
    # one: a teammate whose notice is on its way counts as at work until it has arrived.
    from actors.runtime.hosting import MemberHosting
    from actors.services import TeammateSpec

    w2_idle = threading.Event()
    waited: list[bool] = []
    send, set_status = MemberHosting.send, MemberHosting.set_status

    def slow_send(self: MemberHosting, sender: str, to: str, type: str, *a: Any, **k: Any) -> Any:
        if sender == "w2" and type == "idle_notification":
            # Delivered only once w2 is journaled idle: with the notice sent first, this waits
            # in vain (bounded) and the test fails below.
            waited.append(w2_idle.wait(timeout=10))
        return send(self, sender, to, type, *a, **k)

    def record_status(self: MemberHosting, name: str, status: str, reason: str = "") -> None:
        set_status(self, name, status, reason)
        if (name, status) == ("w2", "idle"):
            w2_idle.set()

    monkeypatch.setattr(MemberHosting, "send", slow_send)
    monkeypatch.setattr(MemberHosting, "set_status", record_status)
    root = team_repo(tmp_path)
    done = {
        "match": r"You now hold task (?P<id>task_\d+) ",
        "tool_uses": [{"name": "complete_task", "input": {"task_id": "{id}", "summary": "did"}}],
    }
    both_spawned = threading.Event()

    class BothAtWork(Recording):
        """w1's call waits (bounded) until w2 is on the team: on a loaded machine w1 could
        otherwise finish and report before w2 is even spawned, and the lead would then rightly
        take w1's notice alone."""

        def complete(self, request: ModelRequest) -> ModelResponse:
            if request.agent == "w1":
                assert both_spawned.wait(timeout=30)
            return super().complete(request)

    model = BothAtWork(
        {
            "agents": {
                "*": {"rules": [done]},
                "lead": {"rules": [{"match": "(?s).", "text": "ok"}]},
            }
        }
    )
    rt = runtime(root, model, tools=None)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    rt.board.create("second")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    rt.services.spawn_teammate(TeammateSpec(name="w2", task_id="task_2"), by="lead")
    both_spawned.set()
    assert rt.wait_idle(timeout=60)
    assert rt.failures() == {}
    assert waited == [True], "w2's status waited for its notice"
    statuses = [text for text in model.inputs("lead") if text.startswith("[team status]")]
    assert statuses, model.inputs("lead")
    first = statuses[0]
    assert "task_1 w1: completed" in first and "task_2 w2: completed" in first, statuses


def has_claimed(rt: Any, task_id: str, owner: str) -> bool:
    """``owner`` has claimed ``task_id`` (in the journal: with the model answering "ok" and
    never completing, the teammate gives the task back after its reminders within some
    milliseconds, so a reader that looks at the owner late, on a loaded machine, sees none)."""
    return any(
        e.type == "task.claimed" and e.data["task_id"] == task_id and e.data["owner"] == owner
        for e in rt.team.journal.read_from(1)
    )


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
    assert rt.wait_until(lambda: has_claimed(rt, "task_1", "w1"), timeout=60)
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
        if e["type"] == "member.status_changed"
        and (e["data"]["name"], e["data"]["status"]) == ("w1", "working")
    ]
    assert working == [status], "the turn journals no second working status"


def test_mail_wakes_told_before_the_member_takes_one_make_one_inbox_listing(
    tmp_path: Path, stop_actors: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A delivery wakes its reader directly and again through the watcher: a lead holding
    # notices would list and parse its whole inbox twice per notice. A mail wake not taken yet
    # covers the later ones; one told after it was taken still comes.
    from actors.runtime.agent_actor import AgentActor

    model = Recording({"agents": {"*": {"rules": [{"match": "(?s).", "text": "ok"}]}}})
    rt = runtime(team_repo(tmp_path), model)
    stop_actors.append(rt)
    rt.start()
    assert rt.wait_idle(timeout=60)
    wakes: list[str] = []
    on_wake = AgentActor._on_wake

    def counted(self: AgentActor) -> None:
        wakes.append(self.name)
        on_wake(self)

    monkeypatch.setattr(AgentActor, "_on_wake", counted)
    inside, gate, handled = threading.Event(), threading.Event(), threading.Event()
    on_other = Lead.on_other

    def blocking(self: Lead, message: Any) -> Any:
        if message == "block":
            inside.set()
            assert gate.wait(30)
            return None
        if message == "mark":
            handled.set()
            return None
        return on_other(self, message)

    monkeypatch.setattr(Lead, "on_other", blocking)
    ref = rt.roster.ref("lead")
    assert ref is not None
    ref.tell("block")
    assert inside.wait(30)
    for _ in range(3):
        rt.hosting.wake("lead")
    ref.tell("mark")
    gate.set()
    assert handled.wait(30)
    assert wakes == ["lead"]
    handled.clear()
    rt.hosting.wake("lead")  # after the first was taken: told again
    ref.tell("mark")
    assert handled.wait(30)
    assert wakes == ["lead", "lead"]


def test_a_teammate_ending_its_turn_does_not_queue_on_the_board_lock_to_look_for_work(
    tmp_path: Path, stop_actors: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The board as this process folded it already has the teammate's own completion and every
    # change the watcher saw: the end of a turn reads no journal, so another thread's append
    # (its fdatasync under the board's lock) does not hold up the teammate's notice.
    from actors.runtime.teammate import Teammate
    from actors.services import TeammateSpec

    root = team_repo(tmp_path)
    done = {
        "match": r"You now hold task (?P<id>task_1) ",
        "tool_uses": [{"name": "complete_task", "input": {"task_id": "{id}", "summary": "did"}}],
    }
    model = Recording(
        {"agents": {"*": {"rules": [done]}, "lead": {"rules": [{"match": "(?s).", "text": "ok"}]}}}
    )
    rt = runtime(root, model, tools=None)
    stop_actors.append(rt)
    rt.start()
    lock_held, release = threading.Event(), threading.Event()
    on_turn_end = Teammate.on_turn_end

    def hold_the_board(self: Teammate, result: Any) -> str | None:
        follow_up = on_turn_end(self, result)

        def hold() -> None:
            with rt.board._lock:
                lock_held.set()
                release.wait(30)

        threading.Thread(target=hold, daemon=True).start()
        assert lock_held.wait(30)
        return follow_up

    monkeypatch.setattr(Teammate, "on_turn_end", hold_the_board)
    rt.board.create("first")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    try:
        assert lock_held.wait(30)
        deadline = time.monotonic() + 10

        def notified() -> bool:
            pending = rt.team.mailbox.pending("lead")
            return any(e.type == "idle_notification" and e.sender == "w1" for e in pending)

        while not notified():  # held by the lead: w1's status change waits for the lock
            assert time.monotonic() < deadline, "the notice waited for the board's lock"
            time.sleep(0.005)
    finally:
        release.set()
    assert rt.wait_idle(timeout=60)
    assert rt.board.refresh().members["w1"].status == "idle"


def test_a_teammate_that_missed_a_board_change_is_told_again_at_the_rescan_tick(
    tmp_path: Path,
    stop_actors: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The safety net for a lost wake: with every board-change notice lost, an idle teammate
    # beside a ready task still claims it, told again at the watcher's rescan tick.
    from actors.runtime.hosting import MemberHosting
    from actors.services import TeammateSpec

    root = team_repo(tmp_path)
    model = Recording({"agents": {"*": {"rules": [{"match": "(?s).", "text": "ok"}]}}})
    rt = runtime(root, model, rescan_s=0.2)
    stop_actors.append(rt)
    rt.start()
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.wait_idle(timeout=60)
    # settled: its first turn over and its idle status journaled (nothing else will wake it)
    assert rt.wait_until(lambda: rt.board.refresh().members["w1"].status == "idle", timeout=60)
    lost: list[str] = []
    monkeypatch.setattr(MemberHosting, "board_changed", lambda self: lost.append("lost"))
    rt.board.create("one")
    assert rt.wait_until(lambda: has_claimed(rt, "task_1", "w1"), timeout=30)
    assert lost, "the change's own notice was dropped"
