"""Hooks: command hooks from settings, run as Claude Code runs them, and in-process callables.

The contract follows Claude Code's hooks reference (docs/ARCHITECTURE.md, "Hooks"):

- **Input.** A command hook runs with ``/bin/sh -c`` in the agent's cwd, in its own process group,
  no TTY, stdin the event's JSON: the common fields ``session_id``, ``transcript_path`` (the
  agent's transcript file; a subagent's hooks get its parent's, and ``agent_id``/``agent_type``),
  ``cwd``, ``hook_event_name``, ``permission_mode`` (where known), plus ``agent_name`` (ours) and the
  event's fields. Tool events name tools and inputs as Claude Code does (``Bash``/``command``,
  ``Write``/``file_path``, ...: ``harness.tools.names``). The environment is the agent's command
  environment (model credentials removed: ``harness.shell.environment``) plus
  ``CLAUDE_PROJECT_DIR`` (the project root, also for a teammate working in a worktree) and
  ``TEAMCTL_AGENT``.
- **Output.** Exit 2 blocks, with stderr as the reason (a blocking JSON decision's reason wins);
  what a block does depends on the event. Stdout starting with ``{`` is read as the JSON output
  on any exit code: universal ``continue``/``stopReason``/``systemMessage``; top-level
  ``decision: "block"`` + ``reason``; ``hookSpecificOutput`` with ``permissionDecision``
  (allow/deny/ask/defer), ``permissionDecisionReason``, ``updatedInput`` and
  ``additionalContext`` (PreToolUse), ``decision.behavior`` (PermissionRequest) and
  ``additionalContext``. PreToolUse's deprecated ``decision: "approve"|"block"`` means allow/deny.
  A value outside the schema (``decision: "allow"``, ``"deny"``, ...) makes the whole output a
  non-blocking error: ignored, with a warning, never read as an approval. Plain stdout is context
  for ``SessionStart`` and ``UserPromptSubmit``. Any other exit code without a JSON object, a
  timeout (the process group is killed) or a command that cannot start is a non-blocking error.
- ``systemMessage`` (shown to the user) and every hook error are logged as warnings (the CLI
  prints them as ``warning:`` lines), except on events whose ``systemMessage`` Claude Code
  discards (``Notification``, ``SessionEnd``, ``PreCompact``).

Matchers follow Claude Code's rules (``_matches``); a handler's ``if`` (one permission rule) runs
it only for the tool calls the rule matches, best effort and failing open like Claude Code's;
an ``async`` handler runs in the background and decides nothing. Matching hooks of an event run
one after another in configuration order (callables after command hooks; Claude Code runs them
in parallel); the first block or stop ends the run. Thread-safe: the runner holds no state that
changes after registration.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import logging
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, cast

from harness.settings import HookEvent, HookSettings
from harness.shell.environment import CommandEnv, child_environment, command_env_of
from harness.tools.names import OUR_NAMES, claude_name

if TYPE_CHECKING:
    from harness.tools.base import ToolContext

log = logging.getLogger(__name__)

PermissionDecision = Literal["allow", "deny", "ask"]
_RANK = {"allow": 0, "ask": 1, "deny": 2}

_SUBJECT_FIELD: dict[str, str] = {
    "PreToolUse": "tool_name",
    "PostToolUse": "tool_name",
    "PostToolUseFailure": "tool_name",
    "PermissionRequest": "tool_name",
    "SessionStart": "source",
    "SessionEnd": "reason",
    "PreCompact": "trigger",
    "Notification": "notification_type",
    "SubagentStart": "agent_type",
    "SubagentStop": "agent_type",
}
"""The payload field an event's matcher is tested against; events not listed ignore matchers."""

_CONTEXT_FROM_PLAIN_STDOUT = frozenset({"SessionStart", "UserPromptSubmit"})
_TOP_LEVEL_BLOCK = frozenset(
    {
        "UserPromptSubmit",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
        "SubagentStop",
        "PreCompact",
        "TaskCreated",
        # Not in the reference's decision table for these two (exit 2 is), accepted as before.
        "TaskCompleted",
        "TeammateIdle",
    }
)
"""Events whose top-level ``decision: "block"`` blocks (PreToolUse reads it as a deny)."""
_SYSTEM_MESSAGE_DISCARDED = frozenset({"Notification", "SessionEnd", "PreCompact"})
_EXACT_MATCHER = re.compile(r"[A-Za-z0-9_\-, |]*")

