"""``TextTable``: the tables of ``teamctl tasks`` and ``teamctl status`` printed without rich,
exactly as rich prints them when they fit, and handed to rich when they do not or hold text
whose width only rich measures; agent text stays escaped and cut either way."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest
from rich.console import Console

from actors.cli.common import PIPE_WIDTH, Lines, TextTable, text_table


def _rich(grid: TextTable, width: int) -> str:
    out = io.StringIO()
    Console(file=out, highlight=False, soft_wrap=True, width=width).print(grid.as_rich())
    return out.getvalue()


def _grid(
    title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]], **kw: int | None
) -> TextTable:
    grid = text_table(title, columns, **kw)  # type: ignore[arg-type]
    for row in rows:
        grid.add_row(*row)
    return grid


TABLES = [
    _grid(None, ("id", "status", "subject"), [("task_1", "ready", "fix it"), ("task_10", "x", "")]),
    _grid("members", ("name", "kind"), [("lead", "agent")]),
    _grid("inboxes", ("agent", "unread"), []),
    _grid("title as wide as it", ("abcdefghijklmno", "b"), [("1", "2")]),
    _grid(None, ("header wider", "b"), [("1", "a cell")]),
    _grid(None, ("id", "text"), [("t", "\x1b[31mred\x1b]0;title\x07 \u202e\r\n[b]x[/b]")]),
    _grid(None, ("id", "text"), [("t", "y" * 150)]),
    _grid(None, ("id", "text"), [("t", "y" * 150)], max_cell=None),
    _grid(None, ("id", "text"), [("t", "y" * 150)], max_cell=20),
    _grid("[red]w[/red]", ("id", "text"), [("t", "cut here … and — on")]),
    _grid(
        "task_1: s",
        ("field", "value"),
        [
            ("description", Lines("first line\n\n  third \x1b[2J line\nlast")),
            ("status", Lines("one line")),
            ("summary", Lines("x" * 130)),
            ("plan", "a\nb"),
        ],
        max_cell=None,
    ),
    _grid(None, ("a", "b", "c"), [(Lines("1\n2\n3"), "x", Lines("p\nq"))], max_cell=5),
    _grid(None, ("a", "b"), [("1", Lines("y" * 30)), ("2", Lines("z\r\nw"))], max_cell=5),
]


@pytest.mark.parametrize("grid", TABLES)
def test_a_table_that_fits_is_printed_as_rich_prints_it(grid: TextTable) -> None:
    text = grid.render(PIPE_WIDTH)
    assert text is not None
    assert text + "\n" == _rich(grid, PIPE_WIDTH)
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text


def test_the_header_is_bold_on_a_terminal() -> None:
    grid = _grid("t", ("id", "x"), [("1", "2")])
    assert grid.render(80, styled=True) == "t\n\x1b[1mid\x1b[0m ┃ \x1b[1mx\x1b[0m\n━━━╇━━\n1  │ 2"


@pytest.mark.parametrize(
    ("grid", "width"),
    [
        (_grid(None, ("id", "text"), [("t", "y" * 60)]), 40),  # rich folds it
        (_grid(None, ("id", "text"), [("t", "漢字")]), PIPE_WIDTH),  # two cells wide each
        (_grid(None, ("id", "text"), [("t", "e\u0301")]), PIPE_WIDTH),  # a combining accent
        (_grid("a title longer than the table", ("a",), [("1",)]), PIPE_WIDTH),  # rich wraps it
        (_grid(None, ("a", "b"), [("1", Lines("tab\there"))]), PIPE_WIDTH),  # rich expands it
        (_grid(None, ("a", "b"), [("1", Lines("ends with a break\n"))]), PIPE_WIDTH),
    ],
)
def test_what_only_rich_can_lay_out_is_left_to_rich(grid: TextTable, width: int) -> None:
    assert grid.render(width) is None
    assert _rich(grid, width)  # and rich prints it
