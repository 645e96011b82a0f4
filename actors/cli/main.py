"""The ``teamctl`` command line: a thin shell over factories.

Start-up matters (docs/ARCHITECTURE.md, "Start-up and benchmarks"): this module and the
command modules it registers import only click and light project modules at load time; anything
heavy (the model SDK, MCP, pykka, GitPython, watchfiles, rich) is imported inside the command
that needs it.

Errors: every domain error (``MailboxesError``, ``TeamError``, a pydantic ``ValidationError``,
an ``OSError``) becomes one line on stderr and exit code 1; usage errors exit 2 (click);
``--debug`` lets the traceback through. Every error line starts ``error: ``, click's own too
(its usage text stays above it).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "init": ("team", "init"),
    "status": ("team", "status"),
    "doctor": ("team", "doctor"),
    "tasks": ("tasks", "tasks"),
    "task": ("tasks", "task"),
    "send": ("messages", "send"),
    "inbox": ("messages", "inbox"),
    "events": ("journal", "events"),
    "replay": ("journal", "replay"),
    "journal": ("journal", "journal"),
    "plans": ("approvals", "plans"),
    "permissions": ("approvals", "permissions"),
    "approve": ("approvals", "approve"),
    "reject": ("approvals", "reject"),
    "settings": ("settings_cmd", "settings_command"),
    "cost": ("cost", "cost"),
    "jobs": ("ops", "jobs_command"),
    "cron": ("ops", "cron_group"),
    "run": ("run", "run_command"),
    "resume": ("run", "resume_command"),
    "join": ("run", "join_command"),
    "stop": ("run", "stop_command"),
    "ask": ("ask", "ask_command"),
    "mcp": ("mcp", "mcp_group"),
    "worktree": ("worktree", "worktree"),
    "watch": ("watch", "watch"),
    "scenario": ("scenario", "scenario_group"),
    "demo": ("demo", "demo"),
    "workflow": ("workflow", "workflow_group"),
    "web": ("web", "web"),
}
"""Every top-level command: its module in ``actors/cli/`` and the attribute holding it. A
command's module is imported when the command runs (``--help`` imports them all to list them),
so ``teamctl tasks`` loads none of the other command modules."""


def _domain_errors() -> tuple[type[BaseException], ...]:
    from pydantic_core import ValidationError

    from actors.errors import TeamError
    from mailboxes.errors import MailboxesError

    return (MailboxesError, TeamError, ValidationError, OSError)


def one_line(exc: BaseException) -> str:
    """The error as one line (pydantic and some OS errors span several)."""
    from pydantic_core import ValidationError

    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in e['loc']) or exc.title}: {e['msg']}" for e in exc.errors()
        ]
        text = f"invalid {exc.title}: " + "; ".join(parts)
    else:
        text = str(exc) or type(exc).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


class _StderrWarnings(logging.Handler):
    """Library warnings (a repaired projection, a message moved aside) as one stderr line each."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"warning: {record.getMessage()}", err=True)


OUR_PACKAGES = ("actors", "harness", "mailboxes", "teamctl_base")
"""teamctl's top-level packages (names of packages, not of folders of the file store)."""


def _install_warnings(ctx: click.Context, debug: bool) -> None:
    """Route library warnings to stderr for this command only (removed when it ends)."""
    handler = _StderrWarnings(level=logging.DEBUG if debug else logging.WARNING)
    for name in OUR_PACKAGES:
        log = logging.getLogger(name)
        level = log.level
        log.addHandler(handler)
        if debug:
            log.setLevel(logging.DEBUG)

        def undo(log: logging.Logger = log, level: int = level) -> None:
            log.removeHandler(handler)
            log.setLevel(level)

        ctx.call_on_close(undo)


EXIT_PIPE_CLOSED = 141
"""Exit code when the reader of stdout went away (``teamctl events | head -1``): 128 + SIGPIPE,
what a shell reports for a program the closed pipe killed."""


def _reader_gone() -> None:
    """End quietly after a closed pipe: point stdout at /dev/null so that flushing it at exit
    does not fail a second time (Python would print "Exception ignored ... BrokenPipeError")."""
    import os
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a real file (in-process tests): nothing to flush
        pass


def show_click_error(exc: click.ClickException) -> None:
    """What click shows for ``exc`` (usage and hint included), with its ``Error: `` prefix
    written ``error: `` like every other error line of the CLI."""
    import io

    buffer = io.StringIO()
    exc.show(file=buffer)
    text = buffer.getvalue()
    at = text.rfind(f"Error: {exc.format_message()}")
    if at >= 0:
        text = text[:at] + "error: " + text[at + len("Error: ") :]
    click.echo(text, err=True, nl=False)


class TeamGroup(click.Group):
    """The root group: the one place where domain errors become a friendly line."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as exc:  # bad usage of the root group itself
            show_click_error(exc)
            raise click.exceptions.Exit(exc.exit_code) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            import importlib

            module, attr = COMMAND_MODULES[cmd_name]
            command = getattr(importlib.import_module(f"actors.cli.{module}"), attr)
            assert isinstance(command, click.Command), cmd_name
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except click.ClickException as exc:
            show_click_error(exc)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            _reader_gone()
            ctx.exit(EXIT_PIPE_CLOSED)
        except Exception as exc:
            if ctx.params.get("debug") or not isinstance(exc, _domain_errors()):
                raise
            click.echo(f"error: {one_line(exc)}", err=True)
            ctx.exit(1)


@click.group(cls=TeamGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Run a team of LLM coding agents on a git repository.

    Every command works from any folder inside the repository.
    """
    ctx.obj = {"debug": debug}
    _install_warnings(ctx, debug)


def main() -> None:
    """Console-script entry point."""
    try:
        cli()
    except SystemExit as done:
        if "actors.cli.run" in sys.modules:  # only a team run (its module) has anything to do
            from actors.cli.run import leave_now

            leave_now(done)  # a team run that stopped exits at once (no interpreter teardown)
        raise