HOOK_SESSION_KEY = "hook_session"
"""``ToolContext.extra`` key of the agent's ``HookSession`` (set by ``harness.agent.Agent``)."""


@dataclass(frozen=True)
class HookSession:
    """Who fires an event: the common payload fields and what the hook command's environment
    needs. ``stop`` ends the agent's turn (a ``continue: false`` on a tool event)."""

    session_id: str = ""
    transcript_path: str = ""
    project_dir: str = ""
    agent_name: str = ""
    agent_id: str | None = None
    """A subagent's id (its name); ``None`` for a top-level agent."""
    agent_type: str | None = None
    """A subagent's type (``general-purpose`` for the ``task`` tool)."""
    command_env: CommandEnv | None = None
    stop: Callable[[str], None] | None = None

    def fields(self) -> dict[str, Any]:
        """The common fields this session contributes to a payload."""
        out: dict[str, Any] = {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
        }
        if self.agent_name:
            out["agent_name"] = self.agent_name
        if self.agent_id is not None:
            out["agent_id"] = self.agent_id
        if self.agent_type is not None:
            out["agent_type"] = self.agent_type
        return out


def session_for(ctx: ToolContext) -> HookSession:
    """The ``HookSession`` of the agent a tool call runs for (``ctx.extra``, else one made from
    the context alone: the root as the project)."""
    base = ctx.extra.get(HOOK_SESSION_KEY)
    if not isinstance(base, HookSession):
        base = HookSession(project_dir=str(ctx.root))
    return replace(
        base,
        session_id=ctx.session_id or base.session_id,
        agent_name=ctx.agent,
        command_env=command_env_of(ctx.extra),
    )


@dataclass(frozen=True)
class HookResult:
    """What one hook said. Callables return this (or ``None`` for "proceed").

    ``permission_decision`` is PreToolUse's ``permissionDecision`` or PermissionRequest's
    ``decision.behavior``; ``stop`` is ``continue: false`` (or PermissionRequest's ``interrupt``)."""

    blocked: bool = False
    reason: str = ""
    permission_decision: PermissionDecision | None = None
    additional_context: str | None = None
    updated_input: dict[str, Any] | None = None
    stop: bool = False
    stop_reason: str = ""
    system_message: str | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], event: HookEvent) -> HookResult:
        """Read Claude Code's hook output object for ``event``; ``ValueError`` when it is not
        in the schema (the caller reports it and ignores the whole output)."""
        specific = data.get("hookSpecificOutput") or {}
        if not isinstance(specific, Mapping):
            raise ValueError("hookSpecificOutput must be an object")
        named = specific.get("hookEventName")
        if named is not None and named != event:
            raise ValueError(f"hookSpecificOutput.hookEventName is {named!r}, not {event!r}")
        go_on = data.get("continue", True)
        if not isinstance(go_on, bool):
            raise ValueError("continue must be true or false")
        system_message = _optional_str(data, "systemMessage")
        stop_reason = _optional_str(data, "stopReason") or ""
        reason = _optional_str(data, "reason") or ""
        decision = data.get("decision")
        permission: str | None = None
        blocked = False
        updated: Any = None
        if event == "PreToolUse":
            if decision not in (None, "approve", "block"):
                raise ValueError(_unknown_decision(decision, event))
            permission = specific.get("permissionDecision")
            if permission not in (None, "allow", "deny", "ask", "defer"):
                raise ValueError(f"unknown permissionDecision {permission!r}")
            if permission is None and decision is not None:  # the deprecated form
                permission = "allow" if decision == "approve" else "deny"
            reason = _optional_str(specific, "permissionDecisionReason") or reason
            updated = specific.get("updatedInput")
        elif event == "PermissionRequest":
            if decision is not None:
                raise ValueError(_unknown_decision(decision, event))
            permission, updated, reason, interrupt = _permission_request(specific)
            if interrupt:
                go_on, stop_reason = False, stop_reason or reason
        else:
            # "approve" was the legacy no-op of these events; only "block" does something.
            if decision not in (None, "approve", "block"):
                raise ValueError(_unknown_decision(decision, event))
            blocked = decision == "block" and event in _TOP_LEVEL_BLOCK
        if updated is not None and not isinstance(updated, dict):
            raise ValueError("updatedInput must be an object")
        contexts = [data.get("additionalContext"), specific.get("additionalContext")]
        if not all(c is None or isinstance(c, str) for c in contexts):
            raise ValueError("additionalContext must be a string")
        if permission == "defer":  # honoured only by `claude -p`; ignored as Claude Code does
            permission, updated, contexts = None, None, []
        return cls(
            blocked=blocked or permission == "deny",
            reason=reason,
            permission_decision=cast(PermissionDecision | None, permission),
            additional_context="\n".join(c for c in contexts if c) or None,
            updated_input=updated,
            stop=not go_on,
            stop_reason=stop_reason,
            system_message=system_message,
        )


