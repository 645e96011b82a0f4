"""The ``teamctl`` command line: a thin shell over factories (commands are added per feature)."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Run a team of LLM coding agents on a git repository."""
    ctx.obj = {"debug": debug}


def main() -> None:
    """Console-script entry point."""
    cli()
