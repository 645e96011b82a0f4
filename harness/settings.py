"""Settings files as Claude Code users have them, and the sections the harness reads from them
(docs/ARCHITECTURE.md, "Settings").

Scopes, lowest precedence first (``settings_files``): ``~/.claude/settings.json`` (user),
``<repo>/.claude/settings.json`` (project), ``<repo>/.claude/settings.local.json`` (local),
``<repo>/.team/settings.json`` (team) and the file ``$TEAMCTL_SETTINGS`` names (env). Each file
is read (``read_settings_file``) and adapted (``adapt``): Claude Code keys teamctl does not
implement are dropped with one warning each; in the ``.claude/`` files (owned by Claude Code,
whose key set keeps growing) so is any key teamctl does not know, while in teamctl's own files
an unknown key is left in place for the schema to refuse. Then the files are merged
(``merge_layers``): permission rule lists, ``additionalDirectories`` and the bash sandbox's
``extra_writable`` concatenate, hooks concatenate per event, ``env`` and ``mcpServers`` merge by
name (the higher scope wins), anything else deep-merges with the higher scope winning. Deny
rules win over allow and ask rules wherever they come from (``harness.permissions.checks``).

The ``permissions`` and ``hooks`` sections have Claude Code's shape and key names, so a rule list
or a hook block can be pasted in. Models are strict (``extra="forbid"``) and frozen.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import ConfigDict, Field, field_validator, model_validator

from harness.errors import HarnessError
from teamctl_base.models import Frozen

PermissionMode = Literal["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"]

HookEvent = Literal[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "TeammateIdle",
    "TaskCreated",
    "TaskCompleted",
    "Notification",
    "SessionEnd",
    "SubagentStart",
    "PermissionRequest",
]
"""The hook events teamctl fires."""
HOOK_EVENTS: tuple[HookEvent, ...] = HookEvent.__args__  # type: ignore[attr-defined]

CLAUDE_HOOK_EVENTS: frozenset[str] = frozenset(
    {
        *HOOK_EVENTS,
        "Setup",
        "StopFailure",
        "PostCompact",
        "PostToolBatch",
        "PermissionDenied",
        "UserPromptExpansion",
        "Elicitation",
        "ElicitationResult",
        "InstructionsLoaded",
        "CwdChanged",
        "FileChanged",
        "ConfigChange",
        "WorktreeCreate",
        "WorktreeRemove",
        "MessageDisplay",
    }
)
"""Every hook event Claude Code documents; those teamctl never fires are accepted with a
warning."""

CLAUDE_HANDLER_TYPES = frozenset({"prompt", "agent", "http", "mcp_tool"})
"""Hook handler types besides ``command``: accepted with a warning and never run."""

CLAUDE_SETTINGS_KEYS: frozenset[str] = frozenset(
    {
        "advisorModel", "agent", "agentPushNotifEnabled", "allowAllClaudeAiMcps",
        "allowedChannelPlugins", "allowedHttpHookUrls", "allowedMcpServers",
        "allowManagedHooksOnly", "allowManagedMcpServersOnly", "allowManagedPermissionRulesOnly",
        "alwaysThinkingEnabled", "apiKeyHelper", "attribution", "autoCompactEnabled",
        "autoConnectIde", "autoInstallIdeExtension", "autoMemoryDirectory", "autoMemoryEnabled",
        "autoMode", "autoScrollEnabled", "autoUpdatesChannel", "availableModels",
        "awaySummaryEnabled", "awsAuthRefresh", "awsCredentialExport", "axScreenReader",
        "blockedMarketplaces", "channelsEnabled", "claudeMd", "claudeMdExcludes",
        "cleanupPeriodDays", "companyAnnouncements", "defaultShell", "deniedMcpServers",
        "disableAgentView", "disableAllHooks", "disableArtifact", "disableAutoMode",
        "disableBundledSkills", "disableClaudeAiConnectors", "disableDeepLinkRegistration",
        "disabledMcpjsonServers", "disableRemoteControl", "disableSkillShellExecution",
        "disableWorkflows", "editorMode", "effortLevel", "enableAllProjectMcpServers",
        "enabledMcpjsonServers", "enabledPlugins", "enforceAvailableModels",
        "extraKnownMarketplaces", "fallbackModel", "fastMode", "fastModePerSessionOptIn",
        "feedbackSurveyRate", "fileCheckpointingEnabled", "fileSuggestion", "footerLinksRegexes",
        "forceLoginMethod", "forceLoginOrgUUID", "forceRemoteSettingsRefresh", "gcpAuthRefresh",
        "httpHookAllowedEnvVars", "includeCoAuthoredBy", "includeGitInstructions",
        "inputNeededNotifEnabled", "language", "leftArrowOpensAgents", "managedMcpServers",
        "minimumVersion", "model", "modelOverrides", "otelHeadersHelper", "outputStyle",
        "parentSettingsBehavior", "plansDirectory", "pluginConfigs", "pluginSuggestionMarketplaces",
        "pluginTrustMessage", "policyHelper", "preferredNotifChannel", "prefersReducedMotion",
        "prUrlTemplate", "remoteControlAtStartup", "requiredMaximumVersion",
        "requiredMinimumVersion", "respectGitignore", "respondToBashCommands",
        "showClearContextOnPlanAccept", "showThinkingSummaries", "showTurnDuration", "skillListingBudgetFraction",
        "skillListingMaxDescChars", "skillOverrides", "skippedMarketplaces", "skippedPlugins",
        "skipDangerousModePermissionPrompt", "skipWebFetchPreflight", "spinnerTipsEnabled",
        "spinnerTipsOverride", "spinnerVerbs", "sshConfigs", "sshHostAllowlist", "statusLine",
        "strictKnownMarketplaces", "strictPluginOnlyCustomization", "subagentStatusLine",
        "syntaxHighlightingDisabled", "teammateMode", "terminalProgressBarEnabled", "theme", "tui",
        "useAutoModeDuringPlan", "verbose", "viewMode", "voice", "voiceEnabled",
        "wheelScrollAccelerationEnabled", "workflowKeywordTriggerEnabled", "worktree",
        "wslInheritsWindowsSettings",
    }
)  # fmt: skip
"""Top-level keys of Claude Code's settings (its settings reference) that teamctl does not
implement: accepted with one warning each. ``$schema`` is accepted silently (it only names the
schema); ``permissions``, ``hooks``, ``env`` and ``sandbox`` are read (see ``adapt``)."""

CLAUDE_PERMISSION_KEYS = frozenset({"disableAutoMode"})
"""Keys of Claude Code's ``permissions`` object that teamctl does not implement."""

