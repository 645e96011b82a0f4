"""Team settings: the scopes Claude Code users have (``~/.claude/settings.json``,
``.claude/settings.json``, ``.claude/settings.local.json``), then ``.team/settings.json``, then
``$TEAMCTL_SETTINGS``, merged by ``harness.settings`` (docs/ARCHITECTURE.md, "Settings").

Every key is optional. Each file is checked on its own, so an error names the file the bad key is
in: in teamctl's own files every model forbids unknown keys (a typo is an error); in Claude
Code's files a key teamctl does not know is a warning. Warnings travel with the settings
(``LoadedSettings.warnings``) for the command to print once. Values are frozen: settings are read
once per command or runtime start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from actors.backend import BACKEND_ENV as BACKEND_ENV  # re-exported
from actors.backend import NatsBackend as NatsBackend  # re-exported
from actors.backend import backend_setting
from actors.backend import parse_backend as parse_backend  # re-exported
from actors.errors import TeamError
from harness.settings import SETTINGS_ENV as SETTINGS_ENV  # re-exported
from harness.settings import (
    HookEvent,
    HookMatcher,
    HookSource,
    PermissionSettings,
    RuleSource,
    SandboxSettings,
    SettingsFile,
    SettingsFileError,
    adapt,
    merge_layers,
    read_settings_file,
    settings_files,
)
from harness.settings import merge as merge  # re-exported
from harness.shell.environment import CommandEnv, CommandEnvSettings
from teamctl_base.models import Frozen

MODEL_ENV = "TEAMCTL_MODEL"


class _Strict(Frozen):
    model_config = ConfigDict(**Frozen.model_config, populate_by_name=True)


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
    worktree_remote: str | None = None
    """The git remote a task's worktree branch is pushed to when the task completes, so that
    ``teamctl worktree merge`` in another clone can fetch it (docs/SCALE-OUT.md, "Code across
    hosts"). None = on the file backend, not pushed; on a backend other hosts join, the remote
    the main checkout's branch tracks, else ``origin``."""
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
    notify_window_s: float = Field(default=0.0, ge=0)
    """Seconds the lead waits after a teammate's status notice (a completed task) for more to
    arrive, so that they reach it as one message; it is then woken only if no teammate is still
    at work (docs/ARCHITECTURE.md, "Fewer model calls"). 0 = look at once (the default: held
    notices are looked at again whenever the board changes, so no window is needed)."""
    max_cost_usd: float | None = Field(default=None, gt=0)
    """Team budget in USD over the whole journal (every run and resume): once the recorded
    cost (``teamctl cost``) reaches it, no agent starts another model call and a headless run
    stops, the team paused (exit code 3); None = no budget."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Team budget in tokens (input, output, cache reads and writes, over the whole journal),
    enforced like ``max_cost_usd``; None = no budget."""
    max_turns_per_task: int | None = Field(default=None, ge=1)
    """Model calls that may be made on one task (every call of an agent while it holds the
    task, over all its claims): the agent holding it makes no more; None = no limit."""
    max_tokens_per_turn: int | None = Field(default=None, ge=1)
    """Tokens (input, output, cache reads and writes) one agent may spend in one turn (from the
    message that opened it until the model stops) before it makes no more model calls; None =
    no limit."""
    verify_timeout_s: float = Field(default=600.0, gt=0)
    """Seconds a task's ``verify`` command may run (at ``complete_task`` and on a worktree's
    merge result) before it is killed and counted as failed."""
    cpu_scheduling: Literal["batch", "normal"] = "batch"
    """Linux CPU scheduling of the team's processes (``teamctl run``, ``resume``, ``join``) and
    of what they start: ``batch`` (``SCHED_BATCH``: a woken team process does not preempt a
    running one, which keeps many processes on few cores from interrupting each other) or
    ``normal`` (the default policy). A policy set from outside (``chrt``) is kept either way."""
    commit_service: bool = True
    """Whether the team's runtime processes on one host commit their claims, completions and
    status changes through one of them (the first to start serves the others on a Unix
    socket), so that many processes share each journal commit instead of queuing for the
    journal's lock (docs/ARCHITECTURE.md, "One commit queue per host"). File backend only."""
    max_workflow_steps: int = Field(default=200, ge=1)
    """``agent()`` calls one workflow run may make (recorded ones replayed by a resume count
    too); one more fails the run with a clear message (docs/ARCHITECTURE.md, "Workflows")."""


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
    """Extra environment for ``command`` (see ``harness.mcp.config.McpServerConfig``)."""
    cwd: str | None = None
    """Working directory for ``command`` (relative to the repository root)."""
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

    backend: str = "file"
    """Where the team's journal and liveness live: ``"file"`` (``.team/``) or
    ``nats://HOST:PORT[,HOST:PORT…]/TEAM`` (JetStream; mailboxes and wake-ups stay files for
    now). Read from ``.team/settings.json``; ``$TEAMCTL_BACKEND`` overrides it (docs/SCALE-OUT.md)."""
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
    command_env: CommandEnvSettings = CommandEnvSettings()
    """Variables kept from shell commands, background jobs, hooks and MCP servers: ``secret``
    (names or patterns, on top of the model credentials, which are always withheld) and ``pass``
    (passed on after all); see ``harness.shell.environment``."""
    bash_sandbox: SandboxSettings = SandboxSettings()
    """Bubblewrap sandbox for ``bash``: ``enabled`` (``"auto"``/true/false), ``network``,
    ``extra_writable`` (see ``harness.shell.sandbox``). Not ``sandbox``: that is Claude Code's
    block, mapped onto this one where it means the same (``harness.settings.adapt``)."""

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str) -> str:
        parse_backend(value)
        return value

    def to_json(self) -> dict[str, Any]:
        """Plain JSON with the file's key names."""
        return self.model_dump(mode="json", by_alias=True)

    def child_env(self) -> CommandEnv:
        """What shell commands, jobs, hooks and MCP servers get: ``env`` set, ``command_env``
        secrets and the model credentials removed (``harness.shell.environment``)."""
        return CommandEnv.from_settings(self.env, self.command_env)


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


