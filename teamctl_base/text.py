"""Text that came from an agent, a task or a message, made safe to print on a terminal.

Task subjects, message bodies, plans and crash reasons are written by agents, so repository
content can reach them through prompt injection. Printed raw, an ESC sequence clears the screen,
retitles the window or forges a hyperlink. ``safe`` makes every control character visible
instead (``\\x1b``, ``\\r``, ``\\x07``, ``\\u202e``): C0 controls, DEL, C1 controls, and the
Unicode bidirectional overrides and line separators that reorder what a reader sees. ``clip``
bounds a one-line cell with an ellipsis. ``--json`` output never goes through here: programs get
the exact text.
"""

from __future__ import annotations

__all__ = ["CELL_CHARS", "clip", "is_safe", "one_line", "safe"]

CELL_CHARS = 100
"""The longest text one table cell shows before it is cut with an ellipsis."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029, 0x200E, 0x200F, 0x061C)


def _escape(code: int) -> str:
    char = chr(code)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_CONTROLS = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)
_ONE_LINE = {code: _escape(code) for code in _CONTROLS}
_MULTI_LINE = {code: text for code, text in _ONE_LINE.items() if chr(code) not in "\n\t"}


def safe(text: object, *, multiline: bool = False) -> str:
    """``text`` with every control character shown as an escape. ``multiline`` keeps newlines
    and tabs (for a body shown whole on purpose, as ``task show`` does); CR is always escaped."""
    return str(text).translate(_MULTI_LINE if multiline else _ONE_LINE)


def is_safe(text: str, *, multiline: bool = False) -> bool:
    """Whether ``safe`` would leave ``text`` unchanged."""
    return safe(text, multiline=multiline) == text


def clip(text: str, limit: int | None = CELL_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, the last one an ellipsis (None: whole)."""
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + "…"


def one_line(text: object, limit: int | None = CELL_CHARS) -> str:
    """Escaped, on one line, and cut to ``limit`` characters: how a table cell shows agent text."""
    return clip(safe(text), limit)