CLAUDE_HANDLER_KEYS = frozenset(
    {"type", "command", "timeout", "async", "asyncRewake", "shell", "if", "statusMessage", "args",
     "once"}
)  # fmt: skip
"""Keys of a Claude Code command hook handler (all read by ``HookCommand``)."""

HARNESS_KEYS = frozenset({"permissions", "hooks", "env", "bash_sandbox", "mcpServers"})
"""Top-level keys the harness reads; the team settings add theirs (``adapt``'s ``ours``)."""

SETTINGS_ENV = "TEAMCTL_SETTINGS"
"""Names the highest-precedence settings file."""

Scope = Literal["user", "project", "local", "team", "env"]


class _Strict(Frozen):
    model_config = ConfigDict(**Frozen.model_config, populate_by_name=True)


class PermissionSettings(_Strict):
    """Permission rules (``Tool`` or ``Tool(specifier)``) and the default mode."""

    default_mode: PermissionMode = Field(default="default", alias="defaultMode")
    """Mode when nothing overrides it (``--permission-mode`` does; a pending plan forces plan)."""
    allow: tuple[str, ...] = ()
    """Rules allowed without asking (unless an ask or deny rule also matches)."""
    ask: tuple[str, ...] = ()
    """Rules that need an approval (unless a deny rule also matches)."""
    deny: tuple[str, ...] = ()
    """Rules always refused, in every mode."""
    additional_directories: tuple[str, ...] = Field(default=(), alias="additionalDirectories")
    """More directories the agents may work in besides the repository, as absolute paths (the
    loader resolves ``~`` and paths relative to the repository root)."""
    disable_bypass_permissions_mode: Literal["disable"] | None = Field(
        default=None, alias="disableBypassPermissionsMode"
    )
    """``"disable"``: ``bypassPermissions`` can be neither the default mode nor chosen with
    ``--permission-mode`` (an error that names the file)."""

    @field_validator("allow", "ask", "deny")
    @classmethod
    def _rules_parse(cls, rules: tuple[str, ...]) -> tuple[str, ...]:
        from harness.permissions.rules import parse_rules

        parse_rules(rules)
        return rules

    @model_validator(mode="after")
    def _bypass_allowed(self) -> PermissionSettings:
        if self.default_mode == "bypassPermissions" and self.bypass_disabled:
            raise ValueError(
                'defaultMode is bypassPermissions but disableBypassPermissionsMode is "disable"'
            )
        return self

    @property
    def bypass_disabled(self) -> bool:
        return self.disable_bypass_permissions_mode == "disable"


