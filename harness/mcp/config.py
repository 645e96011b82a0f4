"""MCP server configuration: ``.mcp.json`` and ``mcpServers`` from settings, names, ``${VAR}``.

The file format is the one other agent tools use::

    {"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "${TZ:-UTC}"}},
        "docs": {"type": "http", "url": "https://example.test/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}}

Servers from settings override servers of the same name from ``.mcp.json``. ``${VAR}`` and
``${VAR:-default}`` are expanded in ``command``, ``args``, ``env``, ``url`` and ``headers`` when the
server is started (not when the file is read), so one server with a missing variable does not stop
the others; the error names the server, the variable and the key that uses it. (Claude Code
refuses the whole file for a missing variable; we fail only that server.)

Entries as found in the wild (``load_mcp_config``): a key we do not know (``description``,
``disabled``, ...) is ignored with a warning, as Claude Code ignores it; an entry that is not a
valid server (no ``command``, a ``url`` without ``type``, a wrong type) disables that server
only, with a one-line reason naming it. Only a file that is not JSON at all is an error.

This module imports nothing from the ``mcp`` SDK: reading configuration stays cheap.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import HarnessError
from teamctl_base.models import Frozen

MCP_JSON = ".mcp.json"
TOOL_PREFIX = "mcp__"
MAX_TOOL_NAME = 64
_NAME_OK = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpError(HarnessError):
    """Base of MCP errors: configuration, connection, protocol and naming problems."""


class McpConfigError(McpError, ValueError):
    """A server entry that does not parse, or a variable it uses that is not set."""


class McpServerConfig(Frozen):
    """One MCP server, in the shape of ``.mcp.json`` entries (``extra="forbid"``)."""

    model_config = ConfigDict(**Frozen.model_config)

    type: Literal["stdio", "http", "sse"] = "stdio"
    """Transport: ``stdio`` (a child process), ``http`` (streamable HTTP) or ``sse`` (legacy)."""
    command: str | None = None
    """Program to start (stdio)."""
    args: tuple[str, ...] = ()
    """Arguments for ``command``."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for ``command``, on top of what every server gets: this process's
    environment without the model credentials and the secrets of the settings, the settings'
    ``env`` and ``CLAUDE_PROJECT_DIR`` (see ``harness.shell.environment``)."""
    cwd: str | None = None
    """Working directory for ``command`` (relative to the repository root; default: the root)."""
    url: str | None = None
    """Server URL (http, sse)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers (http, sse)."""

    @model_validator(mode="after")
    def _endpoint(self) -> McpServerConfig:
        if self.type == "stdio" and not self.command:
            if self.url:
                raise ValueError('a server with `url` needs `type` "http" or "sse"')
            raise ValueError("a stdio MCP server needs `command`")
        if self.type != "stdio" and not self.url:
            raise ValueError(f"an {self.type} MCP server needs `url`")
        return self

    def expanded(self, server: str, environ: Mapping[str, str] | None = None) -> McpServerConfig:
        """A copy with ``${VAR}`` / ``${VAR:-default}`` expanded; ``McpConfigError`` names the
        server, the variable and the key when a variable without default is not set."""
        env = os.environ if environ is None else environ

        def sub(text: str, where: str) -> str:
            def one(m: re.Match[str]) -> str:
                name, default = m.group(1), m.group(2)
                if name in env:
                    return env[name]
                if default is not None:
                    return default
                raise McpConfigError(
                    f"MCP server {server!r}: environment variable {name} is not set "
                    f"(used in {where}); set it or write ${{{name}:-default}}"
                )

            return _VAR.sub(one, text)

        return self.model_copy(
            update={
                "command": sub(self.command, "command") if self.command else None,
                "args": tuple(sub(a, f"args[{i}]") for i, a in enumerate(self.args)),
                "env": {k: sub(v, f"env.{k}") for k, v in self.env.items()},
                "url": sub(self.url, "url") if self.url else None,
                "headers": {k: sub(v, f"headers.{k}") for k, v in self.headers.items()},
            }
        )


class McpOptions(Frozen):
    """How the harness runs MCP servers (timeouts, restarts, the deferred-loading budget)."""

    model_config = ConfigDict(**Frozen.model_config)

    init_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds to start a server and finish the MCP handshake (and first tool listing)."""
    call_timeout_s: float = Field(default=120.0, gt=0)
    """Seconds a tool call or resource read may take before it fails as a tool error."""
    max_restarts: int = Field(default=3, ge=0)
    """Restarts allowed per server after a crash or a failed start; then it stays failed."""
    tool_budget_chars: int = Field(default=40_000, ge=0)
    """When all MCP tool specs (name, description, schema as JSON) exceed this many characters,
    only a catalog goes into the prompt and ``search_tools`` loads full schemas on demand."""
    max_description_chars: int = Field(default=2048, ge=16)
    """Longer tool descriptions from a server are cut to this length."""


_KNOWN_KEYS = frozenset(McpServerConfig.model_fields)