def _optional_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def _unknown_decision(decision: Any, event: str) -> str:
    if event == "PreToolUse":
        expected = (
            'hookSpecificOutput.permissionDecision "allow"/"deny"/"ask" '
            '(or the deprecated decision "approve"/"block")'
        )
    elif event == "PermissionRequest":
        expected = 'hookSpecificOutput.decision.behavior "allow"/"deny"'
    else:
        expected = 'decision "block"'
    return f"decision {decision!r} is not in Claude Code's hook schema for {event} (expected {expected})"


def _permission_request(
    specific: Mapping[str, Any],
) -> tuple[str | None, Any, str, bool]:
    """PermissionRequest's ``decision`` object: behavior, updatedInput, message, interrupt."""
    decision = specific.get("decision")
    if decision is None:
        return None, None, "", False
    if not isinstance(decision, Mapping):
        raise ValueError("hookSpecificOutput.decision must be an object")
    behavior = decision.get("behavior")
    if behavior not in ("allow", "deny"):
        raise ValueError(f"unknown decision.behavior {behavior!r} (expected allow or deny)")
    message = _optional_str(decision, "message") or ""
    interrupt = decision.get("interrupt", False) is True and behavior == "deny"
    updated = decision.get("updatedInput") if behavior == "allow" else None
    return behavior, updated, message, interrupt


@dataclass(frozen=True)
class HookOutcome:
    """All hooks of one event, aggregated. ``permission_decision``: strictest of the hooks'."""

    blocked: bool = False
    reason: str = ""
    permission_decision: PermissionDecision | None = None
    permission_reason: str = ""
    additional_context: str | None = None
    updated_input: dict[str, Any] | None = None
    stop: bool = False
    stop_reason: str = ""
    system_messages: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    ran: int = 0


HookCallable = Callable[[HookEvent, Mapping[str, Any]], HookResult | None]


@dataclass(frozen=True)
class _Registered:
    matcher: str
    run: Callable[[HookEvent, Mapping[str, Any]], HookResult | None]
    name: str