class HookCommand(_Strict):
    """One command hook: JSON on stdin; exit 0 proceeds, exit 2 blocks with stderr as reason.
    Claude Code's handler keys are all accepted (``if``, ``async``, ``statusMessage``, ...)."""

    type: Literal["command"] = "command"
    """Hook kind (only ``command`` hooks run; Claude Code's other kinds are skipped with a
    warning when the file is read)."""
    command: str = Field(min_length=1)
    """Shell command, run with ``/bin/sh -c`` in the agent's working directory (with ``args``,
    Claude Code's exec form, the program and its arguments, each quoted)."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds before the hook's process group is killed (a non-blocking error). Claude Code's
    default is 600 s; ours is shorter on purpose: a stuck hook holds up an agent of the team."""
    if_rule: str | None = Field(default=None, alias="if")
    """A permission rule (``Bash(git *)``): the hook runs only for tool calls it matches, and
    never on events that are not about a tool call (Claude Code's ``if``)."""
    run_async: bool = Field(default=False, alias="async")
    """Claude Code runs the hook in the background without waiting for it."""
    async_rewake: bool = Field(default=False, alias="asyncRewake")
    """Claude Code: in the background, waking the model when it exits 2 (implies ``async``)."""
    shell: Literal["bash"] = "bash"
    """Shell interpreter (``powershell`` handlers are skipped with a warning when read)."""
    status_message: str | None = Field(default=None, alias="statusMessage")
    """Spinner text Claude Code shows while the hook runs (not shown by teamctl)."""
    once: bool = False
    """Claude Code (skills and agents front matter): run only once per session."""
    args: tuple[str, ...] | None = None
    """Claude Code's exec form: ``command`` is the program and these its arguments, passed as
    they are (folded into ``command``, each quoted for the shell)."""

    @field_validator("if_rule")
    @classmethod
    def _if_parses(cls, rule: str | None) -> str | None:
        if rule is not None:
            from harness.permissions.rules import Rule

            Rule.parse(rule)
        return rule

    @model_validator(mode="before")
    @classmethod
    def _exec_form(cls, raw: Any) -> Any:
        if isinstance(raw, Mapping) and isinstance(raw.get("args"), list):
            command, args = raw.get("command"), raw["args"]
            if isinstance(command, str) and all(isinstance(a, str) for a in args):
                return {**raw, "command": shlex.join([command, *args]), "args": None}
        return raw


class HookMatcher(_Strict):
    """Hooks run when the matcher matches (the tool name for tool events)."""

    matcher: str = ""
    """Regex matched against the whole tool name or one of its aliases; empty or ``*``: all."""
    hooks: tuple[HookCommand, ...] = ()
    """Commands to run, in order."""