OUR_KEYS = frozenset(
    {name for name in Settings.model_fields}
    | {f.alias for f in Settings.model_fields.values() if f.alias}
)
"""The top-level keys teamctl reads (anything else in a Claude Code file is a warning)."""


def parse_settings(raw: Mapping[str, Any], source: str) -> Settings:
    """Validate one settings object of teamctl's own (a scenario's, a test's); ``SettingsError``
    names ``source`` and the key."""
    file = SettingsFile("team", Path(source))
    adapted, _ = adapt(raw, file, ours=OUR_KEYS)
    try:
        return Settings.model_validate(adapted)
    except ValidationError as exc:
        raise SettingsError(f"settings {source}: {_describe(exc)}") from exc


@dataclass(frozen=True)
class LoadedSettings:
    """The merged settings with where each part came from, and the warnings to print once."""

    settings: Settings
    files: tuple[tuple[SettingsFile, bool], ...]
    """Every scope's file, lowest precedence first, and whether it exists (was read)."""
    rules: tuple[RuleSource, ...]
    """Each permission rule with the file it came from."""
    hooks: tuple[HookSource, ...]
    """Each hook command with its event, matcher and file."""
    warnings: tuple[str, ...]
    """One line per Claude Code key teamctl does not implement (names the key and the file)."""
    bypass_disabled_by: SettingsFile | None = None
    """The file whose ``disableBypassPermissionsMode: "disable"`` is in effect."""

    def check_mode(self, mode: str | None) -> None:
        """Refuse ``bypassPermissions`` when a settings file disables it (one line)."""
        if mode == "bypassPermissions" and self.bypass_disabled_by is not None:
            raise SettingsError(
                f"--permission-mode bypassPermissions is disabled: "
                f'permissions.disableBypassPermissionsMode is "disable" in '
                f"{self.bypass_disabled_by.label}"
            )


def _team_root(path: Path) -> Path | None:
    return path.parent.parent if path.parent.name == ".team" else None