@dataclass
class HookRunner:
    """Runs the hooks of an event and aggregates their answers. ``session_id``,
    ``transcript_path`` and ``project_dir`` are used when the caller passes no ``HookSession``."""

    settings: HookSettings = field(default_factory=HookSettings)
    session_id: str = ""
    transcript_path: str = ""
    env: Mapping[str, str] | None = None
    """Base environment of hook commands (default: this process's), before the credentials
    are removed."""
    project_dir: str = ""
    _callables: dict[str, list[_Registered]] = field(default_factory=dict)

    def register(self, event: HookEvent, fn: HookCallable, *, matcher: str = "") -> None:
        """Add an in-process hook (call before the runner is shared between threads)."""
        name = getattr(fn, "__name__", repr(fn))
        self._callables.setdefault(event, []).append(_Registered(matcher, fn, name))

    def has_hooks(self, event: HookEvent) -> bool:
        return bool(self.settings.for_event(event) or self._callables.get(event))

    def run(
        self,
        event: HookEvent,
        payload: Mapping[str, Any],
        *,
        session: HookSession | None = None,
    ) -> HookOutcome:
        """Run every matching hook; ``payload`` names ``cwd`` and the event's fields."""
        common: dict[str, Any] = session.fields() if session is not None else {}
        common["session_id"] = common.get("session_id") or self.session_id
        common["transcript_path"] = common.get("transcript_path") or self.transcript_path
        data: dict[str, Any] = {**common, **payload, "hook_event_name": event}
        subject = data.get(_SUBJECT_FIELD.get(event, ""))
        env = self._environment(data, session)
        jobs: list[tuple[str, Callable[[], HookResult | None]]] = []
        for m in self.settings.for_event(event):
            if not _matches(m.matcher, subject):
                continue
            for h in m.hooks:
                if not _if_matches(getattr(h, "if_rule", None), event, data):
                    continue
                job = partial(_run_command, h.command, h.timeout, event, data, env)
                if getattr(h, "run_async", False) or getattr(h, "async_rewake", False):
                    _in_background(h.command, job)  # Claude Code does not wait for it
                    continue
                jobs.append((h.command, job))
        for reg in self._callables.get(event, ()):
            if _matches(reg.matcher, subject):
                jobs.append((reg.name, partial(reg.run, event, dict(data))))
        outcome = _aggregate(jobs)
        for error in outcome.errors:
            log.warning("%s hook error: %s", event, error)
        if event not in _SYSTEM_MESSAGE_DISCARDED:
            for message in outcome.system_messages:
                log.warning("%s hook: %s", event, message)
        return outcome

    def _environment(self, data: Mapping[str, Any], session: HookSession | None) -> dict[str, str]:
        base = os.environ if self.env is None else self.env
        env = child_environment(session.command_env if session else None, base=base)
        project = (session.project_dir if session else "") or self.project_dir
        env["CLAUDE_PROJECT_DIR"] = project or str(data.get("cwd") or os.getcwd())
        env["TEAMCTL_AGENT"] = str(data.get("agent_name", ""))
        return env


def _aggregate(jobs: list[tuple[str, Callable[[], HookResult | None]]]) -> HookOutcome:
    blocked, stop = False, False
    reason = stop_reason = permission_reason = ""
    decision: PermissionDecision | None = None
    contexts: list[str] = []
    messages: list[str] = []
    updated: dict[str, Any] | None = None
    errors: list[str] = []
    ran = 0
    for name, job in jobs:
        ran += 1
        try:
            result = job()
        except Exception as exc:
            errors.append(f"hook {name} failed: {exc}")
            continue
        if result is None:
            continue
        if result.error:
            errors.append(result.error)
            continue
        if result.system_message:
            messages.append(result.system_message)
        if result.additional_context:
            contexts.append(result.additional_context)
        if result.updated_input is not None:
            updated = result.updated_input
        pd = result.permission_decision
        if pd is not None and (decision is None or _RANK[pd] > _RANK[decision]):
            decision, permission_reason = pd, result.reason
        if result.blocked or result.stop:
            blocked = result.blocked
            reason = result.reason or f"blocked by hook {name}"
            stop, stop_reason = result.stop, result.stop_reason
            break
    return HookOutcome(
        blocked=blocked,
        reason=reason,
        permission_decision=decision,
        permission_reason=permission_reason,
        additional_context="\n".join(contexts) or None,
        updated_input=updated,
        stop=stop,
        stop_reason=stop_reason,
        system_messages=tuple(messages),
        errors=tuple(errors),
        ran=ran,
    )


def _names(subject: str) -> set[str]:
    """A tool's names a matcher may use: Claude Code's (``Bash``, ``Task``/``Agent``) and ours."""
    ours = OUR_NAMES.get(subject, subject)
    names = {subject, ours, claude_name(ours)}
    if ours == "task":
        names.add("Agent")
    return names


def _matches(matcher: str, subject: Any) -> bool:
    """Claude Code's matcher rules: empty or ``*`` match all; letters, digits, ``_``, ``-``,
    spaces, ``,`` and ``|`` only: exact names separated by ``|`` or ``,``; anything else: a
    regular expression found anywhere in the value (``mcp__gh__.*``, ``^Notebook``)."""
    if matcher.strip() in ("", "*") or subject is None:
        return True
    names = _names(str(subject))
    if _EXACT_MATCHER.fullmatch(matcher):
        wanted = {part.strip() for part in re.split(r"[|,]", matcher)}
        return bool(names & wanted)
    try:
        pattern = re.compile(matcher)
    except re.error:
        log.warning(
            "hook matcher %r is not a valid regular expression; it matches nothing", matcher
        )
        return False
    return any(pattern.search(n) for n in names)


_TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"})
_RULE = re.compile(r"^\s*([A-Za-z0-9_*?\-.]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_ASSIGNMENT = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")


def _if_matches(rule: str | None, event: str, data: Mapping[str, Any]) -> bool:
    """Claude Code's handler ``if`` (one permission rule): only tool events, and only calls the
    rule matches. Best effort and failing open, as Claude Code's: a command with ``$(...)``,
    backticks or variables runs the hook."""
    if not rule:
        return True
    if event not in _TOOL_EVENTS:
        return False
    m = _RULE.match(rule)
    if m is None:
        return True
    tool, spec = m.group(1), (m.group(2) or "").strip()
    if not fnmatch.fnmatchcase(str(data.get("tool_name", "")), tool) and not (
        _names(str(data.get("tool_name", ""))) & {tool}
    ):
        return False
    if spec in ("", "*"):
        return True
    args = data.get("tool_input") or {}
    command = args.get("command") if isinstance(args, Mapping) else None
    if isinstance(command, str):
        if any(c in command for c in ("$", "`")):
            return True
        parts = [p.strip() for p in re.split(r"&&|\|\||;|\||\n", command)]
        words = [_ASSIGNMENT.sub("", p) for p in parts if p]
        base = spec[:-2] if spec.endswith(" *") else None
        return any(fnmatch.fnmatchcase(w, spec) or (base is not None and w == base) for w in words)
    path = args.get("file_path") or args.get("path") if isinstance(args, Mapping) else None
    if isinstance(path, str):
        cwd = str(data.get("cwd") or "")
        rel = os.path.relpath(path, cwd) if cwd and os.path.isabs(path) else path
        candidates = (path, rel, os.path.basename(path))
        return any(fnmatch.fnmatch(c, spec.removeprefix("./")) for c in candidates)
    return True


def _in_background(name: str, job: Callable[[], HookResult | None]) -> None:
    """Run an ``async`` hook without waiting; its output decides nothing (errors are logged)."""

    def run() -> None:
        result = job()
        if result is not None and result.error:
            log.warning("async hook error: %s", result.error)

    threading.Thread(target=run, name=f"hook {name[:40]}", daemon=True).start()


def _run_command(
    command: str,
    timeout: float,
    event: HookEvent,
    data: Mapping[str, Any],
    env: Mapping[str, str],
) -> HookResult:
    label = f"{event} hook `{command}`"
    cwd = str(data.get("cwd") or os.getcwd())
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        return HookResult(error=f"{label} could not start: {exc}")
    try:
        out, err = proc.communicate(json.dumps(data).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return HookResult(error=f"{label} timed out after {timeout:g}s and was killed")
    stdout = out.decode("utf-8", "replace").strip()
    stderr = err.decode("utf-8", "replace").strip()
    return _interpret(label, event, proc.returncode, stdout, stderr)


def _interpret(label: str, event: HookEvent, code: int, stdout: str, stderr: str) -> HookResult:
    """A finished command hook's exit code and output, as Claude Code reads them."""
    parsed: HookResult | None = None
    if stdout.startswith("{"):
        try:
            value = json.loads(stdout)
            if not isinstance(value, dict):
                raise ValueError("the output is not a JSON object")
            parsed = HookResult.from_json(value, event)
        except ValueError as exc:
            if code == 2:  # exit 2 still blocks; stderr is the reason
                return HookResult(blocked=True, reason=stderr or f"blocked by {label}")
            what = "invalid JSON" if isinstance(exc, json.JSONDecodeError) else "JSON outside"
            schema = "" if isinstance(exc, json.JSONDecodeError) else " Claude Code's hook schema"
            return HookResult(error=f"{label} printed {what}{schema} (ignored): {exc}")
    if code == 2:
        reason = (parsed.reason if parsed and parsed.blocked else "") or stderr
        base = parsed or HookResult()
        return replace(base, blocked=True, reason=reason or f"blocked by {label}")
    if parsed is not None:  # any other exit code: the JSON alone decides
        return parsed
    if code == 127:
        return HookResult(error=f"{label} could not start (command not found): {stderr}")
    if code != 0:
        return HookResult(error=f"{label} exited with code {code}: {stderr}")
    if stdout and event in _CONTEXT_FROM_PLAIN_STDOUT:
        return HookResult(additional_context=stdout)
    return HookResult()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
