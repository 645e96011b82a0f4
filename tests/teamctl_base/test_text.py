"""``teamctl_base.text``: agent text made safe for a terminal, and cut to fit a cell."""

from __future__ import annotations

import pytest

from teamctl_base.text import CELL_CHARS, clip, is_safe, one_line, safe

HOSTILE = "x \x1b[2J\x1b]0;PWNED\x07 \r\x9b31m\x7f\u202eevil\x00"


def test_every_control_character_is_shown_as_an_escape() -> None:
    shown = safe(HOSTILE)
    assert shown == "x \\x1b[2J\\x1b]0;PWNED\\x07 \\r\\x9b31m\\x7f\\u202eevil\\x00"
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029, 0x2066):
        assert not is_safe(chr(code)), hex(code)
        assert is_safe(safe(chr(code))), hex(code)


def test_printable_text_is_left_alone() -> None:
    text = "Rename calc_total → order_total in shop/cart.py (ünïcode, 漢字, emoji 🎉) [red]x[/red]"
    assert safe(text) == text
    assert is_safe(text)


@pytest.mark.parametrize(
    ("multiline", "expected"),
    [(False, "a\\nb\\tc\\rd"), (True, "a\nb\tc\\rd")],
)
def test_newlines_are_kept_only_for_a_body_shown_whole(multiline: bool, expected: str) -> None:
    assert safe("a\nb\tc\rd", multiline=multiline) == expected


def test_clip_cuts_with_an_ellipsis() -> None:
    assert clip("abcdef", 4) == "abc…"
    assert clip("abcd", 4) == "abcd"
    assert clip("x" * 100_000, None) == "x" * 100_000
    cell = one_line("s\x1b" * 100_000)
    assert len(cell) == CELL_CHARS and cell.endswith("…") and "\x1b" not in cell
