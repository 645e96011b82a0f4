"""What the model sees: the system prompt, token accounting, the pairing check, result spilling.

The system prompt is two blocks: a static one (identity, tool guidance, then static sections such
as the memory guidance and the project instructions of ``harness.context.instructions``, fixed for
the session) marked as a prompt-cache breakpoint, then a dynamic tail rebuilt before every call
from provider callbacks (workspace, live team state, skills catalog, memory index). Compaction
itself lives in ``harness.context.compaction``; this module holds the pieces it and the loop share.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.ports import (
    Message,
    SystemBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from harness.tools.outputs import cap_text

Provider = Callable[[], str]
"""Returns one section of the dynamic prompt ("" to leave it out); called before every request."""

CHARS_PER_TOKEN = 4


class PairingError(HarnessError):
    """A request would break the tool_use/tool_result pairing rule (a bug, never sent)."""


@dataclass
class SystemPrompt:
    """Static identity + tool guidance + static sections (cached) and named dynamic sections
    (rebuilt per call)."""

    identity: str
    tool_guidance: str = ""
    sections: list[tuple[str, Provider]] = field(default_factory=list)
    static_sections: list[tuple[str, str]] = field(default_factory=list)

    def add_static(self, title: str, text: str) -> None:
        """Append a section to the static block (left out when ``text`` is blank); its text is
        fixed from now on, so the cached prefix stays byte-identical for the session."""
        if text.strip():
            self.static_sections.append((title, text.strip()))

    def add_section(self, title: str, provider: Provider) -> None:
        """Append a dynamic section; sections render in the order added."""
        self.sections.append((title, provider))

    def blocks(self) -> tuple[SystemBlock, ...]:
        static = (
            self.identity if not self.tool_guidance else f"{self.identity}\n\n{self.tool_guidance}"
        )
        for title, text in self.static_sections:
            static += f"\n\n# {title}\n{text}"
        parts = []
        for title, provider in self.sections:
            text = provider().strip()
            if text:
                parts.append(f"# {title}\n{text}")
        out = [SystemBlock(text=static, cache=True)]
        if parts:
            out.append(SystemBlock(text="\n\n".join(parts)))
        return tuple(out)


def block_chars(message: Message) -> int:
    """A cheap size measure of one message, in characters."""
    total = 0
    for b in message.content:
        if isinstance(b, TextBlock):
            total += len(b.text)
        elif isinstance(b, ToolResultBlock):
            total += len(b.content) + 40
        elif isinstance(b, ToolUseBlock):
            total += len(b.name) + len(json.dumps(b.input)) + 40
        elif isinstance(b, ThinkingBlock):
            total += len(b.thinking)
        else:
            total += len(b.data)
    return total + 8


def estimate_tokens(messages: Sequence[Message]) -> int:
    """Characters / 4, the usual rough estimate."""
    return sum(block_chars(m) for m in messages) // CHARS_PER_TOKEN


class TokenCounter:
    """Context size = the last real ``usage`` (covering messages up to that response) plus an
    estimate of every message appended after it. ``reset`` after history is rewritten."""

    def __init__(self, system_tokens: int = 0) -> None:
        self._known: int | None = None
        self._known_upto = 0
        self.system_tokens = system_tokens

    def record(self, usage: Usage, n_messages: int) -> None:
        """Record the usage of the response that is message ``n_messages - 1``."""
        self._known = (
            usage.input_tokens
            + usage.cache_creation_input_tokens
            + usage.cache_read_input_tokens
            + usage.output_tokens
        )
        self._known_upto = n_messages

    def reset(self) -> None:
        self._known = None
        self._known_upto = 0

    def count(self, messages: Sequence[Message]) -> int:
        if self._known is None or self._known_upto > len(messages):
            return self.system_tokens + estimate_tokens(messages)
        return self._known + estimate_tokens(messages[self._known_upto :])


def check_pairing(messages: Sequence[Message], start: int = 0) -> None:
    """Every tool_use has exactly one tool_result in the next user message, and every
    tool_result answers a tool_use of the message just before; raise ``PairingError`` if not.
    ``start`` skips messages already checked (each message is checked against its neighbours)."""
    if messages and messages[0].role != "user":
        raise PairingError("the first message must be a user message")
    for i in range(max(start, 0), len(messages)):
        msg = messages[i]
        if i and msg.role == messages[i - 1].role:
            raise PairingError(f"messages {i - 1} and {i} have the same role {msg.role!r}")
        results = [b.tool_use_id for b in msg.content if isinstance(b, ToolResultBlock)]
        if msg.role == "assistant":
            if results:
                raise PairingError(f"assistant message {i} carries tool_result blocks")
            uses = [b.id for b in msg.content if isinstance(b, ToolUseBlock)]
            if not uses:
                continue
            if len(set(uses)) != len(uses):
                raise PairingError(f"assistant message {i} repeats a tool_use id")
            if i + 1 >= len(messages):
                raise PairingError(f"tool_use in message {i} has no tool_result (last message)")
            answered = [
                b.tool_use_id for b in messages[i + 1].content if isinstance(b, ToolResultBlock)
            ]
            if sorted(answered) != sorted(uses):
                raise PairingError(
                    f"message {i + 1} answers {sorted(answered)} but message {i} asked {sorted(uses)}"
                )
        elif results:
            prev = messages[i - 1] if i else None
            asked = (
                {b.id for b in prev.content if isinstance(b, ToolUseBlock)} if prev else set[str]()
            )
            stray = [r for r in results if r not in asked]
            if stray:
                raise PairingError(f"message {i} has tool_result for unknown tool_use {stray}")


def spill_oversize(
    results: Sequence[ToolResultBlock], *, limit_chars: int, outputs_dir: Path | None
) -> list[ToolResultBlock]:
    """Replace results over ``limit_chars`` by a head/tail preview; the full text goes to a
    content-addressed file in ``outputs_dir`` (when given) and the preview names it."""
    return [
        r
        if len(r.content) <= limit_chars
        else r.model_copy(
            update={"content": cap_text(r.content, max_chars=limit_chars, outputs_dir=outputs_dir)}
        )
        for r in results
    ]
