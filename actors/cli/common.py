"""Small helpers shared by the command modules: opening the team, printing JSON and tables.

Imports here stay light: rich is imported inside ``table``/``console`` only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from actors.factory import Team

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")


@contextmanager
def team_session(actor: str = "cli") -> Iterator[Team]:
    """The team of the repository around the current folder, closed afterwards. Events it
    writes are recorded as caused by ``actor``."""
    from actors.factory import open_team

    team = open_team(actor=actor)
    try:
        yield team
    finally:
        team.close()


def echo_json(value: Any) -> None:
    """One JSON document on stdout."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False))


def echo_json_line(value: Any) -> None:
    """One compact JSON object per line (for streams)."""
    click.echo(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def console() -> Console:
    """A rich console writing to click's stdout (so in-process tests capture it)."""
    import sys

    from rich.console import Console

    # sys.stdout at call time, so click's CliRunner captures it in tests.
    return Console(file=sys.stdout, highlight=False, soft_wrap=True)


def table(title: str | None, columns: Sequence[str]) -> Table:
    """A plain rich table with ``columns``."""
    from rich.table import Table

    grid = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for name in columns:
        grid.add_column(name, overflow="fold")
    return grid


def show(renderable: Any) -> None:
    """Print a rich renderable."""
    console().print(renderable)


def warn(text: str) -> None:
    """One warning line on stderr."""
    click.echo(f"warning: {text}", err=True)
