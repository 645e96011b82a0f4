"""The agent loop: one turn = steps until the model stops asking for tools.

A step is one model call plus the tool batch it asked for. The caller runs a whole turn
(``run_turn``) or drives it one step at a time (``begin_turn`` then ``step`` until ``done``), as
the team actor does; between steps the message list is always valid to send. Every step returns a
``transition``: ``tool_use``, ``stop_hook_feedback`` and ``goal_blocked`` continue; ``completed``,
``max_turns``, ``budget``, ``hook_stopped``, ``goal_failed``, ``interrupted`` and ``error`` end the
turn. After the Stop hooks allow a stop, a goal (``LoopHooks.on_goal``, ``harness.goal``) may
block it (its reason is appended as a user message: ``goal_blocked``) or fail the turn. The only signal that
continues the conversation is the presence of ``tool_use`` blocks, with one exception: a batch
whose LAST call is to a terminal tool (``Tool.ends_turn``, e.g. a teammate's ``complete_task``),
in which no call failed and after which no injected message waits, ends the turn as
``completed`` without another model call (``StepResult.ended_by`` names the tool). Its results are
in the history as usual (every ``tool_use`` has its ``tool_result``; the next turn's input is
merged into that user message) and the Stop hooks run as for a text answer.

The values the loop takes and returns live here too: ``LoopConfig``, ``LoopHooks`` (with the
``StopVerdict``/``PromptVerdict`` a hook returns), ``StepResult``, ``TurnResult`` and ``LoopState``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from harness.context.compaction import Compaction, Compactor
from harness.context.prompt import SystemPrompt, TokenCounter, check_pairing, spill_oversize
from harness.errors import HarnessError, ModelError, PromptTooLong
from harness.goal import GoalVerdict
from harness.ports import (
    ContentBlock,
    Message,
    ModelClient,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from harness.tools.base import ToolContext
from harness.transcript import Transcript
from teamctl_base.crashpoints import crash_point
from teamctl_base.models import Frozen

__all__ = [
    "CONTINUING",
    "AgentLoop",
    "LoopConfig",
    "LoopHooks",
    "LoopState",
    "PromptVerdict",
    "StepResult",
    "StopVerdict",
    "ToolBatchRunner",
    "Transition",
    "TurnResult",
]


# --- values: configuration, hook callbacks, step and turn results, state -----------------------

Transition = Literal[
    "tool_use",
    "stop_hook_feedback",
    "goal_blocked",
    "completed",
    "max_turns",
    "budget",
    "hook_stopped",
    "goal_failed",
    "interrupted",
    "error",
]
CONTINUING: frozenset[str] = frozenset({"tool_use", "stop_hook_feedback", "goal_blocked"})
INTERRUPTED_RESULT = "Interrupted by the user before this tool ran."


class ToolBatchRunner(Protocol):
    """Runs one batch of calls; returns one result per call, in request order, never raising."""

    def run_batch(
        self, calls: Sequence[ToolUseBlock], ctx: ToolContext
    ) -> list[ToolResultBlock]: ...

    def ends_turn(self, call: ToolUseBlock) -> bool:
        """Whether ``call`` is to a terminal tool: once it succeeded the model has nothing
        left to say."""
        ...


class LoopConfig(Frozen):
    """Limits and request shape of one agent's loop."""

    model: str = "claude-sonnet-4-6"
    """Model name sent with every request."""
    agent: str = "agent"
    """The agent's name (request header for the fake API, transcript file name)."""
    max_tokens: int = 8000
    """``max_tokens`` per model call."""
    max_turns: int | None = None
    """Model calls allowed per turn; ``None`` = unlimited."""
    budget_tokens: int | None = None
    """Total tokens (input, cache and output, summed over calls) this loop may spend."""
    temperature: float | None = None
    """Sampling temperature; ``None`` = the API default."""
    result_limit_chars: int = 60_000
    """Tool results longer than this are spilled to a file with a head/tail preview."""


