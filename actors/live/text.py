"""Rich renderables that never let agent text drive the terminal.

A plain ``str`` given to rich is parsed as console markup: a subject like ``[link=…]x[/link]``
would become a hyperlink and ``[red]`` a colour. ``SafeTable`` takes every ``str`` cell as plain
text, escaped and cut to ``max_cell`` characters (``teamctl_base.text``); a ``rich.text.Text``
cell (already plain) is escaped too, newlines kept, so an agent's reason appended to a styled
status stays harmless. ``plain`` makes one such ``Text`` for use outside tables.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from teamctl_base.text import CELL_CHARS, clip, is_safe, safe

__all__ = ["SafeTable", "plain"]


def plain(
    text: object, *, style: str = "", multiline: bool = False, limit: int | None = None
) -> Text:
    """``text`` as a rich ``Text`` (no markup), escaped, cut to ``limit`` when on one line."""
    shown = safe(text, multiline=multiline)
    return Text(shown if multiline else clip(shown, limit), style=style)


class SafeTable(Table):
    """A ``Table`` whose cells and title are plain text, escaped, and cut to ``max_cell``
    characters when on one line (None: whole, for ``--full``)."""

    def __init__(self, *args: Any, max_cell: int | None = CELL_CHARS, **kwargs: Any) -> None:
        title = kwargs.get("title")
        if isinstance(title, str):
            kwargs["title"] = plain(title, limit=None)
        super().__init__(*args, **kwargs)
        self.max_cell = max_cell

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        super().add_row(*(self._cell(r) for r in renderables), **kwargs)

    def _cell(self, value: Any) -> Any:
        if isinstance(value, str):
            return plain(value, limit=self.max_cell)
        if isinstance(value, Text):
            if not is_safe(value.plain, multiline=True):
                value = Text(safe(value.plain, multiline=True), style=value.style)
            limit = self.max_cell
            if limit is not None and "\n" not in value.plain and len(value.plain) > limit:
                value = value.copy()
                value.truncate(limit - 1)
                value.append("…")
        return value
