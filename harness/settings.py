"""The ``permissions`` and ``hooks`` sections of ``.team/settings.json`` as the harness reads them.

Same shape and key names as Claude Code's settings, so a rule list or a hook block can be pasted
in. Models are strict (``extra="forbid"``: a typo is an error naming the key) and frozen.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

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
HOOK_EVENTS: tuple[HookEvent, ...] = HookEvent.__args__  # type: ignore[attr-defined]


class _Strict(Frozen):
    model_config = ConfigDict(
        **Frozen.model_config, populate_by_name=True, use_attribute_docstrings=True
    )


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

    @field_validator("allow", "ask", "deny")
    @classmethod
    def _rules_parse(cls, rules: tuple[str, ...]) -> tuple[str, ...]:
        from harness.permissions.rules import parse_rules

        parse_rules(rules)
        return rules


class HookCommand(_Strict):
    """One command hook: JSON on stdin; exit 0 proceeds, exit 2 blocks with stderr as reason."""

    type: Literal["command"] = "command"
    """Hook kind (only ``command`` hooks can be configured in a file)."""
    command: str = Field(min_length=1)
    """Shell command, run with ``/bin/sh -c`` in the agent's working directory."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds before the hook's process group is killed (a non-blocking error)."""


class HookMatcher(_Strict):
    """Hooks run when the matcher matches (the tool name for tool events)."""

    matcher: str = ""
    """Regex matched against the whole tool name or one of its aliases; empty or ``*``: all."""
    hooks: tuple[HookCommand, ...] = ()
    """Commands to run, in order."""


class HookSettings(_Strict):
    """The ``hooks`` section: matchers per event (unknown event names are errors)."""

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
    """The ``sandbox`` section: run ``bash`` commands under bubblewrap (``harness.shell.sandbox``)."""

    enabled: Literal["auto"] | bool = "auto"
    """``"auto"``: sandbox when bubblewrap works on this machine, else run unsandboxed with a
    one-time notice; ``true``: required (commands are refused when it cannot run); ``false``: off."""
    network: bool = False
    """Let sandboxed commands reach the network (off: a private network namespace, loopback only)."""
    extra_writable: tuple[str, ...] = ()
    """More paths commands may write besides the agent's root and a private ``/tmp`` (relative
    paths are taken from the agent's root; missing paths are skipped)."""
