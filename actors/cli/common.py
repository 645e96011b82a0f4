"""Small helpers shared by the command modules: opening the team, printing JSON and tables.

Imports here stay light: rich is imported inside ``table``/``console`` only, and ``text_table``
prints a table of one-line cells without rich when it fits (``TextTable``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from teamctl_base.text import CELL_CHARS, clip, safe

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from actors.factory import Team

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")


@contextmanager
def team_session(actor: str = "cli", *, read_only: bool = False) -> Iterator[Team]:
    """The team of the repository around the current folder, closed afterwards. Events it
    writes are recorded as caused by ``actor``.

    ``read_only`` (commands that only show things): when the team cannot be opened for writing
    (a journal damaged mid-file, a full disk) it is opened read-only, showing the events before
    a bad line with one warning (``open_team_to_read``)."""
    from actors.factory import open_team, open_team_to_read

    team = open_team_to_read(actor=actor) if read_only else open_team(actor=actor)
    try:
        if team.damage is not None:
            damage = team.damage
            warn(
                f"journal {damage.path} is damaged at line {damage.line_no} ({damage.reason}): "
                f"showing the {damage.line_no - 1} events before it; "
                "`teamctl journal salvage` keeps them and drops the rest"
            )
        yield team
    finally:
        team.close()


def echo_json(value: Any) -> None:
    """One JSON document on stdout."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False))


