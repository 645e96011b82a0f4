"""A deterministic, strict model that plays a script: the test and demo double of ``ModelClient``.

A script is data (YAML or JSON, validated with ``extra="forbid"``), keyed by agent name
(``ModelRequest.agent``; the key ``"*"`` is a template every unlisted agent gets its own copy of)::

    latency_ms: 0                 # optional latency added to every call
    agents:
      lead:
        steps:                    # consumed in order, one per call
          - text: "Planning."
            tool_uses:
              - {name: bash, input: {command: "ls"}}
          - "Done."               # shorthand for {text: "Done."}
        rules:                    # reactive: matched on the latest input
          - match: 'task #(?P<id>\\d+) is ready'
            tool_uses: [{name: claim_task, input: {task_id: "{id}"}}]
            once: true

On each call the latest input (the text of the last user message, tool_result contents included)
is matched against the rules with ``priority >= 0`` (highest priority first, then file order);
then the next step is taken; then rules with a negative priority (fallbacks). Capture groups fill
``{name}``, ``{1}`` and ``{0}`` in the reply's text, thinking and tool inputs. A call that nothing
answers raises ``ScriptError`` showing what was seen; ``assert_consumed`` fails on steps left.
A step's ``fault`` is only acted on by the fake Messages API (``harness.model.fakeapi``), which serves
the fault first and the step on a later request.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from harness.context.prompt import is_reminder
from harness.errors import ScriptError
from harness.ports import (
    Clock,
    ContentBlock,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from teamctl_base.clock import SystemClock
from teamctl_base.models import Frozen

FaultKind = Literal[
    "rate_limit",
    "overloaded",
    "server_error",
    "reset",
    "delay",
    "max_tokens",
    "stream_error",
    "stream_reset",
    "prompt_too_long",
    "spend_limit",
    "authentication",
    "permission",
]


class Fault(Frozen):
    """A fault the fake Messages API injects instead of (or into) a normal response."""

    kind: FaultKind
    """rate_limit (429), overloaded (529), server_error (500), reset (socket closed without a
    response), delay (sleep then answer), max_tokens (answer truncated), stream_error (an ``error``
    event mid-stream; a 529-like status for non-streaming requests), stream_reset (the connection
    dropped mid-stream; a plain reset for non-streaming requests), prompt_too_long (400),
    spend_limit (429 that must not be retried), authentication (401: the key is rejected),
    permission (403: the key may not do this)."""
    times: int = Field(default=1, ge=1)
    """How many consecutive requests this fault applies to."""
    retry_after: float | None = 1.0
    """rate_limit / spend_limit / overloaded: the ``retry-after`` header in seconds (None: none)."""
    seconds: float = 0.0
    """delay: how long the server waits before answering."""
    keep_chars: int | None = None
    """max_tokens: output characters kept (text + tool input JSON); None: half of the last block."""
    tokens: int = 210_000
    """prompt_too_long: the prompt size reported."""
    maximum: int = 200_000
    """prompt_too_long: the window reported."""
    error_type: str = "overloaded_error"
    """stream_error: the ``error.type`` of the event."""
    message: str | None = None
    """Overrides the error message."""

    @property
    def consumes_step(self) -> bool:
        """True when the request is still answered from the script (the step is used up)."""
        return self.kind in ("delay", "max_tokens")


class ToolCall(Frozen):
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    """Fixed tool_use id; by default ``toolu_<agent>_<n>`` (deterministic per agent)."""


class Reply(Frozen):
    """What the model answers: thinking, then text, then tool calls."""

    text: str | None = None
    thinking: str | None = None
    tool_uses: tuple[ToolCall, ...] = ()
    stop_reason: StopReason | None = None
    """Default: ``tool_use`` when there are tool calls, else ``end_turn``."""
    usage: Usage | None = None
    """Default: estimated from the sizes of the request and the reply (4 characters a token)."""
    latency_ms: float = 0.0
    """Extra time this call takes (via the clock's ``sleep``)."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"text": data} if isinstance(data, str) else data


class Step(Reply):
    match: str | None = None
    """If set, the latest input must match (else ``ScriptError``); captures fill templates."""
    fault: Fault | None = None
    """Served by the fake Messages API before this step (see ``Fault.times``)."""


class Rule(Reply):
    match: str
    """Regular expression searched in the latest input."""
    once: bool = False
    """Fire at most once (otherwise the rule fires on every matching call)."""
    priority: int = 0
    """Higher first; a negative priority makes the rule a fallback tried after the steps."""


class AgentScript(Frozen):
    steps: tuple[Step, ...] = ()
    rules: tuple[Rule, ...] = ()


class Script(Frozen):
    agents: dict[str, AgentScript] = Field(default_factory=dict)
    latency_ms: float = 0.0
    """Latency added to every call of every agent (on top of a reply's own)."""

    @classmethod
    def from_data(cls, data: Any) -> Script:
        """Validate plain data (a parsed YAML/JSON document); raises ``ScriptError``."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ScriptError(f"invalid script: {exc}") from exc

    @classmethod
    def load(cls, path: str | Path) -> Script:
        """Read a ``.yaml``/``.yml``/``.json`` script file."""
        p = Path(path)
        text = p.read_text(encoding="utf-8")
        try:
            data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise ScriptError(f"cannot parse script {p}: {exc}") from exc
        return cls.from_data(data)


def latest_input(request: ModelRequest) -> str:
    """The text of the last user message, tool_result contents included, joined by newlines
    (reminders left out: they are context, not input)."""
    for message in reversed(request.messages):
        if message.role == "user":
            parts: list[str] = []
            for block in message.content:
                if isinstance(block, TextBlock):
                    if not is_reminder(block.text):
                        parts.append(block.text)
                elif isinstance(block, ToolResultBlock):
                    parts.append(block.content)
            return "\n".join(parts)
    return ""


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _fill(value: Any, captures: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: captures.get(m.group(1), m.group(0)), value)
    if isinstance(value, list | tuple):
        return [_fill(v, captures) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, captures) for k, v in value.items()}
    return value


def _captures(match: re.Match[str] | None) -> dict[str, str]:
    if match is None:
        return {}
    found = {"0": match.group(0)}
    found.update({str(i): g or "" for i, g in enumerate(match.groups(), start=1)})
    found.update({k: v or "" for k, v in match.groupdict().items()})
    return found


@dataclass
class _AgentState:
    script: AgentScript
    next_step: int = 0
    fired_once: set[int] = field(default_factory=set)
    faults_served: dict[int, int] = field(default_factory=dict)
    calls: int = 0
    tool_ids: int = 0


def _short(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


class ScriptedModel:
    """Plays a ``Script``; a ``ModelClient``. Thread-safe; one call at a time per agent."""

    def __init__(
        self, script: Script | Mapping[str, Any] | str | Path, *, clock: Clock | None = None
    ):
        if isinstance(script, str | Path):
            script = Script.load(script)
        elif not isinstance(script, Script):
            script = Script.from_data(script)
        self.script = script
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._agents: dict[str, _AgentState] = {}

    def _state(self, agent: str) -> _AgentState:
        state = self._agents.get(agent)
        if state is None:
            spec = self.script.agents.get(agent) or self.script.agents.get("*")
            if spec is None:
                known = sorted(self.script.agents)
                raise ScriptError(f"scripted model: no script for agent {agent!r} (known: {known})")
            state = self._agents[agent] = _AgentState(spec)
        return state

    def take_fault(self, request: ModelRequest) -> Fault | None:
        """The fault of the agent's next step still to be served, counted as served (fake API)."""
        with self._lock:
            try:
                state = self._state(request.agent)
            except ScriptError:
                return None  # ``complete`` reports it
            if state.next_step >= len(state.script.steps):
                return None
            if self._matching_rule(state, latest_input(request)) is not None:
                return None
            fault = state.script.steps[state.next_step].fault
            served = state.faults_served.get(state.next_step, 0)
            if fault is None or served >= fault.times:
                return None
            state.faults_served[state.next_step] = served + 1
            return fault

    def complete(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            state = self._state(request.agent)
            state.calls += 1
            seen = latest_input(request)
            reply, captures = self._choose(state, request.agent, seen)
            response = self._build(state, request, reply, captures)
        latency = self.script.latency_ms + reply.latency_ms
        if latency > 0:
            self._clock.sleep(latency / 1000.0)
        return response

    def _matching_rule(
        self, state: _AgentState, seen: str, *, fallback: bool = False
    ) -> tuple[int, Rule, re.Match[str]] | None:
        ranked = sorted(enumerate(state.script.rules), key=lambda ir: (-ir[1].priority, ir[0]))
        for index, rule in ranked:
            if (rule.priority < 0) != fallback or (rule.once and index in state.fired_once):
                continue
            found = re.search(rule.match, seen)
            if found is not None:
                return index, rule, found
        return None

    def _choose(self, state: _AgentState, agent: str, seen: str) -> tuple[Reply, dict[str, str]]:
        hit = self._matching_rule(state, seen)
        if hit is None and state.next_step < len(state.script.steps):
            step = state.script.steps[state.next_step]
            found = re.search(step.match, seen) if step.match is not None else None
            if step.match is not None and found is None:
                raise ScriptError(
                    f"scripted model: agent {agent!r} step {state.next_step + 1} expects input "
                    f"matching /{step.match}/ but call #{state.calls} saw: {_short(seen)!r}"
                )
            state.next_step += 1
            return step, _captures(found)
        if hit is None:
            hit = self._matching_rule(state, seen, fallback=True)
        if hit is None:
            patterns = [r.match for r in state.script.rules]
            raise ScriptError(
                f"scripted model: unexpected call #{state.calls} for agent {agent!r}: all "
                f"{len(state.script.steps)} steps used and no rule matched {patterns}; "
                f"latest input: {_short(seen)!r}"
            )
        index, rule, found = hit
        if rule.once:
            state.fired_once.add(index)
        return rule, _captures(found)

    def _build(
        self, state: _AgentState, request: ModelRequest, reply: Reply, captures: dict[str, str]
    ) -> ModelResponse:
        blocks: list[ContentBlock] = []
        if reply.thinking is not None:
            blocks.append(
                ThinkingBlock(thinking=_fill(reply.thinking, captures), signature="scripted")
            )
        if reply.text is not None:
            blocks.append(TextBlock(text=_fill(reply.text, captures)))
        for call in reply.tool_uses:
            state.tool_ids += 1
            safe = re.sub(r"[^A-Za-z0-9_-]", "_", request.agent)
            blocks.append(
                ToolUseBlock(
                    id=call.id or f"toolu_{safe}_{state.tool_ids:04d}",
                    name=_fill(call.name, captures),
                    input=_fill(call.input, captures),
                )
            )
        stop: StopReason = reply.stop_reason or ("tool_use" if reply.tool_uses else "end_turn")
        usage = reply.usage or Usage(
            input_tokens=max(1, len(request.model_dump_json()) // 4),
            output_tokens=max(1, sum(len(b.model_dump_json()) for b in blocks) // 4),
        )
        safe_agent = re.sub(r"[^A-Za-z0-9_-]", "_", request.agent)
        return ModelResponse(
            id=f"msg_{safe_agent}_{state.calls:04d}",
            model=request.model,
            content=tuple(blocks),
            stop_reason=stop,
            usage=usage,
        )

    def unconsumed(self) -> dict[str, list[str]]:
        """Steps not yet consumed, per agent (agents never called included; ``*`` excluded)."""
        with self._lock:
            left: dict[str, list[str]] = {}
            for name, spec in self.script.agents.items():
                if name == "*":
                    continue
                start = self._agents[name].next_step if name in self._agents else 0
                steps = spec.steps[start:]
                if steps:
                    left[name] = [
                        f"step {start + i + 1}: {_short(s.model_dump_json(exclude_defaults=True), 120)}"
                        for i, s in enumerate(steps)
                    ]
            for name, state in self._agents.items():
                if name not in self.script.agents and state.next_step < len(state.script.steps):
                    left[name] = [f"{len(state.script.steps) - state.next_step} steps of '*'"]
            return left

    def assert_consumed(self) -> None:
        """Raise ``ScriptError`` listing every step that was never played."""
        left = self.unconsumed()
        if left:
            lines = [f"{agent}: {step}" for agent, steps in left.items() for step in steps]
            raise ScriptError("scripted model: unconsumed steps:\n  " + "\n  ".join(lines))

    def calls(self, agent: str) -> int:
        """How many calls ``agent`` has made."""
        with self._lock:
            state = self._agents.get(agent)
            return state.calls if state else 0
