"""``AgentActor``: a turn is a chain of steps; mail is acked only after the model call that saw
it succeeded; wakes during a turn coalesce; failures go to the host, never out of the actor."""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.messages import BoardChanged, UserInput, Wake
from actors.runtime.agent_actor import AgentActor, format_envelope
from actors.runtime.lead import Lead
from harness.agent import Agent, AgentConfig
from harness.errors import ModelError
from harness.model.scripted import ScriptedModel, latest_input
from harness.ports import ModelRequest, ModelResponse
from mailboxes.maildir import Maildir
from mailboxes.messages import Envelope, MessageDraft
from tests.support.fakes import AllowAll


class GatedModel:
    """A scripted model whose calls wait for ``gate`` (set it to let them through)."""

    def __init__(self, script: Mapping[str, Any], *, fail: bool = False) -> None:
        self.inner = ScriptedModel(script)
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.inputs: list[str] = []
        self.fail = fail

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.inputs.append(latest_input(request))
        self.entered.set()
        assert self.gate.wait(30)
        if self.fail:
            raise ModelError("the model is down")
        return self.inner.complete(request)


class FakeHost:
    """An ``AgentHost`` recording what the actor tells it."""

    def __init__(self, root: Path) -> None:
        self.mailbox = Maildir(root / "mailboxes")
        self.statuses: list[str] = []
        self.failures: list[str] = []
        self.failed_event = threading.Event()
        self.idle = threading.Event()
        self.busy = threading.Event()
        self.events: list[Mapping[str, Any]] = []
        self.pause = False
        self.stalls: list[str] = []
        self.stalled = threading.Event()
        self.held: list[str] = []
        self.restartable: list[bool] = []
        self.stopping = False

    def set_status(self, name: str, status: str, reason: str = "") -> None:
        self.statuses.append(status)
        if status == "idle":
            self.idle.set()

    def set_busy(self, name: str, busy: bool) -> None:
        if busy:
            self.idle.clear()
            self.busy.set()

    def input_taken(self, name: str) -> None:
        pass

    def emit(self, event: Mapping[str, Any]) -> None:
        self.events.append(event)

    def failed(self, name: str, error: str, generation: int, *, restart: bool = True) -> None:
        self.failures.append(error)
        self.restartable.append(restart)
        self.failed_event.set()

    def paused(self) -> bool:
        return self.pause

    def wake_taken(self, name: str) -> None:
        pass

    def winding_down(self) -> bool:
        return self.stopping

    def over_cap(self, name: str, turn: object) -> bool:
        return False

    def storage_failed(self, name: str, error: str, generation: int) -> None:
        self.stalls.append(error)
        self.stalled.set()

    def hold_input(self, name: str, text: str) -> None:
        self.held.append(text)


@pytest.fixture(autouse=True)
def _stop_all() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


def _lead(tmp_path: Path, model: Any) -> tuple[pykka.ActorRef[Any], FakeHost]:
    host = FakeHost(tmp_path)
    host.mailbox.ensure_inbox("lead")
    host.mailbox.ensure_inbox("w1")
    agent = Agent(
        AgentConfig(name="lead", subagents=False),
        root=tmp_path,
        model=model,
        policy=AllowAll(),
        transcript_dir=tmp_path / "transcripts",
    )
    return Lead.start(agent, host), host


def _send(host: FakeHost, text: str) -> Envelope:
    return host.mailbox.deliver("w1", MessageDraft.text("lead", text))[0]


def _folder(tmp_path: Path, sub: str) -> list[str]:
    return sorted(p.name.rsplit(".", 1)[-1] for p in (tmp_path / "mailboxes/lead" / sub).iterdir())


def test_mail_is_acked_only_after_the_model_call_that_saw_it_succeeded(tmp_path: Path) -> None:
    model = GatedModel({"agents": {"lead": {"rules": [{"match": "hello", "text": "hi"}]}}})
    ref, host = _lead(tmp_path, model)
    msg = _send(host, "hello")
    ref.tell(Wake())
    assert model.entered.wait(30)
    assert _folder(tmp_path, "new") == [msg.id]  # in the request, not yet acked
    model.gate.set()
    assert host.idle.wait(30)
    assert _folder(tmp_path, "new") == []
    assert _folder(tmp_path, "cur") == [msg.id]
    assert "[message from w1] hello" in model.inputs[0]


