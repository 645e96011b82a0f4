"""Team settings: ``.team/settings.json`` with ``TEAMCTL_SETTINGS`` merged on top
(docs/ARCHITECTURE.md, "Settings").

Every key is optional and every model forbids unknown keys, so a typo is an error that names the
key and the file. Values are frozen: settings are read once per command or runtime start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from actors.errors import TeamError
from harness.settings import HookEvent, HookMatcher, PermissionSettings, SandboxSettings
from teamctl_base.models import Frozen

SETTINGS_ENV = "TEAMCTL_SETTINGS"
MODEL_ENV = "TEAMCTL_MODEL"


class _Strict(Frozen):
    model_config = ConfigDict(
        **Frozen.model_config, populate_by_name=True, use_attribute_docstrings=True
    )


class ModelSettings(_Strict):
    """Which model each role uses."""

    lead: str = "claude-opus-4-8"
    """Model for the lead."""
    teammate: str = "claude-sonnet-4-6"
    """Model for teammates."""
    fallback: str | None = None
    """Model to switch to after repeated overload (529) errors; None = no fallback."""
    max_tokens: int = Field(default=8000, ge=1)
    """Output token cap per model call (raised once automatically on truncation)."""


class ApprovalSettings(_Strict):
    """Who answers permission questions and reviews plans."""

    permissions: Literal["human", "lead", "deny"] = "human"
    """Who answers teammates' ``ask`` permissions: a person (``teamctl run``'s console or
    ``teamctl approve``; a headless run refuses at once unless ``--approvals human``), the lead,
    or nobody (``deny``). The lead's own asks always go to a person."""
    plans: Literal["lead", "human"] = "lead"
    """Reviewer of submitted plans."""
    timeout_s: float = Field(default=300.0, gt=0)
    """Seconds to wait for an approval before it becomes a denial."""


class TeamSettings(_Strict):
    """Team size and teammate lifecycle."""

    max_teammates: int = Field(default=8, ge=1)
    """Most teammates alive at once."""
    idle_timeout_s: float | None = Field(default=None, gt=0)
    """Seconds an idle teammate waits before stopping; None = never."""
    worktree_per_task: bool = False
    """Give every claimed task its own git worktree."""
    restart: Literal["never", "on-crash"] = "on-crash"
    """Whether the supervisor restarts a crashed teammate from its transcript."""
    task_reminders: int | None = Field(default=2, ge=0)
    """Times a teammate that ends its turn while holding an unfinished task is reminded of it
    (``complete_task``, or ``release_task`` with what blocks it); when it ends one more turn
    still holding it, the task is released (``abandoned``) and the lead told. None = never:
    the teammate keeps the task."""
    stall_timeout_s: float | None = Field(default=600.0, gt=0)
    """Seconds a teammate's turn may go without finishing a step (a model call and its tools)
    before the teammate is marked ``stalled`` and the lead told; None = never."""
    max_repeated_tool_calls: int | None = Field(default=3, ge=2)
    """The same tool call (name and input) this many times in a row stops the teammate's turn,
    marks it ``stalled`` and tells the lead; None = never."""
    disk_full_grace_s: float | None = Field(default=30.0, gt=0)
    """Seconds a headless run waits for space after the disk fills up before it stops, the team
    paused (exit code 5); None = wait like the console does."""


class MailboxSettings(_Strict):
    """Inbox batching and retention."""

    batch_max_messages: int = Field(default=50, ge=1)
    """Most messages taken into one model call."""
    cur_retention_days: float = Field(default=7.0, ge=0)
    """Acked messages older than this are pruned from ``cur/``."""


class McpServer(_Strict):
    """An MCP server, in the shape of ``.mcp.json`` entries."""

    type: Literal["stdio", "sse", "http"] = "stdio"
    """Transport."""
    command: str | None = None
    """Program to start (stdio)."""
    args: tuple[str, ...] = ()
    """Arguments for ``command``."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for ``command``."""
    url: str | None = None
    """Server URL (sse, http)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers (sse, http)."""

    @model_validator(mode="after")
    def _endpoint(self) -> McpServer:
        if self.type == "stdio" and not self.command:
            raise ValueError("a stdio MCP server needs `command`")
        if self.type != "stdio" and not self.url:
            raise ValueError(f"an {self.type} MCP server needs `url`")
        return self


