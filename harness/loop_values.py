"""The values of the agent loop: configuration, hook callbacks, step and turn results, state.

Kept apart from ``harness.loop`` so callers (the team actor, ``teamctl ask``) can import the types
without the loop, and the loop module stays about control flow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from harness.ports import (
    ContentBlock,
    Message,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from harness.tools.base import ToolContext

Transition = Literal[
    "tool_use",
    "stop_hook_feedback",
    "completed",
    "max_turns",
    "budget",
    "hook_stopped",
    "interrupted",
    "error",
]
CONTINUING: frozenset[str] = frozenset({"tool_use", "stop_hook_feedback"})
INTERRUPTED_RESULT = "Interrupted by the user before this tool ran."


class ToolBatchRunner(Protocol):
    """Runs one batch of calls; returns one result per call, in request order, never raising."""

    def run_batch(
        self, calls: Sequence[ToolUseBlock], ctx: ToolContext
    ) -> list[ToolResultBlock]: ...


class LoopConfig(BaseModel):
    """Limits and request shape of one agent's loop."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


@dataclass(frozen=True)
class StepResult:
    """The outcome of one step. ``done`` iff the transition ends the turn."""

    transition: Transition
    done: bool
    text: str = ""
    response: ModelResponse | None = None
    tool_results: tuple[ToolResultBlock, ...] = ()
    error: str | None = None
    compacted: tuple[str, ...] = ()


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
