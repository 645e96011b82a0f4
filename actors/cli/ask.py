"""``teamctl ask PROMPT``: the click command over ``harness.headless.run_ask``.

This is the CLI edge of ``ask``: it reads the prompt (argument or stdin) and the ``--json-schema``
file, builds the model client from the environment (``AnthropicModel``, imported only when the
command runs: it is slow to import), the tool policy from ``.team/settings.json`` and, on a
terminal, an approver that asks the human (elsewhere one that refuses and says, on stderr, why
and which flag or rule would allow it); then it runs the turn and exits with its code. The model
client's waits (back-off, rate limits, connection retries) are announced through
``WaitNotices``. An empty prompt is a usage error. Errors become one line
(``click.ClickException``). ``--goal TEXT`` / ``--goal-check CMD`` keep the turn going until the
goal holds (``harness.goal``; the README's "Goals").
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from harness.errors import HarnessError
from harness.headless import (
    DEFAULT_MODEL,
    OutputFormat,
    SchemaFileError,
    WaitNotices,
    check_schema,
    run_ask,
)

if TYPE_CHECKING:  # the runtime imports are inside the functions: `teamctl --help` stays fast
    from collections.abc import Callable

    from harness.model.backoff import ModelWait
    from harness.ports import Clock, ModelClient
    from harness.tools.base import Approver, PermissionRequest, ToolContext, ToolPolicy


def find_repo_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` holding ``.git``; ``start`` when none."""
    for p in (start, *start.parents):
        if (p / ".git").exists():
            return p
    return start


def _load_settings(root: Path, mode: str | None = None, *, warn: bool = False) -> Any:
    """The merged settings of every scope for ``root`` (``LoadedSettings``); a bad file or a
    disabled ``mode`` is one error line, ``warn`` prints the warnings."""
    from actors.cli.settings_cmd import print_warnings
    from actors.settings import SettingsError, load_scoped_settings

    try:
        loaded = load_scoped_settings(root / ".team" / "settings.json", root=root)
        if warn:
            print_warnings(loaded)
        loaded.check_mode(mode)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
    return loaded


def default_policy_factory(root: Path, mode: str, approver: Approver | None) -> ToolPolicy:
    """The harness policy for ``root``: the ``permissions`` and ``hooks`` of the settings of
    every scope (``actors.settings``), ``mode`` overriding the default mode."""
    from harness.hooks import HookRunner
    from harness.permissions.checks import Permissions
    from harness.permissions.policy import HarnessPolicy
    from harness.settings import HookSettings, PermissionMode, PermissionSettings

    raw = _load_settings(root, mode).settings.to_json()
    perms = PermissionSettings.model_validate(raw["permissions"])
    hooks = HookSettings.parse(raw.get("hooks"))
    permission_mode = cast(PermissionMode, mode)
    return HarnessPolicy(
        Permissions.from_settings(perms, mode=permission_mode),
        HookRunner(settings=hooks),
        approver,
        permission_mode,
    )


def console_approver(request: Any, ctx: Any, reason: str) -> bool:
    """Ask the human at the terminal (only used when stdin is a TTY)."""
    what = f"{request.tool}({request.target})" if request.target else request.tool
    return click.confirm(f"Allow {what}? {reason}".strip(), default=False, err=True)


def refusing_approver(request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
    """The approver when stdin is not a terminal: nobody can answer, so the call is refused,
    and the human is told on stderr why and how to allow it."""
    from actors.runtime.permission_requests import allow_hint, shown_target
    from teamctl_base.text import safe

    root = ctx.root
    target = shown_target(request, root)
    what = f"{request.tool}({target})" if target else request.tool
    click.echo(
        safe(
            f"teamctl ask: refused {what}: {reason}; nobody can approve it (stdin is not a "
            f"terminal): {allow_hint(request, root)}"
        ),
        err=True,
    )
    return False


def model_clock() -> Clock | None:
    """The clock of the model client (``None``: the system clock); tests replace it."""
    return None


def _model_from_env(model: str, on_wait: Callable[[ModelWait], None] | None = None) -> ModelClient:
    base = os.environ.get("ANTHROPIC_BASE_URL", "")
    if not os.environ.get("ANTHROPIC_API_KEY"):
        if not re.match(r"https?://(127\.|localhost|\[::1\])", base):
            raise click.ClickException(
                "ANTHROPIC_API_KEY is not set: export it, or try `teamctl demo` for a scripted run"
            )
        os.environ["ANTHROPIC_API_KEY"] = "fake-api-key"  # a local fake API needs no real key
    from harness.model.anthropic_client import AnthropicModel  # slow import: only when asked

    try:
        return AnthropicModel(model, on_wait=on_wait, clock=model_clock())
    except HarnessError as exc:  # a bad TEAMCTL_CONNECT_TIMEOUT
        raise click.ClickException(str(exc)) from exc


@click.command("ask")
@click.argument("prompt", required=False)
@click.option("--output-format", type=click.Choice(["text", "json", "stream-json"]), default="text")
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model name.")
@click.option("--max-turns", type=int, default=None, help="Model calls allowed.")
@click.option("--json-schema", "schema_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--resume", is_flag=True, help="Continue the last `ask` session.")
@click.option(
    "--goal", "goal_text", default=None, help="A condition an evaluator model call must confirm."
)
@click.option(
    "--goal-check", "goal_check", default=None, help="A shell command that must exit 0 to finish."
)
@click.option(
    "--goal-max-blocks",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Blocked stops in a row before the goal is given up (exit 4).",
)
@click.option(
    "--permission-mode",
    type=click.Choice(["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"]),
    default="default",
)
def ask_command(
    prompt: str | None,
    output_format: OutputFormat,
    model: str,
    max_turns: int | None,
    schema_file: str | None,
    resume: bool,
    permission_mode: str,
    goal_text: str | None,
    goal_check: str | None,
    goal_max_blocks: int,
) -> None:
    """Run one agent on the current repository and print its answer."""
    if prompt is None:
        if sys.stdin.isatty():
            raise click.UsageError("give a PROMPT (or pipe one on stdin)")
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise click.UsageError("the prompt is empty: give a PROMPT (or pipe one on stdin)")
    schema = None
    if schema_file:
        try:
            schema = json.loads(Path(schema_file).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise click.ClickException(f"{schema_file}: not JSON: {exc}") from exc
        try:
            check_schema(schema)
        except SchemaFileError as exc:
            raise click.ClickException(f"{schema_file}: {exc}") from exc
    goal = None
    if goal_text is not None or goal_check is not None:
        if not (goal_text or "").strip() and not (goal_check or "").strip():
            raise click.UsageError("--goal / --goal-check must not be empty")
        from harness.goal import Goal

        goal = Goal(
            condition=(goal_text or "").strip() or None,
            check=(goal_check or "").strip() or None,
            max_blocks=goal_max_blocks,
        )
    from actors.factory import exclude_team_files

    root = exclude_team_files(find_repo_root(Path.cwd()))  # as `init` does
    _load_settings(root, permission_mode, warn=True)  # a bad file stops here, warnings once
    notices = WaitNotices()
    client = _model_from_env(model, on_wait=notices)
    try:
        code = run_ask(
            root,
            prompt,
            model_client=client,
            output_format=output_format,
            max_turns=max_turns,
            json_schema=schema,
            resume=resume,
            permission_mode=permission_mode,
            approver=console_approver if sys.stdin.isatty() else refusing_approver,
            policy_factory=default_policy_factory,
            model=model,
            wait_notices=notices,
            goal=goal,
        )
    except HarnessError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(code)