class Settings(_Strict):
    """The whole settings file. Every key is optional."""

    models: ModelSettings = ModelSettings()
    """Models per role."""
    permissions: PermissionSettings = PermissionSettings()
    """Permission rules and default mode."""
    approvals: ApprovalSettings = ApprovalSettings()
    """Approval routing."""
    hooks: dict[HookEvent, tuple[HookMatcher, ...]] = Field(default_factory=dict)
    """Command hooks per hook event."""
    team: TeamSettings = TeamSettings()
    """Team size and lifecycle."""
    mailbox: MailboxSettings = MailboxSettings()
    """Inbox batching and retention."""
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict, alias="mcpServers")
    """MCP servers by name."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables set for shell commands, background jobs and hooks (Claude Code's
    ``env`` key)."""
    sandbox: SandboxSettings = SandboxSettings()
    """Bubblewrap sandbox for ``bash``: ``enabled`` (``"auto"``/true/false), ``network``,
    ``extra_writable`` (see ``harness.shell.sandbox``)."""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON with the file's key names."""
        return self.model_dump(mode="json", by_alias=True)


class SettingsError(TeamError):
    """A settings file that cannot be read or does not match the schema."""


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "(top level)"
        if error["type"] == "extra_forbidden":
            parts.append(f"unknown key {key!r}")
        else:
            parts.append(f"{key}: {error['msg']}")
    return "; ".join(parts)


def parse_settings(raw: Mapping[str, Any], source: str) -> Settings:
    """Validate one settings object; ``SettingsError`` names the file and the key."""
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        raise SettingsError(f"settings {source}: {_describe(exc)}") from exc


def _read_file(path: Path) -> dict[str, Any]:
    from mailboxes.fsutil import BadJson, strict_loads

    try:
        value = strict_loads(path.read_bytes())
    except OSError as exc:
        raise SettingsError(f"settings {path}: cannot read: {exc.strerror}") from exc
    except BadJson as exc:
        raise SettingsError(f"settings {path}: {exc}") from exc
    if not isinstance(value, dict):
        raise SettingsError(f"settings {path}: must be a JSON object")
    return value


def merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge ``top`` onto ``base``: objects merge key by key, anything else is replaced."""
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            merged[key] = merge(below, value)
        else:
            merged[key] = value
    return merged


def _has_path(raw: Mapping[str, Any], loc: tuple[int | str, ...]) -> bool:
    node: Any = raw
    for part in loc:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def load_settings(path: Path, environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``path`` (missing file = defaults), ``TEAMCTL_SETTINGS`` merged on top, and
    ``TEAMCTL_MODEL`` overriding every model."""
    env = os.environ if environ is None else environ
    base: dict[str, Any] = _read_file(path) if path.exists() else {}
    top: dict[str, Any] = {}
    extra = env.get(SETTINGS_ENV)
    if extra:
        top = _read_file(Path(extra))
    try:
        settings = Settings.model_validate(merge(base, top))
    except ValidationError as exc:
        # Name the file the bad key came from (the env file wins where both have it).
        first = exc.errors()[0]["loc"]
        source = f"{extra} (from {SETTINGS_ENV})" if extra and _has_path(top, first) else path
        raise SettingsError(f"settings {source}: {_describe(exc)}") from exc
    model = env.get(MODEL_ENV)
    if model:
        models = settings.models.model_copy(
            update={"lead": model, "teammate": model, "fallback": model}
        )
        settings = settings.model_copy(update={"models": models})
    return settings


def default_settings_json() -> str:
    """The settings file ``teamctl init`` writes: every default, spelled out."""
    import json

    return json.dumps(Settings().to_json(), indent=2) + "\n"
