"""``teamctl settings``: the merged settings of every scope and where each rule and hook came
from; and ``load_for_command``, which every command that runs agents uses to load the settings
and print their warnings once (docs/ARCHITECTURE.md, "Settings")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from actors.cli.common import echo_json, json_option

if TYPE_CHECKING:
    from actors.settings import LoadedSettings

EXIT_BAD_SETTINGS = 2
"""``teamctl settings``: a settings file cannot be read or does not match the schema."""


def print_warnings(loaded: LoadedSettings) -> None:
    """Each settings warning as one ``teamctl: warning: …`` line on stderr."""
    from teamctl_base.text import safe

    for line in loaded.warnings:
        click.echo(f"teamctl: warning: {safe(line)}", err=True)


def load_for_command(
    team_file: Path | None = None, *, root: Path | None = None, mode: str | None = None
) -> LoadedSettings:
    """The settings for a command that runs agents, warnings printed: ``team_file`` (default:
    this repository's ``.team/settings.json``), ``root`` the repository, ``mode`` the
    ``--permission-mode`` given (refused when a settings file disables it)."""
    from actors.settings import load_scoped_settings

    if team_file is None:
        from actors.repo import find_team

        team_file = find_team().settings_path
    loaded = load_scoped_settings(team_file, root=root)
    print_warnings(loaded)
    loaded.check_mode(mode)
    return loaded


def _where(file: Any) -> str:
    return f"{file.label} ({file.scope})"


def report(loaded: LoadedSettings) -> dict[str, Any]:
    """``teamctl settings --json``: the files, the merged settings, each rule's and hook's file,
    and the warnings."""
    return {
        "files": [
            {"scope": f.scope, "path": str(f.path), "exists": exists} for f, exists in loaded.files
        ],
        "settings": loaded.settings.to_json(),
        "rules": [
            {"list": r.kind, "rule": r.rule, "file": str(r.file.path), "scope": r.file.scope}
            for r in loaded.rules
        ],
        "hooks": [
            {
                "event": h.event,
                "matcher": h.matcher,
                "command": h.command,
                "file": str(h.file.path),
                "scope": h.file.scope,
            }
            for h in loaded.hooks
        ],
        "warnings": list(loaded.warnings),
    }


def _show(loaded: LoadedSettings) -> None:
    import json

    from teamctl_base.text import safe

    click.echo("settings files, lowest precedence first:")
    for file, exists in loaded.files:
        click.echo(f"  {file.scope:<8} {safe(file.label)}{'' if exists else '  (none)'}")
    click.echo("permission rules (deny wins wherever it comes from):")
    if not loaded.rules:
        click.echo("  none")
    for rule in loaded.rules:
        click.echo(f"  {rule.kind:<5} {safe(rule.rule)}  <- {safe(_where(rule.file))}")
    click.echo("hooks:")
    if not loaded.hooks:
        click.echo("  none")
    for hook in loaded.hooks:
        matcher = f" [{safe(hook.matcher)}]" if hook.matcher else ""
        click.echo(f"  {hook.event}{matcher}: {safe(hook.command)}  <- {safe(_where(hook.file))}")
    click.echo("merged settings:")
    click.echo(safe(json.dumps(loaded.settings.to_json(), indent=2), multiline=True))


@click.command("settings")
@json_option
def settings_command(as_json: bool) -> None:
    """The merged settings (~/.claude, .claude/, .team/settings.json, $TEAMCTL_SETTINGS) and the
    file each permission rule and hook came from; warnings on stderr. Exit 2: a bad file."""
    from actors.repo import find_team
    from actors.settings import SettingsError, load_scoped_settings
    from teamctl_base.text import safe

    repo = find_team()
    try:
        loaded = load_scoped_settings(repo.settings_path, root=repo.root)
    except SettingsError as exc:
        click.echo(f"error: {safe(exc)}", err=True)
        raise click.exceptions.Exit(EXIT_BAD_SETTINGS) from None
    print_warnings(loaded)
    if as_json:
        echo_json(report(loaded))
    else:
        _show(loaded)


COMMANDS = (settings_command,)
