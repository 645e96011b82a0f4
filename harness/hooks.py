"""Hooks: command hooks configured in settings (Claude Code compatible) and in-process callables.

A command hook runs with ``/bin/sh -c`` in the agent's cwd, in its own process group, stdin the
event's JSON (``session_id``, ``transcript_path``, ``hook_event_name``, ``cwd``, ``agent_name``
and the event's fields), no TTY. Exit 0 proceeds (stdout may be a JSON object with ``decision``,
``reason``, ``continue``/``stopReason``, ``systemMessage``, ``additionalContext`` and
``hookSpecificOutput`` {``permissionDecision``, ``permissionDecisionReason``, ``updatedInput``,
``additionalContext``}); exit 2 blocks with stderr as the reason; any other exit, invalid JSON,
a timeout (the process group is killed) or a command that cannot start is a non-blocking error,
reported in ``HookOutcome.errors``.

Matching hooks of an event run one after another in configuration order (callables after
command hooks); the first block or stop ends the run. Thread-safe: the runner holds no state
that changes after registration.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, cast

from harness.permissions.rules import aliases_for
from harness.settings import HookEvent, HookSettings

PermissionDecision = Literal["allow", "deny", "ask"]
_RANK = {"allow": 0, "ask": 1, "deny": 2}
_SUBJECT_FIELD: dict[str, str] = {
    "PreToolUse": "tool_name",
    "PostToolUse": "tool_name",
    "PostToolUseFailure": "tool_name",
    "SessionStart": "source",
    "PreCompact": "trigger",
    "Notification": "notification_type",
}
_CONTEXT_FROM_PLAIN_STDOUT = frozenset({"SessionStart", "UserPromptSubmit"})


@dataclass(frozen=True)
class HookResult:
    """What one hook said. Callables return this (or ``None`` for "proceed")."""

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
    def from_json(cls, data: Mapping[str, Any]) -> HookResult:
        """Read the Claude Code hook output object; raises ``ValueError`` on wrong types."""
        specific = data.get("hookSpecificOutput") or {}
        if not isinstance(specific, Mapping):
            raise ValueError("hookSpecificOutput must be an object")
        decision = data.get("decision")
        if decision not in (None, "block", "approve", "allow", "deny", "ask"):
            raise ValueError(f"unknown decision {decision!r}")
        permission = specific.get("permissionDecision")
        if permission not in (None, "allow", "deny", "ask"):
            raise ValueError(f"unknown permissionDecision {permission!r}")
        if permission is None and decision in ("approve", "allow"):
            permission = "allow"
        updated = specific.get("updatedInput")
        if updated is not None and not isinstance(updated, dict):
            raise ValueError("updatedInput must be an object")
        contexts = [
            c for c in (data.get("additionalContext"), specific.get("additionalContext")) if c
        ]
        if not all(isinstance(c, str) for c in contexts):
            raise ValueError("additionalContext must be a string")
        reason = data.get("reason") or specific.get("permissionDecisionReason") or ""
        stop = data.get("continue", True) is False
        return cls(
            blocked=decision in ("block", "deny"),
            reason=str(reason),
            permission_decision=cast(PermissionDecision | None, permission),
            additional_context="\n".join(contexts) or None,
            updated_input=updated,
            stop=stop,
            stop_reason=str(data.get("stopReason") or ""),
            system_message=data.get("systemMessage"),
        )


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
    """Runs the hooks of an event and aggregates their answers."""

    settings: HookSettings = field(default_factory=HookSettings)
    session_id: str = ""
    transcript_path: str = ""
    env: Mapping[str, str] | None = None
    _callables: dict[str, list[_Registered]] = field(default_factory=dict)

    def register(self, event: HookEvent, fn: HookCallable, *, matcher: str = "") -> None:
        """Add an in-process hook (call before the runner is shared between threads)."""
        name = getattr(fn, "__name__", repr(fn))
        self._callables.setdefault(event, []).append(_Registered(matcher, fn, name))

    def has_hooks(self, event: HookEvent) -> bool:
        return bool(self.settings.for_event(event) or self._callables.get(event))

    def run(self, event: HookEvent, payload: Mapping[str, Any]) -> HookOutcome:
        """Run every matching hook; ``payload`` must name ``cwd`` and ``agent_name``."""
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "hook_event_name": event,
            **payload,
        }
        subject = data.get(_SUBJECT_FIELD.get(event, ""))
        jobs: list[tuple[str, Callable[[], HookResult | None]]] = []
        for m in self.settings.for_event(event):
            if _matches(m.matcher, subject):
                for h in m.hooks:
                    job = partial(_run_command, h.command, h.timeout, event, data, self.env)
                    jobs.append((h.command, job))
        for reg in self._callables.get(event, ()):
            if _matches(reg.matcher, subject):
                jobs.append((reg.name, partial(reg.run, event, dict(data))))
        return _aggregate(jobs)


def _aggregate(jobs: list[tuple[str, Callable[[], HookResult | None]]]) -> HookOutcome:
    blocked, stop = False, False
    reason = stop_reason = permission_reason = ""
    decision: PermissionDecision | None = None
    contexts: list[str] = []
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
        errors=tuple(errors),
        ran=ran,
    )


def _matches(matcher: str, subject: Any) -> bool:
    if matcher in ("", "*") or subject is None:
        return True
    names = (str(subject), *aliases_for(str(subject)))
    try:
        pattern = re.compile(matcher)
    except re.error:
        return matcher in names
    return any(pattern.fullmatch(n) for n in names)


def _run_command(
    command: str,
    timeout: float,
    event: HookEvent,
    data: Mapping[str, Any],
    env: Mapping[str, str] | None,
) -> HookResult:
    label = f"{event} hook `{command}`"
    cwd = str(data.get("cwd") or os.getcwd())
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("CLAUDE_PROJECT_DIR", cwd)
    full_env["TEAMCTL_AGENT"] = str(data.get("agent_name", ""))
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
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
    code = proc.returncode
    if code == 2:
        return HookResult(blocked=True, reason=stderr or f"blocked by {label}")
    if code == 127:
        return HookResult(error=f"{label} could not start (command not found): {stderr}")
    if code != 0:
        return HookResult(error=f"{label} exited with code {code}: {stderr}")
    if not stdout:
        return HookResult()
    if not stdout.startswith(("{", "[")):
        if event in _CONTEXT_FROM_PLAIN_STDOUT:
            return HookResult(additional_context=stdout)
        return HookResult()
    try:
        parsed = json.loads(stdout)
        if not isinstance(parsed, dict):
            raise ValueError("the output is not a JSON object")
        return HookResult.from_json(parsed)
    except ValueError as exc:
        return HookResult(error=f"{label} printed invalid JSON: {exc}")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