def load_scoped_settings(
    path: Path, environ: Mapping[str, str] | None = None, *, root: Path | None = None
) -> LoadedSettings:
    """The settings of every scope merged, ``path`` being ``.team/settings.json`` (missing file =
    defaults). ``root``: the repository whose ``.claude/`` files are read (default: the folder
    above ``.team/`` when ``path`` is in one; else none). ``HOME`` and ``TEAMCTL_SETTINGS`` come
    from ``environ`` (default ``os.environ``); ``TEAMCTL_MODEL`` overrides every model."""
    env = os.environ if environ is None else environ
    root = root if root is not None else _team_root(path)
    files = settings_files(root, path, env)
    layers: list[tuple[SettingsFile, dict[str, Any]]] = []
    warnings: list[str] = []
    present: list[tuple[SettingsFile, bool]] = []
    for file in files:
        exists = file.scope == "env" or file.path.exists()
        present.append((file, exists))
        if not exists:
            continue
        try:
            raw = read_settings_file(file)
            adapted, warned = adapt(
                raw, file, ours=OUR_KEYS, root=root or path.parent, home=env.get("HOME")
            )
            try:  # each file on its own, so that an error names the file the key is in
                Settings.model_validate(adapted)
            except ValidationError as exc:
                raise SettingsError(f"settings {file.label}: {_describe(exc)}") from exc
        except (SettingsFileError, SettingsError) as exc:
            if not file.claude_owned:
                raise SettingsError(str(exc)) from exc
            # Claude Code skips a settings file with errors, with a warning: so do we.
            reason = str(exc).removeprefix(f"settings {file.label}: ")
            warnings.append(
                f"{file.label}: skipped, as Claude Code skips a file with errors: {reason}"
            )
            continue
        layers.append((file, adapted))
        warnings += warned
    merged, where = merge_layers(layers)
    perms = merged.get("permissions") or {}
    if (
        perms.get("defaultMode") == "bypassPermissions"
        and where.bypass_disabled is not None
        and where.default_mode is not None
    ):
        raise SettingsError(
            f"settings {where.bypass_disabled.label}: permissions.disableBypassPermissionsMode is "
            f'"disable", but permissions.defaultMode is bypassPermissions in '
            f"{where.default_mode.label}"
        )
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:  # only what no file shows alone (an MCP server split in two)
        names = ", ".join(file.label for file, _ in layers)
        raise SettingsError(f"settings merged from {names}: {_describe(exc)}") from exc
    model = env.get(MODEL_ENV)
    if model:
        models = settings.models.model_copy(
            update={"lead": model, "teammate": model, "fallback": model}
        )
        settings = settings.model_copy(update={"models": models})
    return LoadedSettings(
        settings=settings,
        files=tuple(present),
        rules=tuple(where.rules),
        hooks=tuple(where.hooks),
        warnings=tuple(warnings),
        bypass_disabled_by=where.bypass_disabled if settings.permissions.bypass_disabled else None,
    )


def load_settings(path: Path, environ: Mapping[str, str] | None = None) -> Settings:
    """The merged settings of every scope (``load_scoped_settings``), warnings dropped."""
    return load_scoped_settings(path, environ).settings


_LEFT_TO_THE_SCOPES = (("permissions", "defaultMode"), ("bash_sandbox", "enabled"))
"""Keys ``teamctl init`` leaves out: Claude Code's files (``defaultMode``, ``sandbox.enabled``)
may set them, and a default spelled out in ``.team/settings.json`` would override them."""


def default_settings_json() -> str:
    """The settings file ``teamctl init`` writes: every default spelled out, except the keys a
    Claude Code settings file may set (``_LEFT_TO_THE_SCOPES``)."""
    import json

    raw = Settings().to_json()
    raw["permissions"].pop("disableBypassPermissionsMode", None)
    for section, key in _LEFT_TO_THE_SCOPES:
        raw[section].pop(key, None)
    return json.dumps(raw, indent=2) + "\n"


def team_backend(path: Path, environ: Mapping[str, str] | None = None) -> NatsBackend | None:
    """The team's backend (``parse_backend``): ``$TEAMCTL_BACKEND`` when set, else the top-level
    ``backend`` of ``path`` (``.team/settings.json``), else ``"file"``. Reads only that key, so a
    command that reads no other setting is not stopped by an unrelated one; a settings file that
    is not JSON counts as ``"file"`` here (the commands that load settings report it). A bad value
    is one ``SettingsError`` line naming the setting and where it came from."""
    value, source = backend_setting(path, environ)
    if not isinstance(value, str):
        raise SettingsError(f"{source}: {value!r} is not a backend: use a string")
    try:
        return parse_backend(value)
    except ValueError as exc:
        raise SettingsError(f"{source}: {exc}") from None