class HookSettings(_Strict):
    """The ``hooks`` section, as the harness runs it: matchers per event teamctl fires (the
    loader drops, with a warning, the events Claude Code documents that teamctl never fires;
    any other name is an error)."""

    SessionStart: tuple[HookMatcher, ...] = ()
    """When an agent session starts or resumes."""
    UserPromptSubmit: tuple[HookMatcher, ...] = ()
    """Before a user prompt reaches the model (may block it or add context)."""
    PreToolUse: tuple[HookMatcher, ...] = ()
    """Before a tool runs (may block, ask, allow or rewrite the input)."""
    PostToolUse: tuple[HookMatcher, ...] = ()
    """After a tool succeeded (may add context, or block: the result becomes an error)."""
    PostToolUseFailure: tuple[HookMatcher, ...] = ()
    """After a tool failed."""
    Stop: tuple[HookMatcher, ...] = ()
    """When the agent is about to end its turn (may block to keep it going)."""
    SubagentStop: tuple[HookMatcher, ...] = ()
    """When a subagent is about to finish."""
    PreCompact: tuple[HookMatcher, ...] = ()
    """Before the context is compacted."""
    TeammateIdle: tuple[HookMatcher, ...] = ()
    """When a teammate goes idle."""
    TaskCreated: tuple[HookMatcher, ...] = ()
    """When a task is created on the board."""
    TaskCompleted: tuple[HookMatcher, ...] = ()
    """When a task is completed."""
    Notification: tuple[HookMatcher, ...] = ()
    """When the harness notifies the user (permission prompts, idle)."""
    SessionEnd: tuple[HookMatcher, ...] = ()
    """When an agent session ends (the agent stops)."""
    SubagentStart: tuple[HookMatcher, ...] = ()
    """When a subagent starts."""
    PermissionRequest: tuple[HookMatcher, ...] = ()
    """When a permission request is about to go to the approver (may allow or deny it)."""

    def for_event(self, event: HookEvent) -> tuple[HookMatcher, ...]:
        matchers: tuple[HookMatcher, ...] = getattr(self, event)
        return matchers

    @classmethod
    def parse(cls, raw: Any) -> HookSettings:
        """Validate the JSON value of the ``hooks`` key (``None`` means no hooks)."""
        return cls.model_validate(raw or {})


class SandboxSettings(_Strict):
    """The ``bash_sandbox`` section: run ``bash`` commands under bubblewrap
    (``harness.shell.sandbox``). Claude Code's ``sandbox`` block is mapped onto it where it means
    the same thing (``adapt``)."""

    enabled: Literal["auto"] | bool = "auto"
    """``"auto"``: sandbox when bubblewrap works on this machine, else run unsandboxed with a
    one-time notice; ``true``: required (commands are refused when it cannot run); ``false``: off."""
    network: bool = False
    """Let sandboxed commands reach the network (off: a private network namespace, loopback only)."""
    extra_writable: tuple[str, ...] = ()
    """More paths commands may write besides the agent's root and a private ``/tmp`` (relative
    paths are taken from the agent's root; missing paths are skipped)."""


# -- the files and their scopes -------------------------------------------------------------


class SettingsFileError(HarnessError):
    """A settings file that cannot be read or is not a JSON object (names the file)."""


@dataclass(frozen=True)
class SettingsFile:
    """One settings file of one scope. ``claude_owned``: Claude Code's file, where a key teamctl
    does not know is a warning, never an error."""

    scope: Scope
    path: Path

    @property
    def claude_owned(self) -> bool:
        return self.scope in ("user", "project", "local")

    @property
    def label(self) -> str:
        return f"{self.path} (from ${SETTINGS_ENV})" if self.scope == "env" else str(self.path)


CLAUDE_CONFIG_ENV = "CLAUDE_CONFIG_DIR"


