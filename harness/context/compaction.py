"""The compaction pipeline that keeps a conversation inside the model's window.

Before each call: old tool results are micro-compacted (the last few kept whole) once the context
passes ``micro_ratio`` of the window; past ``summary_ratio`` a model call summarises everything
but the recent tail. Reactive compaction (after ``PromptTooLong``) and manual compaction (the
``compact`` tool) run the summary step unconditionally. A cut never separates a tool_use from its
tool_result: the kept tail starts at an assistant message or at a user message without results.
Three summary failures in a row open a circuit breaker; automatic compaction then stops.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from harness.context.prompt import TokenCounter, block_chars, estimate_tokens
from harness.errors import ModelError
from harness.ports import (
    Message,
    ModelClient,
    ModelRequest,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from teamctl_base.models import Frozen

Trigger = Literal["micro", "auto", "manual", "reactive"]

CLEARED = "[old tool result cleared to save context; run the tool again if you need it]"
SUMMARY_PREFIX = (
    "This conversation was compacted: the earlier part is replaced by the summary below. "
    "Continue the work from where it stopped.\n\n<summary>\n"
)
SUMMARY_SYSTEM = (
    "You summarise a coding agent's conversation so that the agent can continue the work "
    "with only your summary and the most recent messages."
)
SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation above for the agent that will continue it. Keep, under headings: "
    "1. Goal (the user's requests, verbatim where short); 2. Decisions made and why; "
    "3. Files read, created or changed (paths); 4. Errors met and how they were resolved; "
    "5. Open todos and the next step; 6. What happened in the most recent turns. "
    "Be factual and complete; do not invent. Answer with the summary only."
)


class CompactionConfig(Frozen):
    """When and how the conversation is compacted."""

    context_window: int = Field(200_000, gt=0)
    """Tokens the model accepts per request."""
    micro_ratio: float = 0.6
    """Clear old tool results once the context exceeds this share of the window."""
    summary_ratio: float = 0.8
    """Summarise once the context (after micro-compaction) exceeds this share of the window."""
    keep_tool_results: int = 5
    """Micro-compaction keeps the most recent this-many tool results whole."""
    keep_recent_ratio: float = 0.15
    """The tail kept verbatim by a summary, as a share of the window."""
    summary_max_tokens: int = 4000
    """``max_tokens`` of the summarising call."""
    summary_input_chars: int = 400_000
    """The rendered history sent to the summariser is cut (head + tail) to this many chars."""
    max_failures: int = 3
    """Consecutive summary failures before the circuit breaker opens."""


@dataclass(frozen=True)
class Compaction:
    """The outcome of one compaction: the new message list and what triggered it."""

    messages: tuple[Message, ...]
    trigger: Trigger
    pre_tokens: int
    post_tokens: int


PreCompactHook = Callable[[Trigger], str | None]
"""Called before a summary compaction; may return extra summarising instructions, or raise
``CompactionBlocked`` (a PreCompact hook's block: no summary this time)."""


class CompactionBlocked(Exception):
    """Raised by a ``PreCompactHook`` to skip this summary (a reactive one then fails)."""


class Compactor:
    """Runs the pipeline for one agent. Not thread-safe: the loop calls it between steps."""

    def __init__(
        self,
        model: ModelClient,
        *,
        model_name: str,
        agent: str,
        config: CompactionConfig | None = None,
        pre_compact: PreCompactHook | None = None,
    ) -> None:
        self.model = model
        self.model_name = model_name
        self.agent = agent
        self.config = config or CompactionConfig()
        self.pre_compact = pre_compact
        self.failures = 0

    @property
    def breaker_open(self) -> bool:
        return self.failures >= self.config.max_failures

    def before_call(
        self, messages: Sequence[Message], counter: TokenCounter, *, manual: str | None = None
    ) -> Compaction | None:
        """The automatic pipeline (``manual`` = instructions from the compact tool forces a
        summary). Returns ``None`` when nothing changed."""
        cfg = self.config
        tokens = counter.count(messages)
        if manual is not None:
            return self.summarise(messages, "manual", tokens, extra=manual)
        if tokens <= cfg.context_window * cfg.micro_ratio:
            return None
        micro = micro_compact(messages, cfg.keep_tool_results)
        if micro is not None:
            post = estimate_tokens(micro) + counter.system_tokens
            result = Compaction(micro, "micro", tokens, post)
            if post <= cfg.context_window * cfg.summary_ratio or self.breaker_open:
                return result
            summary = self.summarise(micro, "auto", tokens)
            return summary or result
        if tokens > cfg.context_window * cfg.summary_ratio and not self.breaker_open:
            return self.summarise(messages, "auto", tokens)
        return None

    def summarise(
        self, messages: Sequence[Message], trigger: Trigger, pre_tokens: int, extra: str = ""
    ) -> Compaction | None:
        """Replace all but a recent tail with a model-written summary; ``None`` on failure."""
        if self.breaker_open and trigger != "manual":
            return None
        cut = choose_cut(messages, int(self.config.context_window * self.config.keep_recent_ratio))
        if cut is None:
            return None
        try:
            hook_text = self.pre_compact(trigger) if self.pre_compact else None
        except CompactionBlocked:
            return None
        instructions = SUMMARY_INSTRUCTIONS
        for more in (hook_text, extra):
            if more:
                instructions += f"\n\nAdditional instructions: {more}"
        rendered = render_for_summary(messages[:cut], self.config.summary_input_chars)
        request = ModelRequest(
            model=self.model_name,
            system=(SystemBlock(text=SUMMARY_SYSTEM),),
            messages=(
                Message(
                    role="user",
                    content=(
                        TextBlock(text=f"<conversation>\n{rendered}\n</conversation>"),
                        TextBlock(text=instructions),
                    ),
                ),
            ),
            max_tokens=self.config.summary_max_tokens,
            agent=self.agent,
        )
        try:
            response = self.model.complete(request)
        except ModelError:
            self.failures += 1
            return None
        summary = "".join(b.text for b in response.content if isinstance(b, TextBlock)).strip()
        if not summary:
            self.failures += 1
            return None
        self.failures = 0
        new = rebuild(summary, messages[cut:])
        return Compaction(new, trigger, pre_tokens, estimate_tokens(new))


def micro_compact(messages: Sequence[Message], keep: int) -> tuple[Message, ...] | None:
    """Clear the content of every tool result but the last ``keep``; ``None`` if none changed."""
    positions = [
        (i, j)
        for i, m in enumerate(messages)
        for j, b in enumerate(m.content)
        if isinstance(b, ToolResultBlock)
    ]
    old = positions[: max(len(positions) - keep, 0)]
    by_msg: dict[int, set[int]] = {}
    for i, j in old:
        block = messages[i].content[j]
        assert isinstance(block, ToolResultBlock)
        if block.content != CLEARED and len(block.content) > len(CLEARED):
            by_msg.setdefault(i, set()).add(j)
    if not by_msg:
        return None
    out = list(messages)
    for i, js in by_msg.items():
        blocks = list(out[i].content)
        for j in js:
            b = blocks[j]
            assert isinstance(b, ToolResultBlock)
            blocks[j] = b.model_copy(update={"content": CLEARED})
        out[i] = Message(role=out[i].role, content=tuple(blocks))
    return tuple(out)


def _valid_cut(messages: Sequence[Message], j: int) -> bool:
    m = messages[j]
    if m.role == "assistant":
        return True
    return not any(isinstance(b, ToolResultBlock) for b in m.content)


def choose_cut(messages: Sequence[Message], keep_tokens: int) -> int | None:
    """The index where the verbatim tail starts: the earliest valid cut whose tail fits in
    ``keep_tokens``, else the latest valid cut. ``None`` when there is nothing to summarise."""
    valid = [j for j in range(1, len(messages)) if _valid_cut(messages, j)]
    if not valid:
        return None
    tail = 0
    sizes = {}
    for j in range(len(messages) - 1, 0, -1):
        tail += block_chars(messages[j])
        sizes[j] = tail // 4
    fitting = [j for j in valid if sizes[j] <= keep_tokens]
    return fitting[0] if fitting else valid[-1]


def rebuild(summary: str, tail: Sequence[Message]) -> tuple[Message, ...]:
    """``[user: summary (+ the tail's first user message)] + rest of the tail``."""
    head: list[TextBlock | ToolResultBlock | ToolUseBlock] = [
        TextBlock(text=f"{SUMMARY_PREFIX}{summary}\n</summary>")
    ]
    rest = list(tail)
    if rest and rest[0].role == "user":
        first = rest.pop(0)
        return (Message(role="user", content=(*head, *first.content)), *rest)
    return (Message(role="user", content=tuple(head)), *rest)


def render_for_summary(messages: Sequence[Message], limit: int) -> str:
    """A plain-text rendering of the history (tool inputs and results shortened)."""
    lines: list[str] = []
    for m in messages:
        for b in m.content:
            if isinstance(b, TextBlock):
                lines.append(f"[{m.role}] {b.text}")
            elif isinstance(b, ToolUseBlock):
                lines.append(f"[tool call {b.name}] {json.dumps(b.input)[:800]}")
            elif isinstance(b, ToolResultBlock):
                flag = " (error)" if b.is_error else ""
                lines.append(f"[tool result{flag}] {b.content[:1500]}")
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    head = limit // 5
    return (
        f"{text[:head]}\n[… {len(text) - limit} characters left out …]\n{text[-(limit - head) :]}"
    )