@dataclass(frozen=True)
class McpConfig:
    """Every configured server: the valid ones, the disabled ones (name → why, one line) and
    warnings about ignored keys."""

    servers: dict[str, McpServerConfig] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """Every configured server name (valid or not), sorted."""
        return sorted({*self.servers, *self.invalid})

    def over(self, below: McpConfig) -> McpConfig:
        """This configuration on top of ``below``: a server named here replaces its namesake."""
        mine = {*self.servers, *self.invalid}
        return McpConfig(
            servers={**{k: v for k, v in below.servers.items() if k not in mine}, **self.servers},
            invalid={**{k: v for k, v in below.invalid.items() if k not in mine}, **self.invalid},
            warnings=(*below.warnings, *self.warnings),
        )


def _parse_servers(raw: Any, source: str) -> McpConfig:
    if raw is None:
        return McpConfig()
    if not isinstance(raw, Mapping):
        raise McpConfigError(f"{source}: `mcpServers` must be an object of servers by name")
    servers: dict[str, McpServerConfig] = {}
    invalid: dict[str, str] = {}
    warnings: list[str] = []
    for name, entry in raw.items():
        label = f"{source}: MCP server {name!r}"
        if not isinstance(name, str) or not name.strip():
            invalid[str(name)] = f"{source}: an MCP server needs a non-empty name; disabled"
            continue
        if not isinstance(entry, Mapping):
            invalid[name] = f"{label}: expected an object; disabled"
            continue
        unknown = sorted(str(k) for k in entry if k not in _KNOWN_KEYS)
        if unknown:
            warnings.append(f"{label}: ignoring unknown key(s) {', '.join(unknown)}")
        try:
            known = {k: v for k, v in entry.items() if k in _KNOWN_KEYS}
            servers[name] = McpServerConfig.model_validate(known)
        except ValidationError as exc:
            parts = []
            for err in exc.errors(include_url=False):
                msg = err["msg"].removeprefix("Value error, ")
                key = ".".join(str(p) for p in err["loc"])
                parts.append(f"{key}: {msg}" if key else msg)
            invalid[name] = f"{label}: {'; '.join(parts)}; disabled"
    return McpConfig(servers, invalid, tuple(warnings))


def read_mcp_json(path: Path) -> McpConfig:
    """The servers of one ``.mcp.json`` file (a missing file has none); ``McpConfigError`` only
    when the file cannot be read or is not a JSON object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return McpConfig()
    except OSError as exc:
        raise McpConfigError(f"{path}: cannot read: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise McpConfigError(f"{path}: expected an object with `mcpServers`")
    return _parse_servers(data.get("mcpServers"), str(path))


def load_mcp_config(root: Path, settings_servers: Mapping[str, Any] | None = None) -> McpConfig:
    """Servers from ``<root>/.mcp.json`` and then ``settings_servers`` (the ``mcpServers`` value
    of the settings, raw JSON or already-validated models dumped to JSON); later ones win."""
    config = read_mcp_json(root / MCP_JSON)
    if settings_servers:
        plain = {
            k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v
            for k, v in settings_servers.items()
        }
        config = _parse_servers(plain, "settings mcpServers").over(config)
    return McpConfig(
        dict(sorted(config.servers.items())), dict(sorted(config.invalid.items())), config.warnings
    )


def load_mcp_servers(
    root: Path, settings_servers: Mapping[str, Any] | None = None
) -> dict[str, McpServerConfig]:
    """The valid servers of ``load_mcp_config`` (disabled entries left out)."""
    return load_mcp_config(root, settings_servers).servers


# -- names -------------------------------------------------------------------------------------


def normalize_part(text: str) -> str:
    """One name part with only ``[a-zA-Z0-9_-]`` (others become ``_``; runs of ``_`` are collapsed
    and edge ``_`` dropped, so a part can never be mistaken for the ``__`` separator)."""
    out = _BAD_CHARS.sub("_", text)
    while "__" in out:
        out = out.replace("__", "_")
    return out.strip("_") or "unnamed"


def mcp_tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, normalised and cut to 64 characters."""
    name = f"{TOOL_PREFIX}{normalize_part(server)}__{normalize_part(tool)}"
    name = name[:MAX_TOOL_NAME]
    assert _NAME_OK.match(name), name
    return name


def assign_names(
    pairs: list[tuple[str, str]],
) -> tuple[dict[tuple[str, str], str], list[str]]:
    """Model-facing names for ``(server, tool)`` pairs, and one error per clash: pairs that would
    share a name after normalisation all get refused (none silently shadows another)."""
    by_name: dict[str, list[tuple[str, str]]] = {}
    for pair in pairs:
        by_name.setdefault(mcp_tool_name(*pair), []).append(pair)
    names: dict[tuple[str, str], str] = {}
    errors: list[str] = []
    for name, group in sorted(by_name.items()):
        if len(group) == 1:
            names[group[0]] = name
        else:
            who = ", ".join(f"{s!r}/{t!r}" for s, t in group)
            errors.append(
                f"MCP tools {who} all normalise to {name}; none of them is offered "
                "(rename a server in .mcp.json)"
            )
    return names, errors
