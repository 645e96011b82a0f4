"""What stays off the path from a completion to the next model call (docs/ARCHITECTURE.md,
"Start-up and benchmarks"): the notice of a finished task is delivered beside the next task's
model call, not before it; a claim journals the teammate's ``working`` status in its own commit
and the turn that follows writes nothing more; the team-idle check reads no board while a member
is at work; the watcher probes no lease of a member this process hosts."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.lead import Lead
from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from harness.ports import ModelRequest, ModelResponse
from tests.actors.runtime.runtime_support import Events, runtime, stop_actors, team_repo
from tests.actors.team_support import Held, delivered

__all__ = ["stop_actors"]

LEAD_RULES = [{"match": "(?s).", "text": "Noted."}, {"match": "^$", "text": "Noted."}]
WORKER = {
    "rules": [
        {
            "match": r"You now hold task (?P<id>task_\d+) \(claim",
            "tool_uses": [{"name": "complete_task", "input": {"task_id": "{id}", "summary": "ok"}}],
        },
        {"match": "(?s).", "text": "Done.", "priority": -1},
    ]
}
SCRIPT = {"agents": {"lead": {"rules": LEAD_RULES}, "w1": WORKER}}


class Watched:
    """The scripted model, noting when ``w1`` asks about ``task_2``."""

    def __init__(self) -> None:
        self.inner = ScriptedModel(SCRIPT)
        self.second = threading.Event()

    def complete(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1].content if request.messages else ()
        if request.agent == "w1" and any("task_2" in getattr(b, "text", "") for b in last):
            self.second.set()
        return self.inner.complete(request)


def test_a_finished_tasks_notice_is_delivered_beside_the_next_tasks_model_call(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = Watched()
    rt = runtime(root, model)
    stop_actors.append(rt)
    mailbox = rt.team.mailbox
    deliver = mailbox.deliver
    release = threading.Event()
    holding = threading.Event()
    held: list[str] = []

    def slow_deliver(sender: str, message: Any) -> Any:
        if message.type == "idle_notification" and not release.is_set():
            held.append(str(message.body.get("task_id")))
            holding.set()
            assert release.wait(30)
        return deliver(sender, message)

    mailbox.deliver = slow_deliver  # type: ignore[method-assign]
    rt.start()
    rt.board.create("first")
    rt.board.create("second")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    try:
        # The notice of task_1 is being delivered (held here) while task_2's call is made: the
        # call does not wait for it (it may even start before the delivery does).
        assert model.second.wait(30)
        assert holding.wait(30)
        assert held == ["task_1"]
    finally:
        release.set()
    assert rt.wait_idle(timeout=30)
    notices = [e for e in delivered(mailbox, "lead") if e.type == "idle_notification"]
    assert [e.body["task_id"] for e in notices] == ["task_1", "task_2"]
    assert rt.board.state.members["w1"].status == "idle"


def test_a_claim_journals_the_working_status_and_the_turn_writes_no_more(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    events = Events()
    rt = runtime(root, ScriptedModel(SCRIPT), on_event=events)
    stop_actors.append(rt)
    empty: list[str] = []  # a teammate's journal round trips that wrote nothing
    execute = rt.board.execute

    def spy(decision: Any) -> Any:
        state, appended = execute(decision)
        if threading.current_thread().name.startswith("Teammate") and not appended:
            empty.append(threading.current_thread().name)
        return state, appended

    rt.board.execute = spy  # type: ignore[method-assign]
    rt.start()
    rt.board.create("first")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    assert rt.wait_idle(timeout=30)
    assert rt.board.state.tasks["task_1"].status == "completed"
    assert empty == []  # the turn's "working" was in the claim's commit already
    working = [
        e
        for e in rt.team.journal.read_from(1)
        if e.type == "member.status_changed"
        and (e.data.get("name"), e.data.get("status")) == ("w1", "working")
    ]
    assert len(working) == 1
    said = [e["status"] for e in events.of("status") if e["agent"] == "w1"]
    assert said[:1] == ["working"] and said[-1] == "idle"  # the output events are still there
    assert rt.roster.at_rest() is not None  # past starting: its status reports reached the host


def test_the_idle_check_reads_no_board_while_a_member_is_at_work(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = Held()
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    try:
        assert model.wait_called("w1")  # busy in its model call
        reads: list[int] = []
        refresh = rt.board.refresh

        def counted() -> Any:
            reads.append(1)
            return refresh()

        rt.board.refresh = counted  # type: ignore[method-assign]
        assert rt.is_idle() is False
        assert reads == []
        rt.board.refresh = refresh  # type: ignore[method-assign]
    finally:
        model.release.set()


def test_the_watcher_probes_no_lease_of_a_member_hosted_here(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = Held()
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    try:
        assert model.wait_called("w1")  # w1 holds task_1, in its model call
        assert rt.board.refresh().holdings.get("w1") == "task_1"
        liveness = rt.team.liveness
        probed: list[str] = []
        is_alive = liveness.is_alive

        def spy(name: str) -> bool:
            probed.append(name)
            return is_alive(name)

        liveness.is_alive = spy  # type: ignore[method-assign]
        rt.board.create("second")
        last = rt.board.refresh().seq
        # The watcher has looked at the journal up to the last change (it tells the roster).
        assert rt.wait_until(lambda: rt.changes._seen_seq >= last, timeout=30)
        assert "w1" not in probed
        liveness.is_alive = is_alive  # type: ignore[method-assign]
    finally:
        model.release.set()


def test_the_lead_holds_a_status_notice_without_reading_the_board_again(
    tmp_path: Path, stop_actors: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    held_notice = threading.Event()
    take_mail = Lead.take_mail

    def watched(self: Lead, batch: list[Any]) -> list[Any]:
        given = take_mail(self, batch)
        if any(e.body.get("task_id") == "task_9" for e in batch) and not given:
            held_notice.set()
        return given

    monkeypatch.setattr(Lead, "take_mail", watched)
    root = team_repo(tmp_path)
    model = Held()
    rt = runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    try:
        assert model.wait_called("w1")  # at work on task_1
        lead_reads: list[str] = []
        refresh = rt.board.refresh

        def counted() -> Any:
            if threading.current_thread().name.startswith("Lead"):
                lead_reads.append("refresh")
            return refresh()

        rt.board.refresh = counted  # type: ignore[method-assign]
        body = {"text": "done", "task_id": "task_9", "task_status": "completed"}
        rt.hosting.send("w1", "lead", "idle_notification", {**body, "transition": "completed"})
        # The lead looked at its mail and holds the notice: w1 is at work and will report.
        assert held_notice.wait(30)
        assert lead_reads == []
        assert rt.team.mailbox.unread("lead") == 1
        rt.board.refresh = refresh  # type: ignore[method-assign]
    finally:
        model.release.set()
