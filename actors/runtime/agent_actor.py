"""``AgentActor``: one harness ``Agent`` driven as a pykka actor, one step per message
(docs/ARCHITECTURE.md, "Actors and threads").

A turn is a chain of ``Step`` messages the actor tells itself; between two steps its mailbox is
processed, so a wake, user input or a stop is handled without waiting for the whole turn.

Mail: a ``Wake`` re-lists the ``Mailbox`` inbox. Between turns the new batch opens a turn; during a
turn it is injected (the loop attaches it after the next tool results) and several wakes coalesce.
A message is acked (moved to ``cur/``) only after a model call that had it in its request
succeeded and the answer is in the transcript (before that answer's tools run); a crash before
that redelivers it.

Handlers never let an exception escape (pykka would stop the actor and drop its queue): a failure
marks the actor dead and is reported to the host, which tells the Supervisor.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pykka

from actors.messages import BoardChanged, Step, UserInput, Wake
from actors.runtime.supervision import disk_full
from harness.errors import HarnessError, ModelAuthError
from harness.ports import Message, TextBlock, ToolUseBlock

if TYPE_CHECKING:
    from harness.agent import Agent
    from harness.loop import StepResult
    from mailboxes.messages import Envelope
    from mailboxes.ports import Mailbox

log = logging.getLogger(__name__)

AUTH_ERROR_KINDS = frozenset({"authentication", "permission"})
"""``ModelError.kind`` of a 401/403: the API refused the key; a restart cannot help."""

__all__ = ["AgentActor", "AgentHost", "format_batch", "format_envelope"]


class AgentHost(Protocol):
    """What an agent actor needs from the runtime that hosts it (every method thread-safe;
    ``name`` is the agent's, ``generation`` the incarnation of the actor calling)."""

    @property
    def mailbox(self) -> Mailbox:
        """The team's ``Mailbox`` (the agent reads and acks its own inbox)."""
        ...

    def set_status(self, name: str, status: str, reason: str = "") -> None:
        """Record a member status (journaled when it changed)."""
        ...

    def set_busy(self, name: str, busy: bool) -> None:
        """Whether the agent has a turn in progress (drives the team-idle test)."""
        ...

    def input_taken(self, name: str) -> None:
        """A ``UserInput`` the host counted as pending has been taken into a turn."""
        ...

    def emit(self, event: Mapping[str, Any]) -> None:
        """An output event (stream-json, live view)."""
        ...

    def failed(self, name: str, error: str, generation: int, *, restart: bool = True) -> None:
        """The incarnation failed: the host hands it to its Supervisor (``restart`` False:
        restarting cannot help, e.g. the API refused the credentials)."""
        ...

    def winding_down(self) -> bool:
        """The runtime stops: the actor starts nothing new (no turn, no claim, no message); the
        member is paused as it is and continues at ``teamctl resume``."""
        ...

    def paused(self) -> bool:
        """The host is degraded (disk full): start no model call until a ``Wake`` with reason
        ``recovered``."""
        ...

    def over_cap(self, name: str, turn: object) -> bool:
        """A cap of the ``team`` settings stops the agent's next model call (``turn`` names its
        current turn); the actor parks until a ``Wake`` like a degraded one."""
        ...

    def storage_failed(self, name: str, error: str, generation: int) -> None:
        """A write of the incarnation failed for lack of space (rolled back): not a crash; the
        host brings the member back from its transcript once space returns."""
        ...

    def hold_input(self, name: str, text: str) -> None:
        """A user input reached a stalled incarnation: the host tells it to the next one."""
        ...

    def wake_taken(self, name: str) -> None:
        """The actor handles a ``Wake`` and lists its inbox after this call: mail delivered
        before it is seen, so the host may drop mail wakes told until then (one told and not
        taken yet covers them)."""
        ...


def format_envelope(env: Envelope) -> str:
    """How one message reads in the model's input (scripts match on this text):
    ``[<type> from <sender>] <text>`` then one ``<key>: <json>`` line per other body field."""
    lines = [f"[{env.type} from {env.sender}] {env.text}".rstrip()]
    for key in sorted(env.body):
        if key != "text":
            lines.append(f"{key}: {json.dumps(env.body[key], ensure_ascii=False)}")
    if env.in_reply_to:
        lines.append(f"in_reply_to: {env.in_reply_to}")
    return "\n".join(lines)


def format_batch(batch: Sequence[Envelope]) -> str:
    """Several messages, oldest first, separated by blank lines."""
    return "\n\n".join(format_envelope(e) for e in batch)


class AgentActor(pykka.ThreadingActor):
    """Base of ``Lead`` and ``Teammate``. Subclasses override the ``on_*``/``take_*`` hooks."""

    use_daemon_thread = True  # a tool stuck past the stop timeout must not keep the process up

    def __init__(
        self,
        agent: Agent,
        host: AgentHost,
        *,
        generation: int = 0,
        batch_max: int = 50,
        resumed: bool = False,
    ) -> None:
        super().__init__()
        self.agent = agent
        self.host = host
        self.name = agent.name
        self.generation = generation
        self.batch_max = batch_max
        self.resumed = resumed
        self.turn = 0
        self.in_turn = False
        self.dead = False
        self.parked = False  # a step held back while the runtime is degraded; a Wake resumes it
        self.stalled = False  # a write failed for lack of space: the runtime brings it back
        self.last_text = ""
        self._queued: list[str] = []  # injected into the loop, not yet in the conversation
        self._attached: list[str] = []  # in the conversation, waiting for a model call to succeed
        agent.observe_messages(self._on_message)
        # A crash between journaling ``member.spawned`` and creating the inbox leaves a member
        # without one: whoever hosts it makes sure it exists (idempotent).
        host.mailbox.ensure_inbox(self.name)

    # -- pykka hooks -------------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        if self.dead:
            if self.stalled and isinstance(message, UserInput):  # kept for the next incarnation
                self.host.hold_input(self.name, message.text)
            return None
        if self.host.winding_down():  # paused as it is: the next incarnation picks it up
            return None
        try:
            match message:
                case Step(turn=turn):
                    if self.in_turn and turn == self.turn:
                        self._step()
                case Wake():
                    self._on_wake()
                case UserInput(text=text):
                    self._on_user_input(text)
                case BoardChanged():
                    if not self.in_turn:
                        self.on_board_changed()
                case _:
                    return self.on_other(message)
        except BaseException as exc:  # escaping would stop the actor silently
            full = disk_full(exc)
            if full is not None:
                self.stall(f"disk full: {full}")
            else:
                log.exception("agent %s failed", self.name)
                self.fail(f"{type(exc).__name__}: {exc}")
        return None

    def on_stop(self) -> None:
        self.agent.interrupt()
        self.host.set_busy(self.name, False)

    def on_failure(self, *_: object) -> None:  # only reached if on_receive itself is broken
        self.host.failed(self.name, "actor failure", self.generation)

    # -- hooks for subclasses ----------------------------------------------------------------

    def take_mail(self, batch: list[Envelope]) -> list[Envelope]:
        """Handle protocol messages the actor answers itself; return those for the model."""
        return batch

    def render_mail(self, batch: Sequence[Envelope]) -> str:
        """How a batch of messages reads in the model's input (``format_batch``)."""
        return format_batch(batch)

    def on_turn_start(self) -> None:
        """A turn was opened."""

    def on_turn_end(self, result: StepResult) -> str | None:
        """The turn ended (not by failure); return text to open a follow-up turn with."""
        return None

    def continues_history(self) -> bool:
        """Whether a turn may open with nothing new when the history ends on the user's side
        (tool results of an interrupted turn, a resumed transcript)."""
        return True

    def on_step_start(self) -> None:
        """A step (a model call and its tools) is about to run."""

    def on_step_end(self, result: StepResult) -> None:
        """A step returned (before its transition is acted on; ``agent.interrupt()`` here
        ends the turn at the next step)."""

    def on_idle(self) -> None:
        """Nothing to do after a turn (or a wake that brought nothing)."""

    def on_board_changed(self) -> None:
        """The board may have changed while the agent had no turn."""

    def on_other(self, message: Any) -> Any:
        log.warning("agent %s ignores %r", self.name, message)
        return None

    # -- mail ----------------------------------------------------------------------------------

    def new_mail(self) -> list[Envelope]:
        """Unacked messages not yet in the conversation, after ``take_mail``."""
        pending = self.host.mailbox.pending(self.name, max_messages=self.batch_max)
        seen = {*self._queued, *self._attached}
        fresh = [e for e in pending if e.id not in seen]
        return self.take_mail(fresh) if fresh else fresh

    def ack(self, ids: Sequence[str]) -> None:
        if ids:
            self.host.mailbox.ack(self.name, list(ids))

    def _on_message(self, message: Message) -> None:
        # A model answer is in the transcript: the mail it read is processed. Ack now, not
        # after its tools ran: a crash while they run must not show the model that mail again.
        if message.role == "assistant" and self._attached:
            self.ack(self._attached)
            self._attached = []

    def _on_wake(self) -> None:
        self.host.wake_taken(self.name)
        if self.parked:  # the runtime recovered: make the model call that was held back
            self.parked = False
            if self.in_turn:
                self.actor_ref.tell(Step(turn=self.turn))
            return
        if self.in_turn:
            batch = self.new_mail()
            if batch and not self.dead:
                self.agent.inject(self.render_mail(batch))
                self._queued += [e.id for e in batch]
            return
        if not self.start_turn():
            self._settle()

    def _settle(self) -> None:
        """No turn to run: idle hooks first, then (if they started nothing) not busy."""
        self.on_idle()
        if not self.in_turn:
            self.host.set_busy(self.name, False)

    def _on_user_input(self, text: str) -> None:
        try:
            if self.in_turn:
                self.agent.inject(text)
            else:
                self.start_turn(text)
        finally:  # in the transcript (or lost with a crashed turn): taken either way
            self.host.input_taken(self.name)

    # -- turns ---------------------------------------------------------------------------------

    def start_turn(self, extra: str | None = None, *, mail: bool = True) -> bool:
        """Open a turn with ``extra`` and the new mail; False when there is nothing to say."""
        if self.in_turn or self.dead:
            return self.in_turn
        batch = self.new_mail() if mail else []
        if self.dead:
            return False
        parts = [p for p in (extra, self.render_mail(batch) if batch else None) if p]
        loop = self.agent.loop
        msgs = loop.messages
        # History ending on the user's side is owed an answer, unless a terminal tool closed the
        # turn (its results end the history and the model has nothing left to say).
        closed = loop.state.last_transition == "completed"
        dangling = bool(msgs) and msgs[-1].role == "user" and not closed
        dangling = dangling and self.continues_history()
        if not parts and not loop.has_pending() and not dangling:
            return False
        self.turn += 1
        self.agent.begin_turn("\n\n".join(parts) if parts else None)
        self._attached += [*self._queued, *(e.id for e in batch)]
        self._queued = []
        self.in_turn = True
        self.host.set_busy(self.name, True)
        self.on_turn_start()
        self.actor_ref.tell(Step(turn=self.turn))
        return True

    def _step(self) -> None:
        # Degraded (until it recovers) or a cap reached (until it is raised): no model call.
        if self.host.paused() or self.host.over_cap(self.name, (self.generation, self.turn)):
            self.parked = True
            return
        before = list(self._attached)
        self.on_step_start()
        try:
            result = self.agent.step()
        except HarnessError as exc:
            self.fail(f"{type(exc).__name__}: {exc}", restart=not isinstance(exc, ModelAuthError))
            return
        self.on_step_end(result)
        if result.response is not None and before:
            self.ack(before)
            self._attached = [i for i in self._attached if i not in before]
        if self._queued and not self.agent.loop.has_pending():
            self._attached += self._queued
            self._queued = []
        self._emit_step(result)
        if self.host.winding_down():  # the runtime stops: nothing new, no turn-end report
            return
        if result.transition == "error":
            auth = result.error_kind in AUTH_ERROR_KINDS
            self.fail(result.error or "model error", restart=not auth)
            return
        if not result.done:
            self.actor_ref.tell(Step(turn=self.turn))
            return
        self.in_turn = False
        self.last_text = result.text
        self.host.emit(
            {
                "type": "turn_end",
                "agent": self.name,
                "transition": result.transition,
                "text": result.text,
            }
        )
        follow_up = self.on_turn_end(result)
        if self.dead or self.in_turn:
            return
        if not self.start_turn(follow_up):
            self._settle()
            if not self.in_turn and not self.dead:  # Notification hooks: waiting for input
                self.agent.notify("idle_prompt", f"{self.name} is idle, waiting for input")

    def fail(self, error: str, *, restart: bool = True) -> None:
        """Give up on this incarnation: the Supervisor takes over (``restart`` False: it does
        not bring the member back, as for a rejected API key)."""
        if self.dead:
            return
        self.dead = True
        self.in_turn = False
        self.host.emit({"type": "error", "agent": self.name, "error": error})
        # Reported before it stops being busy: the team never looks idle in between (a run
        # would end "idle" before the Supervisor knew of the failure).
        self.host.failed(self.name, error, self.generation, restart=restart)
        self.host.set_busy(self.name, False)

    def stall(self, reason: str) -> None:
        """A write failed for lack of space (rolled back): not a crash. This incarnation stops
        handling messages; the runtime goes degraded and, once space returns, brings the member
        back from its transcript, which retries the interrupted work."""
        if self.dead:
            return
        self.dead = self.stalled = True
        self.in_turn = False
        self.host.storage_failed(self.name, reason, self.generation)

    def _emit_step(self, result: StepResult) -> None:
        response = result.response
        if response is None:
            return
        for block in response.content:
            if isinstance(block, TextBlock) and block.text:
                self.host.emit({"type": "assistant", "agent": self.name, "text": block.text})
            elif isinstance(block, ToolUseBlock):
                self.host.emit(
                    {
                        "type": "tool_use",
                        "agent": self.name,
                        "id": block.id,
                        "name": block.name,
                        "input": block.input,
                    }
                )
        for res in result.tool_results:
            self.host.emit(
                {
                    "type": "tool_result",
                    "agent": self.name,
                    "tool_use_id": res.tool_use_id,
                    "is_error": res.is_error,
                    "content": res.content[:500],
                }
            )
