"""``teamctl mcp list`` and ``teamctl mcp call``: a ready-to-wire click group for debugging servers.

Servers come from ``.mcp.json`` at the repository root, then ``mcpServers`` of
``.team/settings.json``, then of the file named by ``TEAMCTL_SETTINGS`` (later ones win by name).
The root is the nearest folder upwards holding ``.mcp.json``, ``.team`` or ``.git``. Errors become
one line (``click.ClickException``); the ``mcp`` SDK is imported only when a server starts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from harness.mcp.client import McpManager, ServerStatus


def find_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` with ``.mcp.json``, ``.team`` or ``.git``."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in (".mcp.json", ".team", ".git")):
            return folder
    return start


def _settings_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"{path}: cannot read settings: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return dict(value) if isinstance(value, dict) else {}


def open_manager(root: Path) -> McpManager:
    """An ``McpManager`` for the servers configured for ``root`` (nothing started yet), whose
    stdio servers get the environment the settings' ``env`` and ``command_env`` make."""
    from harness.mcp.client import McpManager
    from harness.mcp.config import McpError
    from harness.shell.environment import CommandEnv, CommandEnvSettings

    files = [_settings_file(root / ".team" / "settings.json")]
    if os.environ.get("TEAMCTL_SETTINGS"):
        files.append(_settings_file(Path(os.environ["TEAMCTL_SETTINGS"])))
    servers: dict[str, Any] = {}
    env: dict[str, Any] = {}
    secrets: dict[str, Any] = {}
    for data in files:
        servers.update(_section(data, "mcpServers"))
        env.update(_section(data, "env"))
        secrets.update(_section(data, "command_env"))
    try:
        command_env = CommandEnv.from_settings(
            {str(k): str(v) for k, v in env.items()}, CommandEnvSettings.model_validate(secrets)
        )
    except ValueError as exc:
        raise click.ClickException(f"settings command_env: {exc}") from exc
    try:
        return McpManager.from_config(root, servers, command_env=command_env)
    except McpError as exc:
        raise click.ClickException(str(exc)) from exc


def _status_json(st: ServerStatus) -> dict[str, Any]:
    return {
        "name": st.name,
        "transport": st.transport,
        "state": st.state,
        "error": st.error,
        "restarts": st.restarts,
        "server": {"name": st.server_name, "version": st.server_version},
        "tools": [
            {
                "name": t.name,
                "model_name": None,
                "description": t.description,
                "annotations": t.annotations,
            }
            for t in st.tools
        ],
    }


@click.group("mcp")
def mcp_group() -> None:
    """Inspect and try the MCP servers of .mcp.json and the settings."""


@mcp_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Repository root (default: found from the current folder).",
)
def list_command(as_json: bool, root: Path | None) -> None:
    """Start every configured server and show its status and tools.

    Exit code 1 when a server failed to start or crashed: the others are still listed, and each
    failed one gets an ``error:`` line on stderr naming it.
    """
    from harness.mcp.catalog import McpToolset
    from harness.mcp.tools import hints_text

    manager = open_manager(root or find_root(Path.cwd()))
    try:
        toolset = McpToolset.build(manager)
        statuses = manager.statuses()
        model_names = {(t.info.server, t.info.name): t.name for t in toolset.tools.values()}
    finally:
        manager.close()
    if as_json:
        out = []
        for st in statuses:
            data = _status_json(st)
            for tool in data["tools"]:
                tool["model_name"] = model_names.get((st.name, tool["name"]))
            out.append(data)
        click.echo(json.dumps({"servers": out, "errors": toolset.errors}, indent=2))
        _exit_on_failed(statuses)
        return
    if not statuses:
        click.echo("No MCP servers configured (.mcp.json or mcpServers in .team/settings.json).")
        return
    for st in statuses:
        about = f" {st.server_name} {st.server_version}".rstrip() if st.server_name else ""
        click.echo(f"{st.name} ({st.transport}{',' if about else ''}{about}): {st.state}")
        for t in st.tools:
            name = model_names.get((st.name, t.name), f"(refused) {t.name}")
            hints = hints_text(t.annotations)
            line = (t.description.strip().splitlines() or [""])[0]
            click.echo(f"  {name}{f' [{hints}]' if hints else ''}  {line}".rstrip())
    for error in toolset.errors:
        if ": unavailable: " not in error:
            click.echo(f"error: {error}")
    _exit_on_failed(statuses)


def _exit_on_failed(statuses: list[ServerStatus]) -> None:
    """One ``error:`` line (stderr) per server that failed to start or crashed, then exit 1."""
    failed = [st for st in statuses if st.state in ("crashed", "failed")]
    for st in failed:
        why = f": {st.error}" if st.error else ""
        click.echo(f"error: MCP server '{st.name}' {st.state}{why}", err=True)
    if failed:
        click.get_current_context().exit(1)


@mcp_group.command("call")
@click.argument("server")
@click.argument("tool")
@click.argument("arguments", default="{}")
@click.option("--timeout", type=float, default=None, help="Seconds before the call fails.")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Repository root (default: found from the current folder).",
)
def call_command(
    server: str, tool: str, arguments: str, timeout: float | None, root: Path | None
) -> None:
    """Call TOOL of SERVER with ARGUMENTS (a JSON object) and print the result.

    Exit code 1 when the tool reports an error. No permission check: this is the user's own
    debugging command, not an agent's call.
    """
    from harness.mcp.config import McpError
    from harness.mcp.tools import render_result

    try:
        args = json.loads(arguments)
    except ValueError as exc:
        raise click.ClickException(f"ARGUMENTS is not valid JSON: {exc}") from exc
    if not isinstance(args, dict):
        raise click.ClickException("ARGUMENTS must be a JSON object")
    manager = open_manager(root or find_root(Path.cwd()))
    try:
        result = manager.call_tool(server, tool, args, timeout_s=timeout)
    except McpError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        manager.close()
    out = render_result(result)
    click.echo(out.content)
    if out.is_error:
        click.get_current_context().exit(1)
