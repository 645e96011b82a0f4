"""Every seam of one agent's runtime to the outside world, and the values that cross them.

Content blocks mirror the Messages API shapes (``model_dump(exclude_none=True)`` of a block is the
wire JSON), so a transcript line, a request to the fake API and a request to the real API are the
same data.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import Field

from teamctl_base.models import Frozen


class TextBlock(Frozen):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(Frozen):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(Frozen):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str = ""
    is_error: bool = False


class ThinkingBlock(Frozen):
    """Passed through unchanged (the API requires thinking blocks to be sent back as received)."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(Frozen):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock,
    Field(discriminator="type"),
]


class Message(Frozen):
    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...]


StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"]


class Usage(Frozen):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class ToolSpec(Frozen):
    """A tool as the model sees it."""

    name: str
    description: str
    input_schema: dict[str, Any]


class SystemBlock(Frozen):
    """One block of the system prompt; ``cache`` marks a prompt-cache breakpoint after it."""

    text: str
    cache: bool = False


class ModelRequest(Frozen):
    """One call to the model. ``agent`` names the caller (sent to the fake API as a header)."""

    model: str
    system: tuple[SystemBlock, ...] = ()
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 8000
    agent: str = "agent"
    temperature: float | None = None


class ModelResponse(Frozen):
    id: str
    model: str
    content: tuple[ContentBlock, ...]
    stop_reason: StopReason | None
    usage: Usage = Usage()
    billed: Usage | None = None
    """What the whole call was billed when it took several API requests (an escalated retry,
    continuations after ``max_tokens``); ``usage`` is then the last request's (what the context
    holds). None: ``usage`` is the bill."""

    @property
    def billed_usage(self) -> Usage:
        """The tokens this call was billed for."""
        return self.usage if self.billed is None else self.billed


@runtime_checkable
class ModelClient(Protocol):
    """A Messages-API-shaped model.

    ``complete`` either returns a response whose every ``tool_use`` block is whole (a truncated
    ``tool_use`` is never returned) or raises ``ModelError`` once its own recovery is exhausted.
    It must be safe to call from any thread, one call at a time per agent.
    """

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Run one model call, with recovery."""
        ...


class Clock(Protocol):
    """Wall and monotonic time; tests pass a fake."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds, for timeouts and backoff."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait (a fake clock advances instantly); used only for retry backoff."""
        ...


class IdSource(Protocol):
    """Unique ids (tool use ids in the scripted model, session ids, request ids)."""

    def new_id(self) -> str:
        """A fresh id, unique across processes."""
        ...