@dataclass(frozen=True)
class StopVerdict:
    """What a Stop hook decided: ``allow`` the stop, ``continue`` with ``reason`` as feedback
    (honoured once per turn), or ``stop`` (end now as ``hook_stopped``)."""

    action: Literal["allow", "continue", "stop"] = "allow"
    reason: str = ""


@dataclass(frozen=True)
class PromptVerdict:
    """What a UserPromptSubmit hook decided; ``additional_context`` is added to the prompt."""

    blocked: bool = False
    reason: str = ""
    additional_context: str = ""


@dataclass
class LoopHooks:
    """In-process callbacks the loop calls (the agent adapts ``HookRunner`` to these)."""

    on_user_prompt: Callable[[str], PromptVerdict] | None = None
    on_stop: Callable[[str, bool], StopVerdict] | None = None
    on_message: Callable[[Message], None] | None = None
    after_tools: Callable[[], str | None] | None = None
    """Called after each tool batch; a returned text (e.g. a todo reminder) is attached."""
    on_goal: Callable[[], GoalVerdict] | None = None
    """Called when a stop is allowed by the Stop hooks: the goal's verdict (``harness.goal``)."""


@dataclass(frozen=True)
class StepResult:
    """The outcome of one step. ``done`` iff the transition ends the turn."""

    transition: Transition
    done: bool
    text: str = ""
    response: ModelResponse | None = None
    tool_results: tuple[ToolResultBlock, ...] = ()
    error: str | None = None
    error_kind: str | None = None
    """With ``error``: the ``ModelError.kind`` (``authentication``, ``rate_limit``, …)."""
    compacted: tuple[str, ...] = ()
    ended_by: str | None = None
    """The terminal tool whose successful call ended the turn (no closing model call)."""


@dataclass(frozen=True)
class TurnResult:
    """The outcome of a whole turn: the last step's transition and text, and totals."""

    transition: Transition
    text: str
    steps: int
    usage: Usage
    error: str | None = None


@dataclass
class LoopState:
    """Everything the loop mutates; ``messages`` is always a valid request prefix."""

    messages: list[Message] = field(default_factory=list)
    turn_active: bool = False
    turn_steps: int = 0
    stop_hook_active: bool = False
    blocked_reason: str | None = None
    manual_compact: str | None = None
    usage: Usage = field(default_factory=Usage)
    last_transition: Transition | None = None


def add_usage(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_creation_input_tokens=a.cache_creation_input_tokens + b.cache_creation_input_tokens,
        cache_read_input_tokens=a.cache_read_input_tokens + b.cache_read_input_tokens,
    )


def total_tokens(u: Usage) -> int:
    return (
        u.input_tokens + u.output_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
    )


def text_of(blocks: Sequence[ContentBlock]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))


# --- the loop ----------------------------------------------------------------------------------


