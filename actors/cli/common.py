"""Small helpers shared by the command modules: opening the team, printing JSON and tables.

Imports here stay light: rich is imported inside ``table``/``console`` only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from teamctl_base.text import CELL_CHARS

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


def show(renderable: Any) -> None:
    """Print a rich renderable."""
    console().print(renderable)


def warn(text: str) -> None:
    """One warning line on stderr."""
    click.echo(f"warning: {text}", err=True)
