"""What the model sees: the system prompt, reminders, token accounting, the pairing check, result
spilling.

Every request of an agent starts with the bytes of its previous request (tools → system →
messages), so the prompt cache serves all of it but the new tail (docs/ARCHITECTURE.md, "Context
and the prompt cache"). The system prompt is therefore fixed for the session: a first block shared
by the agents of one kind (identity, tool guidance, static sections such as the memory guidance
and project instructions, session sections such as the workspace, skills catalog and MCP servers),
the prompt-cache breakpoint, then a block of the agent's own sections (its name, a teammate's
instructions from the lead, SessionStart context), so a second teammate reads the tools and the
shared block from the cache the first one wrote. Both are rendered once, at the first request.
What changes during a session (the lead's team state, the memory index, the working directory)
is a volatile section: ``SystemPrompt.reminder`` renders the sections whose text changed since the
last reminder as a ``<system-reminder>`` block, which the loop appends to the newest user message,
where it stays like any other content. Compaction itself lives in ``harness.context.compaction``;
this module holds the pieces it and the loop share.
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
"""Returns the text of one prompt section ("" to leave it out)."""

CHARS_PER_TOKEN = 4
REMINDER_OPEN = "<system-reminder>"
REMINDER_CLOSE = "</system-reminder>"
REMINDER_GUIDANCE = (
    f"A user message may end with a {REMINDER_OPEN} block: the current value of the context "
    "sections it names, each replacing the one of the same name sent earlier. It is context "
    "from the harness, not a request."
)
"""Part of the system prompt when there are volatile sections: how to read a reminder."""


def is_reminder(text: str) -> bool:
    """Whether a user-message text block is a reminder (context, not input to answer)."""
    return text.startswith(REMINDER_OPEN)


class PairingError(HarnessError):
    """A request would break the tool_use/tool_result pairing rule (a bug, never sent)."""


@dataclass
class SystemPrompt:
    """The system prompt, fixed for the session, and the volatile sections sent as reminders.

    Static sections have fixed text; session sections are providers rendered once, at the first
    ``blocks`` call (the system prompt then stays byte-identical); volatile sections are providers
    read before every model call by ``reminder``, never part of the system prompt.
    """

    identity: str
    tool_guidance: str = ""
    sections: list[tuple[str, Provider]] = field(default_factory=list)
    static_sections: list[tuple[str, str]] = field(default_factory=list)
    volatile: list[tuple[str, Provider]] = field(default_factory=list)
    own_sections: list[tuple[str, Provider]] = field(default_factory=list)
    _rendered: tuple[SystemBlock, ...] | None = field(default=None, init=False, repr=False)
    _sent: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _known: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _turn_only: set[str] = field(default_factory=set, init=False, repr=False)
    _owe_all: bool = field(default=False, init=False, repr=False)

    def add_static(self, title: str, text: str) -> None:
        """Append a section to the system prompt (left out when ``text`` is blank)."""
        if text.strip():
            self.static_sections.append((title, text.strip()))
            self._rendered = None

    def add_section(self, title: str, provider: Provider) -> None:
        """Append a session section: ``provider`` is read once, when the system prompt is first
        rendered (adding one after that re-renders it, which changes the cached prefix)."""
        self.sections.append((title, provider))
        self._rendered = None

    def add_own(self, title: str, provider: Provider) -> None:
        """Append a section of this agent's own (its name, its instructions): rendered once, like
        a session section, but into the block after the prompt-cache breakpoint, so the block
        before it stays byte-identical across the agents of one kind."""
        self.own_sections.append((title, provider))
        self._rendered = None

    def add_volatile(
        self, title: str, provider: Provider, *, known: str = "", mid_turn: bool = True
    ) -> None:
        """Append a volatile section, sent in a reminder whenever its text differs from the last
        one sent, or from ``known`` (what the system prompt already says) before any was.
        ``mid_turn=False``: sent only with the message that opens a turn, not after tool results
        (the lead's team state: mid-turn it mostly repeats what its own tool results said, and
        team news that needs the lead arrives as mail)."""
        self.volatile.append((title, provider))
        self._known[title] = self._sent[title] = known.strip()
        if not mid_turn:
            self._turn_only.add(title)

    def blocks(self) -> tuple[SystemBlock, ...]:
        """The system prompt, rendered once: the shared block, a prompt-cache breakpoint, then
        (when there are any) the agent's own sections in a second block."""
        if self._rendered is None:
            text = (
                self.identity
                if not self.tool_guidance
                else f"{self.identity}\n\n{self.tool_guidance}"
            )
            for title, static in self.static_sections:
                text += f"\n\n# {title}\n{static}"
            if self.volatile:
                text += f"\n\n# Context updates\n{REMINDER_GUIDANCE}"
            text += _render(self.sections)
            own = _render(self.own_sections).lstrip("\n")
            shared = SystemBlock(text=text, cache=True)
            self._rendered = (shared, SystemBlock(text=own)) if own else (shared,)
        return self._rendered

    def reminder(self, *, mid_turn: bool = False) -> str | None:
        """A reminder of the volatile sections whose text changed since the last reminder
        (a section that became empty reads "(none)"); ``None`` when nothing changed. The
        sections returned count as sent. ``mid_turn``: leave out the turn-only sections (they
        wait for the next turn), unless a compaction dropped the earlier reminders."""
        parts: list[str] = []
        skip = self._turn_only if mid_turn and not self._owe_all else set()
        self._owe_all = False
        for title, provider in self.volatile:
            if title in skip:
                continue
            text = provider().strip()
            if text == self._sent.get(title, ""):
                continue
            self._sent[title] = text
            parts.append(f"# {title}\n{text or '(none)'}")
        if not parts:
            return None
        body = "\n\n".join(parts)
        return f"{REMINDER_OPEN}\n{body}\n{REMINDER_CLOSE}"

    def forget_reminders(self) -> None:
        """Send every volatile section that differs from what the system prompt says again with
        the next reminder (after a compaction dropped the earlier reminders)."""
        self._sent = dict(self._known)
        self._owe_all = True


def _render(sections: Sequence[tuple[str, Provider]]) -> str:
    """The sections whose provider returns text, each as a blank line, ``# title`` and it."""
    out = ""
    for title, provider in sections:
        section = provider().strip()
        if section:
            out += f"\n\n# {title}\n{section}"
    return out


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