def claude_user_dir(
    home: Path | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """Claude Code's user folder (``~/.claude``): ``home/.claude`` when ``home`` is given, else
    ``$CLAUDE_CONFIG_DIR`` as Claude Code honours it, else ``$HOME/.claude``; None without HOME."""
    if home is not None:
        return home / ".claude"
    env = os.environ if environ is None else environ
    if env.get(CLAUDE_CONFIG_ENV):
        return Path(env[CLAUDE_CONFIG_ENV])
    return Path(env["HOME"]) / ".claude" if env.get("HOME") else None


def settings_files(
    root: Path | None, team_file: Path | None, environ: Mapping[str, str]
) -> tuple[SettingsFile, ...]:
    """The settings files of every scope, lowest precedence first; missing ones included (the
    caller skips them), but the user file only when ``HOME`` is set and the env file only when
    ``$TEAMCTL_SETTINGS`` is. ``root`` is the repository (None: no ``.claude/`` files);
    ``team_file`` is ``.team/settings.json`` (None: ``root``'s)."""
    files: list[SettingsFile] = []
    user_dir = claude_user_dir(environ=environ)
    if user_dir is not None:
        files.append(SettingsFile("user", user_dir / "settings.json"))
    if root is not None:
        files.append(SettingsFile("project", root / ".claude" / "settings.json"))
        files.append(SettingsFile("local", root / ".claude" / "settings.local.json"))
        team_file = team_file or root / ".team" / "settings.json"
    if team_file is not None:
        files.append(SettingsFile("team", team_file))
    extra = environ.get(SETTINGS_ENV)
    if extra:
        files.append(SettingsFile("env", Path(extra)))
    return tuple(files)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_settings_file(file: SettingsFile) -> dict[str, Any]:
    """The file's JSON object; ``SettingsFileError`` (naming the file) when it cannot be read,
    is not strict JSON (duplicate keys, NaN) or is not an object."""
    try:
        text = file.path.read_bytes().decode("utf-8")
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except OSError as exc:
        raise SettingsFileError(f"settings {file.label}: cannot read: {exc.strerror}") from exc
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        reason = " ".join(str(exc).split())
        raise SettingsFileError(f"settings {file.label}: not valid JSON: {reason}") from exc
    if not isinstance(value, dict):
        raise SettingsFileError(f"settings {file.label}: must be a JSON object")
    return value


# -- adapting one file ------------------------------------------------------------------------


@dataclass
class _Adapter:
    file: SettingsFile
    root: Path | None
    home: str | None
    warnings: list[str] = field(default_factory=list)

    def warn(self, key: str, why: str) -> None:
        self.warnings.append(f"{self.file.label}: {key}: {why}")

    def not_implemented(self, key: str) -> None:
        self.warn(key, "a Claude Code setting teamctl does not implement (ignored)")

    def unknown(self, key: str) -> None:
        self.warn(key, "not a setting teamctl or Claude Code knows (ignored)")

    def path(self, raw: str) -> str:
        """Claude Code path syntax: ``~`` home, ``//x`` absolute, else relative to the repo."""
        if raw == "~" or raw.startswith("~/"):
            return str(Path(self.home or "~") / raw[2:]) if self.home else raw
        if raw.startswith("//"):
            return raw[1:]
        if raw.startswith("/") or self.root is None:
            return raw
        return str((self.root / raw).resolve())

    def top(self, raw: Mapping[str, Any], ours: frozenset[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        claude_sandbox: Any = None
        for key, value in raw.items():
            if key == "$schema":
                continue
            if key == "permissions" and isinstance(value, Mapping):
                out[key] = self.permissions(value)
            elif key == "hooks" and isinstance(value, Mapping):
                out[key] = self.hooks(value)
            elif key == "sandbox":
                claude_sandbox = value
            elif key in ours:
                out[key] = value
            elif key in CLAUDE_SETTINGS_KEYS:
                self.not_implemented(key)
            elif self.file.claude_owned:
                self.unknown(key)
            else:
                out[key] = value  # teamctl's own file: the schema names the typo
        if claude_sandbox is not None:
            mapped = self.sandbox(claude_sandbox)
            if mapped is not None:
                explicit = out.get("bash_sandbox")
                out["bash_sandbox"] = (
                    merge(mapped, explicit) if isinstance(explicit, Mapping) else mapped
                )
        return out

    def permissions(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        known = set(PermissionSettings.model_fields) | {
            f.alias for f in PermissionSettings.model_fields.values() if f.alias
        }
        out: dict[str, Any] = {}
        for key, value in raw.items():
            name = f"permissions.{key}"
            if key == "defaultMode" and value == "manual":
                out[key] = "default"  # Claude Code's newer name for the default mode
            elif key == "defaultMode" and value in ("auto", "delegate"):
                self.warn(name, f"Claude Code's {value!r} mode is not implemented (ignored)")
            elif key == "additionalDirectories" and isinstance(value, list):
                out[key] = [self.path(v) if isinstance(v, str) else v for v in value]
            elif key in known:
                out[key] = value
            elif key in CLAUDE_PERMISSION_KEYS:
                self.not_implemented(name)
            elif self.file.claude_owned:
                self.unknown(name)
            else:
                out[key] = value
        return out

    def hooks(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for event, matchers in raw.items():
            name = f"hooks.{event}"
            if event in HOOK_EVENTS:
                out[event] = self.matchers(name, matchers)
            elif event in CLAUDE_HOOK_EVENTS:
                self.warn(name, "a Claude Code hook event teamctl never fires (ignored)")
            elif self.file.claude_owned:
                self.unknown(name)
            else:
                out[event] = matchers
        return out

    def matchers(self, name: str, raw: Any) -> Any:
        if not isinstance(raw, list):
            return raw
        out: list[Any] = []
        for i, matcher in enumerate(raw):
            if not isinstance(matcher, Mapping) or not isinstance(matcher.get("hooks"), list):
                out.append(matcher)
                continue
            kept = []
            for j, handler in enumerate(matcher["hooks"]):
                where = f"{name}[{i}].hooks[{j}]"
                if isinstance(handler, Mapping):
                    handler = self.handler(where, handler)
                if handler is not None:
                    kept.append(handler)
            if kept or not matcher["hooks"]:
                out.append({**matcher, "hooks": kept})
        return out

    def handler(self, where: str, raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
        kind = raw.get("type", "command")
        if kind in CLAUDE_HANDLER_TYPES:
            self.warn(where, f"{kind!r} hooks are not run by teamctl (only 'command' hooks)")
            return None
        if kind == "command" and raw.get("shell") == "powershell":
            self.warn(where, "PowerShell hooks are not run by teamctl")
            return None
        if self.file.claude_owned:
            for key in raw:
                if key not in CLAUDE_HANDLER_KEYS:
                    self.unknown(f"{where}.{key}")
            return {k: v for k, v in raw.items() if k in CLAUDE_HANDLER_KEYS}
        return raw

    def sandbox(self, raw: Any) -> dict[str, Any] | None:
        """Claude Code's ``sandbox`` block as ``bash_sandbox`` keys (None: nothing maps)."""
        if not isinstance(raw, Mapping):
            self.warn("sandbox", "not an object (ignored)")
            return None
        legacy = (
            "extra_writable" in raw
            or isinstance(raw.get("network"), bool)
            or raw.get("enabled") == "auto"
        )
        if legacy and not self.file.claude_owned:
            self.warn(
                "sandbox",
                "teamctl's bubblewrap settings are now `bash_sandbox` (`sandbox` is Claude "
                "Code's); read as `bash_sandbox` this time: rename the key",
            )
            return dict(raw)
        out: dict[str, Any] = {}
        for key, value in raw.items():
            name = f"sandbox.{key}"
            if key == "enabled" and isinstance(value, bool):
                # Claude Code skips an unavailable sandbox with a warning (our "auto") unless
                # failIfUnavailable makes that a hard failure (our true).
                out["enabled"] = (
                    (True if raw.get("failIfUnavailable") else "auto") if value else False
                )
            elif key == "failIfUnavailable" and isinstance(value, bool) and "enabled" in raw:
                continue
            elif key == "filesystem" and isinstance(value, Mapping):
                for sub, paths in value.items():
                    if sub == "allowWrite" and isinstance(paths, list):
                        out["extra_writable"] = [self.path(p) for p in paths if isinstance(p, str)]
                    else:
                        self.not_implemented(f"{name}.{sub}")
            elif key == "network" and isinstance(value, Mapping):
                for sub in value:
                    self.warn(
                        f"{name}.{sub}",
                        "teamctl's bash sandbox has no per-domain or per-socket network rules "
                        "(ignored: sandboxed commands get no network unless "
                        "bash_sandbox.network is true)",
                    )
            else:
                self.not_implemented(name)
        return out or None


def adapt(
    raw: Mapping[str, Any],
    file: SettingsFile,
    *,
    ours: frozenset[str] = HARNESS_KEYS,
    root: Path | None = None,
    home: str | None = None,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """One file's object in teamctl's terms, and one warning line (naming the file and the key)
    per Claude Code key teamctl does not implement. ``ours``: the top-level keys teamctl reads;
    ``root``: the repository (relative paths), ``home``: for ``~``."""
    adapter = _Adapter(file, root, home)
    return adapter.top(raw, ours), tuple(adapter.warnings)


# -- merging the scopes -----------------------------------------------------------------------

RuleList = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class RuleSource:
    """Where one permission rule came from."""

    kind: RuleList
    rule: str
    file: SettingsFile


@dataclass(frozen=True)
class HookSource:
    """Where one hook command came from."""

    event: str
    matcher: str
    command: str
    file: SettingsFile


@dataclass
class Provenance:
    """Which file each rule, hook and decisive permission key came from."""

    rules: list[RuleSource] = field(default_factory=list)
    hooks: list[HookSource] = field(default_factory=list)
    default_mode: SettingsFile | None = None
    bypass_disabled: SettingsFile | None = None


_CONCAT_PERMISSIONS = ("allow", "ask", "deny", "additionalDirectories")
_CONCAT_NESTED = {("bash_sandbox", "extra_writable"), ("command_env", "secret")}


def _concat(below: Any, top: Any) -> Any:
    if not isinstance(below, list) or not isinstance(top, list):
        return top
    return below + [v for v in top if v not in below]


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


def merge_layers(
    layers: Sequence[tuple[SettingsFile, Mapping[str, Any]]],
) -> tuple[dict[str, Any], Provenance]:
    """Merge adapted files, lowest precedence first (see the module docstring for the rules)."""
    merged: dict[str, Any] = {}
    where = Provenance()
    for file, raw in layers:
        for key, value in raw.items():
            below = merged.get(key)
            if key == "permissions" and isinstance(value, Mapping):
                perms = dict(below) if isinstance(below, Mapping) else {}
                for sub, item in value.items():
                    if sub in _CONCAT_PERMISSIONS:
                        perms[sub] = _concat(perms.get(sub, []), item)
                        if sub != "additionalDirectories" and isinstance(item, list):
                            kind = cast(RuleList, sub)
                            where.rules += [RuleSource(kind, str(r), file) for r in item]
                    elif sub == "disableBypassPermissionsMode":
                        if perms.get(sub) != "disable":  # once disabled, no scope re-enables it
                            perms[sub] = item
                            where.bypass_disabled = file if item == "disable" else None
                    else:
                        perms[sub] = item
                        if sub == "defaultMode":
                            where.default_mode = file
                merged[key] = perms
            elif key == "hooks" and isinstance(value, Mapping):
                hooks = dict(below) if isinstance(below, Mapping) else {}
                for event, matchers in value.items():
                    hooks[event] = _concat(list(hooks.get(event, [])), matchers)
                    for matcher in matchers if isinstance(matchers, list) else ():
                        if not isinstance(matcher, Mapping):
                            continue
                        for handler in matcher.get("hooks") or ():
                            if isinstance(handler, Mapping):
                                where.hooks.append(
                                    HookSource(
                                        event,
                                        str(matcher.get("matcher", "")),
                                        str(handler.get("command", "")),
                                        file,
                                    )
                                )
                merged[key] = hooks
            elif key in ("env", "mcpServers") and isinstance(value, Mapping):
                merged[key] = {**below, **value} if isinstance(below, Mapping) else dict(value)
            elif isinstance(below, Mapping) and isinstance(value, Mapping):
                nested = merge(below, value)
                for outer, inner in _CONCAT_NESTED:
                    if outer == key and inner in value and inner in below:
                        nested[inner] = _concat(below[inner], value[inner])
                merged[key] = nested
            else:
                merged[key] = value
    return merged, where


def scoped_settings_json(root: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    """Every scope's file read, adapted and merged (warnings dropped, nothing validated): for
    the harness's own readers of the ``bash_sandbox`` and ``mcpServers`` keys (``ask``); the
    team settings (``actors.settings``) validate and report."""
    layers = []
    for file in settings_files(root, None, environ):
        if not file.path.exists() and file.scope != "env":
            continue
        try:
            raw, _ = adapt(read_settings_file(file), file, root=root, home=environ.get("HOME"))
            if file.claude_owned:  # skipped when it has errors, as Claude Code does
                PermissionSettings.model_validate(raw.get("permissions") or {})
                HookSettings.parse(raw.get("hooks"))
                SandboxSettings.model_validate(raw.get("bash_sandbox") or {})
        except (SettingsFileError, ValueError):
            if file.claude_owned:
                continue
            raise
        layers.append((file, raw))
    return merge_layers(layers)[0]