def test_a_failed_model_call_leaves_the_mail_unacked_and_reports_the_failure(
    tmp_path: Path,
) -> None:
    model = GatedModel({"agents": {"lead": {"rules": []}}}, fail=True)
    model.gate.set()
    ref, host = _lead(tmp_path, model)
    msg = _send(host, "hello")
    ref.tell(Wake())
    assert host.failed_event.wait(30)
    assert "the model is down" in host.failures[0]
    assert _folder(tmp_path, "new") == [msg.id]
    assert ref.is_alive()  # the actor did not die: the supervisor decides what happens next
    ref.tell(Wake())  # a dead incarnation ignores further work
    assert ref.ask(UserInput(text="anything"), timeout=30) is None
    assert host.failures == [host.failures[0]]


def test_wakes_during_a_turn_coalesce_into_one_follow_up(tmp_path: Path) -> None:
    script = {
        "agents": {
            "lead": {
                "steps": [
                    {"match": "start", "text": "first"},
                    {"match": "(?s)one.*two.*three", "text": "all three"},
                ]
            }
        }
    }
    model = GatedModel(script)
    ref, host = _lead(tmp_path, model)
    ref.tell(UserInput(text="start"))
    assert model.entered.wait(30)
    for text in ("one", "two", "three"):
        _send(host, text)
        ref.tell(Wake())
    model.gate.set()
    assert host.idle.wait(30)
    assert ref.ask(Wake(), timeout=30) is None  # the queue is drained
    assert host.idle.wait(30)
    model.inner.assert_consumed()
    assert len(model.inputs) == 2
    assert len(_folder(tmp_path, "cur")) == 3


def test_a_handler_exception_is_reported_not_raised(tmp_path: Path) -> None:
    class Broken(AgentActor):
        def on_turn_start(self) -> None:
            raise RuntimeError("boom")

    host = FakeHost(tmp_path)
    host.mailbox.ensure_inbox("lead")
    model = ScriptedModel({"agents": {"lead": {"rules": []}}})
    agent = Agent(AgentConfig(name="lead"), root=tmp_path, model=model, policy=AllowAll())
    ref = Broken.start(agent, host)
    ref.tell(UserInput(text="go"))
    assert host.failed_event.wait(30)
    assert host.failures == ["RuntimeError: boom"]
    assert ref.is_alive()


def test_a_full_disk_stalls_the_incarnation_and_later_input_is_held_for_the_next(
    tmp_path: Path,
) -> None:
    class DiskFull(AgentActor):
        def on_turn_start(self) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    host = FakeHost(tmp_path)
    host.mailbox.ensure_inbox("lead")
    model = ScriptedModel({"agents": {"lead": {"rules": []}}})
    agent = Agent(AgentConfig(name="lead"), root=tmp_path, model=model, policy=AllowAll())
    ref = DiskFull.start(agent, host)
    ref.tell(UserInput(text="go"))
    assert host.stalled.wait(30)
    assert host.stalls == ["disk full: [Errno 28] No space left on device"]
    assert host.failures == []  # not a crash
    assert ref.ask(UserInput(text="later"), timeout=30) is None
    assert host.held == ["later"]


def test_a_paused_host_parks_the_model_call_until_a_wake(tmp_path: Path) -> None:
    model = GatedModel({"agents": {"lead": {"rules": [{"match": "go", "text": "went"}]}}})
    model.gate.set()
    ref, host = _lead(tmp_path, model)
    host.pause = True
    ref.tell(UserInput(text="go"))
    assert host.busy.wait(30)  # the turn is open; its first step is queued
    assert ref.ask(BoardChanged(), timeout=30) is None  # handled after that step
    assert model.inputs == []  # parked: no model call while paused
    host.pause = False
    ref.tell(Wake(reason="recovered"))
    assert host.idle.wait(30)
    assert model.inputs == ["go"]


def test_format_envelope_shows_sender_type_text_and_fields() -> None:
    env = Envelope.model_validate(
        {
            "id": "abc",
            "from": "w1",
            "to": "lead",
            "type": "idle_notification",
            "ts": 1.0,
            "body": {"text": "done", "task_id": "task_3"},
        }
    )
    assert format_envelope(env) == '[idle_notification from w1] done\ntask_id: "task_3"'