def echo_json_line(value: Any) -> None:
    """One compact JSON object per line (for streams)."""
    click.echo(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


PIPE_WIDTH = 1000
"""The width tables get when stdout is not a terminal (and ``$COLUMNS`` is unset): one row per
line, never folded at 80 columns; every agent text in a cell is cut anyway (``CELL_CHARS``)."""

ID_COLUMNS = frozenset({"id", "seq", "job", "cron", "request", "name", "branch"})
"""Columns that never wrap: an id is copied whole into the next command."""


def console() -> Console:
    """A rich console writing to click's stdout (so in-process tests capture it)."""
    import os
    import sys

    from rich.console import Console

    # sys.stdout at call time, so click's CliRunner captures it in tests.
    out = sys.stdout
    width = None
    if not os.environ.get("COLUMNS") and not (hasattr(out, "isatty") and out.isatty()):
        width = PIPE_WIDTH
    return Console(file=out, highlight=False, soft_wrap=True, width=width)


def table(title: str | None, columns: Sequence[str], *, max_cell: int | None = CELL_CHARS) -> Table:
    """A rich table with ``columns`` whose cells are plain, escaped text cut to ``max_cell``
    characters (None: whole), never markup (``actors.live.text.SafeTable``); id columns never
    wrap."""
    from actors.live.text import SafeTable

    grid = SafeTable(
        title=title, title_justify="left", show_edge=False, pad_edge=False, max_cell=max_cell
    )
    for name in columns:
        if name in ID_COLUMNS:
            grid.add_column(name, no_wrap=True)
        else:
            grid.add_column(name, overflow="fold")
    return grid


def text_table(
    title: str | None, columns: Sequence[str], *, max_cell: int | None = CELL_CHARS
) -> TextTable:
    """A table like ``table``'s whose cells are strings on one line (escaped and cut to
    ``max_cell`` characters): ``show`` prints it without importing rich when it fits."""
    return TextTable(title, columns, max_cell=max_cell)


_SIMPLE = frozenset(chr(c) for c in range(0x20, 0x7F)) | frozenset("…—")
"""Characters one terminal cell wide for sure (rich measures the same): a table holding only
these is laid out by ``TextTable``; any other goes to rich, which knows wide and combining ones."""

_RICH_STYLE_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


class Lines(str):
    """A ``TextTable`` cell shown with its line breaks (escaped otherwise), as ``plain(text,
    multiline=True)`` shows it in a rich table."""


class TextTable:
    """The rows of a table of plain text cells, printed as rich prints ``table``'s grid
    (``show_edge=False``, ``pad_edge=False``, a heavy header rule; the header bold on a
    terminal) but without rich, whose import costs a fifth of ``teamctl tasks``. A table
    that would not fit the width, or holds text whose width rich measures otherwise, is handed
    to rich (``as_rich``)."""

    def __init__(
        self, title: str | None, columns: Sequence[str], *, max_cell: int | None = CELL_CHARS
    ) -> None:
        self.title = title
        self.columns = tuple(columns)
        self.max_cell = max_cell
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        """One row: each cell on one line (escaped, cut to ``max_cell``), a ``Lines`` cell with
        its line breaks."""
        self.rows.append(tuple(cells))

    def as_rich(self) -> Table:
        """The same table as a rich ``SafeTable`` (``table``)."""
        from actors.live.text import plain

        grid = table(self.title, self.columns, max_cell=self.max_cell)
        for row in self.rows:
            grid.add_row(*(plain(c, multiline=True) if isinstance(c, Lines) else c for c in row))
        return grid

    def _lines(self, cell: str) -> list[str] | None:
        if not isinstance(cell, Lines):
            return [clip(safe(cell), self.max_cell)]
        text = safe(cell, multiline=True)
        if "\t" in text or text.endswith("\n"):
            return None  # rich expands tabs and may drop a last empty line: its layout
        lines = text.split("\n")
        return [clip(text, self.max_cell)] if len(lines) == 1 else lines

    def render(self, width: int, *, styled: bool = False) -> str | None:
        """The lines rich would print at ``width`` columns, or None when rich must lay it out
        (too wide, or a character of uncertain width)."""
        head = [safe(c) for c in self.columns]
        title = None if self.title is None else safe(self.title)
        rows: list[list[list[str]]] = []
        for row in self.rows:
            cells = [self._lines(c) for c in row]
            if len(cells) != len(head) or any(c is None for c in cells):
                return None
            rows.append([c for c in cells if c is not None])
        texts = [*head, title or "", *(t for row in rows for c in row for t in c)]
        if any(not _SIMPLE.issuperset(t) for t in texts):
            return None
        widths = [len(h) for h in head]
        for laid in rows:
            widths = [max(w, *(len(t) for t in c)) for w, c in zip(widths, laid, strict=True)]
        total = sum(widths) + 3 * (len(widths) - 1)
        if not widths or total > width or (title is not None and len(title) > total):
            return None
        bold, reset = ("\x1b[1m", "\x1b[0m") if styled else ("", "")
        lines = [] if title is None else [title]
        lines.append(
            " ┃ ".join(f"{bold}{c.ljust(w)}{reset}" for c, w in zip(head, widths, strict=True))
        )
        last = len(widths) - 1
        lines.append("╇".join("━" * (w + (i > 0) + (i < last)) for i, w in enumerate(widths)))
        for laid in rows:
            for n in range(max(len(c) for c in laid)):
                parts = (c[n] if n < len(c) else "" for c in laid)
                lines.append(" │ ".join(t.ljust(w) for t, w in zip(parts, widths, strict=True)))
        return "\n".join(lines)


def _plain_layout() -> tuple[int, bool] | None:
    """The width and styling ``console()`` would print with, when ``TextTable`` can match it
    (None: leave it to rich)."""
    import os
    import sys

    out = sys.stdout
    encoding = (getattr(out, "encoding", None) or "utf-8").lower().replace("-", "")
    if encoding != "utf8" or any(os.environ.get(k) for k in _RICH_STYLE_ENV):
        return None
    columns = os.environ.get("COLUMNS")
    tty = hasattr(out, "isatty") and out.isatty()
    if columns:
        if not columns.isdigit():
            return None
        width = int(columns)
    elif tty:
        try:
            width = os.get_terminal_size(out.fileno()).columns or 80  # 0: unknown, as rich
        except (AttributeError, ValueError, OSError):
            width = 80
    else:
        width = PIPE_WIDTH
    if tty and os.environ.get("TERM", "") in ("", "dumb", "unknown"):
        return None
    return width, tty


def show(renderable: Any) -> None:
    """Print a rich renderable, or a ``TextTable`` (without rich when it can)."""
    if isinstance(renderable, TextTable):
        layout = _plain_layout()
        text = None if layout is None else renderable.render(layout[0], styled=layout[1])
        if text is not None:
            click.echo(text)
            return
        renderable = renderable.as_rich()
    console().print(renderable)


def warn(text: str) -> None:
    """One warning line on stderr."""
    click.echo(f"warning: {text}", err=True)