class AgentLoop:
    """One agent's conversation. ``step`` is called from one thread at a time; ``inject`` and
    ``interrupt`` may be called from any thread."""

    def __init__(
        self,
        *,
        model: ModelClient,
        executor: ToolBatchRunner,
        tools: Callable[[], Sequence[ToolSpec]],
        tool_context: ToolContext,
        system: SystemPrompt,
        compactor: Compactor,
        config: LoopConfig | None = None,
        transcript: Transcript | None = None,
        hooks: LoopHooks | None = None,
        messages: Sequence[Message] = (),
    ) -> None:
        self.model = model
        self.executor = executor
        self.tools = tools
        self.tool_context = tool_context
        self.system = system
        self.compactor = compactor
        self.config = config or LoopConfig()
        self.transcript = transcript
        self.hooks = hooks or LoopHooks()
        self.state = LoopState(messages=list(messages))
        self.counter = TokenCounter()
        self._checked: tuple[object, int] = (None, 0)
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._interrupt = threading.Event()

    # -- thread-safe inputs ---------------------------------------------------------------

    def inject(self, text: str) -> None:
        """Queue a message; it is attached after the next tool results of this turn, or opens
        the next turn (``begin_turn``) if the turn ends first."""
        with self._lock:
            self._pending.append(text)

    def has_pending(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def _take_pending(self) -> list[str]:
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def interrupt(self) -> None:
        """Stop the current turn at the next safe point (before or right after a model call)."""
        self._interrupt.set()

    def request_compaction(self, instructions: str = "") -> None:
        """Summarise the history before the next model call (the ``compact`` tool)."""
        self.state.manual_compact = instructions

    # -- history ---------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        return self.state.messages

    def _append(self, message: Message) -> None:
        msgs = self.state.messages
        if msgs and msgs[-1].role == message.role == "user":
            # Two user messages in a row are merged (e.g. a new turn after max_turns stopped
            # right after tool results): the API wants alternating roles.
            msgs[-1] = Message(role="user", content=(*msgs[-1].content, *message.content))
            if self.transcript:
                self.transcript.amend(message.content)
        else:
            msgs.append(message)
            if self.transcript:
                self.transcript.message(message)
        if self.hooks.on_message:
            self.hooks.on_message(message)

    def _apply(self, compaction: Compaction) -> None:
        self.state.messages = list(compaction.messages)
        self.counter.reset()
        if compaction.trigger != "micro":  # the summary dropped the earlier reminders
            self.system.forget_reminders()
        if self.transcript:
            self.transcript.compact_boundary(
                compaction.messages,
                trigger=compaction.trigger,
                pre_tokens=compaction.pre_tokens,
                post_tokens=compaction.post_tokens,
            )

    def build_request(self, system: tuple[SystemBlock, ...] | None = None) -> ModelRequest:
        """The request the next step would send (pairing checked)."""
        msgs = self.state.messages
        # Messages are immutable and only appended or (the last one) amended, so only the tail
        # since the last check needs checking; a replaced list is checked from the start.
        start = self._checked[1] - 1 if self._checked[0] is msgs else 0
        check_pairing(msgs, start if 0 <= start <= len(msgs) else 0)
        self._checked = (msgs, len(msgs))
        return ModelRequest(
            model=self.config.model,
            system=self.system.blocks() if system is None else system,
            messages=tuple(self.state.messages),
            tools=tuple(self.tools()),
            max_tokens=self.config.max_tokens,
            agent=self.config.agent,
            temperature=self.config.temperature,
        )

    # -- turns -----------------------------------------------------------------------------

    def begin_turn(self, user_input: str | Sequence[ContentBlock] | None = None) -> None:
        """Open a turn with ``user_input`` plus any pending injected messages. ``None`` with
        nothing pending continues from the current history (after a resume or a stop)."""
        if self.state.turn_active:
            raise HarnessError("a turn is already in progress")
        self._interrupt.clear()
        st = self.state
        st.turn_active, st.turn_steps, st.stop_hook_active = True, 0, False
        st.blocked_reason = None
        blocks: list[ContentBlock] = []
        if isinstance(user_input, str):
            blocks.append(TextBlock(text=user_input))
        elif user_input is not None:
            blocks.extend(user_input)
        blocks.extend(TextBlock(text=t) for t in self._take_pending())
        if self.hooks.on_user_prompt and blocks:
            verdict = self.hooks.on_user_prompt(text_of(blocks))
            if verdict.blocked:
                st.blocked_reason = verdict.reason or "blocked by a UserPromptSubmit hook"
                return
            if verdict.additional_context:
                blocks.append(TextBlock(text=verdict.additional_context))
        if blocks:
            self._append(Message(role="user", content=tuple(blocks)))
        elif not st.messages or st.messages[-1].role != "user":
            st.turn_active = False
            raise HarnessError("begin_turn needs input: the model already answered")

    def _attach_reminder(self) -> None:
        """Append the volatile context that changed (``SystemPrompt.reminder``) to the newest
        user message, in the transcript too: later requests resend it unchanged, so the prefix
        stays stable (docs/ARCHITECTURE.md, "Context and the prompt cache")."""
        msgs = self.state.messages
        if not msgs or msgs[-1].role != "user":
            return
        text = self.system.reminder(mid_turn=self.state.turn_steps > 0)
        if text is None:
            return
        block = TextBlock(text=text)
        msgs[-1] = Message(role="user", content=(*msgs[-1].content, block))
        if self.transcript:
            self.transcript.amend((block,))

    def _end(self, transition: Transition, **kw: object) -> StepResult:
        self.state.turn_active = False
        self.state.last_transition = transition
        return StepResult(transition=transition, done=True, **kw)  # type: ignore[arg-type]

    def step(self) -> StepResult:
        """One model call and its tool batch."""
        st, cfg = self.state, self.config
        if not st.turn_active:
            raise HarnessError("no turn in progress: call begin_turn first")
        if st.blocked_reason is not None:
            return self._end("hook_stopped", text=st.blocked_reason)
        if self._interrupt.is_set():
            return self._end("interrupted")
        if cfg.max_turns is not None and st.turn_steps >= cfg.max_turns:
            return self._end("max_turns")
        if cfg.budget_tokens is not None and total_tokens(st.usage) >= cfg.budget_tokens:
            return self._end("budget")
        compacted: list[str] = []
        system = self.system.blocks()
        self.counter.system_tokens = sum(len(b.text) for b in system) // 4
        manual, st.manual_compact = st.manual_compact, None
        done = self.compactor.before_call(st.messages, self.counter, manual=manual)
        if done is not None:
            self._apply(done)
            compacted.append(done.trigger)
        self._attach_reminder()
        try:
            response = self._call_with_reactive_compaction(system, compacted)
        except ModelError as exc:
            return self._end(
                "error", error=str(exc), error_kind=exc.kind, compacted=tuple(compacted)
            )
        st.turn_steps += 1
        st.usage = add_usage(st.usage, response.usage)
        calls = [b for b in response.content if isinstance(b, ToolUseBlock)]
        text = text_of(response.content)
        crash_point("model.before_transcript")
        if response.content:
            self._append(Message(role="assistant", content=response.content))
            self.counter.record(response.usage, len(st.messages))
        if not calls:
            return self._finish(text, response, tuple(compacted))
        if self._interrupt.is_set():
            results = [
                ToolResultBlock(tool_use_id=c.id, content=INTERRUPTED_RESULT, is_error=True)
                for c in calls
            ]
            self._append(Message(role="user", content=tuple(results)))
            return self._end(
                "interrupted", text=text, response=response, tool_results=tuple(results)
            )
        crash_point("tools.before_run")
        results = self._run_tools(calls)
        crash_point("tools.before_results")
        extra = [TextBlock(text=t) for t in self._take_pending()]
        terminal = not extra and self._ends_turn(calls, results)
        note = self.hooks.after_tools() if self.hooks.after_tools else None
        if note:
            extra.append(TextBlock(text=note))
        self._append(Message(role="user", content=(*results, *extra)))
        if terminal:
            return self._finish(
                text, response, tuple(compacted), tool_results=tuple(results), ended_by=calls[-1]
            )
        st.last_transition = "tool_use"
        return StepResult(
            transition="tool_use",
            done=False,
            text=text,
            response=response,
            tool_results=tuple(results),
            compacted=tuple(compacted),
        )

    def _call_with_reactive_compaction(
        self, system: tuple[SystemBlock, ...], compacted: list[str]
    ) -> ModelResponse:
        try:
            return self.model.complete(self.build_request(system))
        except PromptTooLong:
            st = self.state
            done = self.compactor.summarise(
                st.messages, "reactive", self.counter.count(st.messages)
            )
            if done is None:
                raise
            self._apply(done)
            compacted.append("reactive")
            self._attach_reminder()
            return self.model.complete(self.build_request(system))

    def _ends_turn(self, calls: list[ToolUseBlock], results: list[ToolResultBlock]) -> bool:
        """The batch's last call is to a terminal tool and no call in it failed."""
        return self.executor.ends_turn(calls[-1]) and not any(r.is_error for r in results)

    def _finish(
        self,
        text: str,
        response: ModelResponse,
        compacted: tuple[str, ...],
        *,
        tool_results: tuple[ToolResultBlock, ...] = (),
        ended_by: ToolUseBlock | None = None,
    ) -> StepResult:
        st = self.state
        name = ended_by.name if ended_by is not None else None
        if self.hooks.on_stop:
            verdict = self.hooks.on_stop(text, st.stop_hook_active)
            if verdict.action == "stop":
                return self._end(
                    "hook_stopped",
                    text=verdict.reason or text,
                    response=response,
                    tool_results=tool_results,
                    ended_by=name,
                )
            if verdict.action == "continue" and not st.stop_hook_active and verdict.reason:
                st.stop_hook_active = True
                self._append(Message(role="user", content=(TextBlock(text=verdict.reason),)))
                st.last_transition = "stop_hook_feedback"
                return StepResult(
                    transition="stop_hook_feedback",
                    done=False,
                    text=text,
                    response=response,
                    tool_results=tool_results,
                    compacted=compacted,
                )
        if self.hooks.on_goal:
            goal = self.hooks.on_goal()
            if goal.action == "fail":
                return self._end(
                    "goal_failed",
                    text=goal.reason,
                    error=goal.reason,
                    response=response,
                    tool_results=tool_results,
                    ended_by=name,
                )
            if goal.action == "continue":
                self._append(Message(role="user", content=(TextBlock(text=goal.reason),)))
                st.last_transition = "goal_blocked"
                return StepResult(
                    transition="goal_blocked",
                    done=False,
                    text=text,
                    response=response,
                    tool_results=tool_results,
                    compacted=compacted,
                )
        return self._end(
            "completed",
            text=text,
            response=response,
            tool_results=tool_results,
            compacted=compacted,
            ended_by=name,
        )

    def _run_tools(self, calls: list[ToolUseBlock]) -> list[ToolResultBlock]:
        try:
            got = self.executor.run_batch(calls, self.tool_context)
        except Exception as exc:  # the executor must not raise; keep the pairing if it does
            got = [
                ToolResultBlock(
                    tool_use_id=c.id, content=f"tool batch failed: {exc}", is_error=True
                )
                for c in calls
            ]
        by_id = {r.tool_use_id: r for r in got}
        results = [
            by_id.get(c.id)
            or ToolResultBlock(tool_use_id=c.id, content="no result was produced", is_error=True)
            for c in calls
        ]
        return spill_oversize(
            results,
            limit_chars=self.config.result_limit_chars,
            outputs_dir=self.tool_context.outputs_dir,
        )

    def run_turn(self, user_input: str | Sequence[ContentBlock] | None = None) -> TurnResult:
        """``begin_turn`` then ``step`` until the turn ends."""
        before = self.state.usage
        self.begin_turn(user_input)
        steps = 0
        while True:
            result = self.step()
            steps += 1 if result.response is not None else 0
            if result.done:
                used = self.state.usage
                return TurnResult(
                    transition=result.transition,
                    text=result.text,
                    steps=steps,
                    usage=Usage(
                        input_tokens=used.input_tokens - before.input_tokens,
                        output_tokens=used.output_tokens - before.output_tokens,
                        cache_creation_input_tokens=used.cache_creation_input_tokens
                        - before.cache_creation_input_tokens,
                        cache_read_input_tokens=used.cache_read_input_tokens
                        - before.cache_read_input_tokens,
                    ),
                    error=result.error,
                )
