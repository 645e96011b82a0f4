"""``HarnessPolicy``: the ``ToolPolicy`` of an agent — PreToolUse hooks, permissions, approver.

Hooks see every call as Claude Code shows it (``Bash``/``command``, ``Read``/``file_path`` made
absolute, ...: ``harness.tools.names``), with the agent's session fields (``harness.hooks``).

``before``: PreToolUse hooks run first. ``continue: false`` denies and ends the agent's turn; a
block (exit 2, ``permissionDecision: "deny"``, the deprecated ``decision: "block"``) denies with
the hook's reason. If a hook rewrote the input (``updatedInput``, mapped back to our field
names), the permission check is made on the rewritten call. Then rules, mode, path confinement
and shell analysis (``harness.permissions.checks``). A hook's ``ask`` makes an allow into an
ask. A hook's ``allow`` skips the prompt, as Claude Code's does: it answers an ``ask`` that came
from the defaults, also in ``dontAsk`` mode (which runs "calls approved by a PreToolUse hook"),
but never a deny rule, an explicit ask rule, a protected path, a path outside the root or a
command that might match a deny rule. An ``ask`` is denied in ``dontAsk`` mode; otherwise the
``PermissionRequest`` hooks may answer it (``decision.behavior`` allow — with ``updatedInput``
re-checked against the rules — or deny, ``interrupt`` ending the turn); then a ``Notification``
(``permission_prompt``) fires and the approver is asked. Without an approver the call is denied
with a message telling the model why, and an approver that raises ``ApprovalRefused`` denies
with its message. Nothing here waits without a bound: the approver owns its own timeout.

``after``: PostToolUse (PostToolUseFailure when the output is an error) hooks; their additional
context is returned for the model. A hook's block (exit 2, ``decision: "block"``) comes back as a
``BlockedResult`` carrying the reason: the executor makes the result an error. ``continue: false``
ends the agent's turn after this batch.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from harness.hooks import HookOutcome, HookRunner, HookSession, session_for
from harness.permissions.checks import CheckResult, Permissions
from harness.ports import ToolUseBlock
from harness.settings import HookEvent, PermissionMode
from harness.tools.base import (
    Approver,
    BlockedResult,
    PermissionRequest,
    PolicyVerdict,
    ToolContext,
    ToolOutput,
    ToolPolicy,
)
from harness.tools.names import claude_call, our_input

log = logging.getLogger(__name__)

Describe = Callable[[ToolUseBlock, ToolContext], PermissionRequest]
"""Rebuilds the permission request for a call whose input a hook rewrote."""

_ABSOLUTE_PATHS = frozenset({"Read", "Write", "Edit"})
"""Claude Code hands these tools' ``file_path`` to hooks as an absolute path."""


class ApprovalRefused(Exception):
    """Raised by an approver that refused (or could not get an answer): its message says who
    refused and why, and reaches the model as the denial's reason (not logged as a failure)."""


NO_APPROVER = (
    "it needs approval and no approver is attached to this turn, so it was refused. "
    "Use a different approach that does not need approval, or ask the lead/human to allow it "
    "in the permission rules."
)


@dataclass(frozen=True)
class _Settled:
    allowed: bool
    reason: str
    updated_input: dict[str, Any] | None = None


class HarnessPolicy:
    """Hooks + permissions + approver for one agent (``mode`` may be changed between calls)."""

    def __init__(
        self,
        permissions: Permissions,
        hooks: HookRunner | None = None,
        approver: Approver | None = None,
        mode: PermissionMode | None = None,
        *,
        describe: Describe | None = None,
    ) -> None:
        self.permissions = permissions
        self.hooks = hooks
        self.approver = approver
        self.mode: PermissionMode | None = mode
        self.describe = describe

    @property
    def permission_mode(self) -> PermissionMode:
        """The mode calls are checked in (before plan mode forced by a pending plan)."""
        return self.mode or self.permissions.mode

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        """PreToolUse hooks, then rules/mode/confinement, then PermissionRequest hooks and the
        approver for ``ask``."""
        mode = self.permissions.effective_mode(ctx, self.mode)
        session = session_for(ctx)
        outcome = HookOutcome()
        updated: dict[str, Any] | None = None
        if self.hooks is not None and self.hooks.has_hooks("PreToolUse"):
            payload = tool_payload(call, ctx, mode)
            outcome = self.hooks.run("PreToolUse", payload, session=session)
            if outcome.stop:
                why = outcome.stop_reason or "a hook stopped the agent"
                _stop(session, f"A PreToolUse hook stopped the agent: {why}")
                return PolicyVerdict("deny", f"stopped by a PreToolUse hook: {why}")
            if outcome.blocked or outcome.permission_decision == "deny":
                why = outcome.reason or outcome.permission_reason or "no reason given"
                return PolicyVerdict("deny", f"blocked by a PreToolUse hook: {why}")
            if outcome.updated_input is not None:
                updated = our_input(call.name, outcome.updated_input)
                call = call.model_copy(update={"input": updated})
                request = self._redescribe(call, request, updated, ctx)
        result = self.permissions.check(request, ctx, mode=self.mode)
        settled = self._settle(call, result, outcome, request, ctx, mode, session)
        if not settled.allowed:
            return PolicyVerdict("deny", settled.reason)
        return PolicyVerdict(
            "allow",
            settled.reason,
            updated_input=settled.updated_input if settled.updated_input is not None else updated,
            additional_context=outcome.additional_context,
            read_guard=self.permissions,
        )

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        """PostToolUse / PostToolUseFailure hooks; text for the model, a ``BlockedResult`` when
        a hook blocked, or ``None``."""
        event: HookEvent = "PostToolUseFailure" if output.is_error else "PostToolUse"
        if self.hooks is None or not self.hooks.has_hooks(event):
            return None
        extra: dict[str, Any] = (
            {"error": output.content} if output.is_error else {"tool_response": output.content}
        )
        mode = self.permissions.effective_mode(ctx, self.mode)
        session = session_for(ctx)
        outcome = self.hooks.run(event, tool_payload(call, ctx, mode) | extra, session=session)
        notes = [outcome.additional_context] if outcome.additional_context else []
        if outcome.stop:
            why = outcome.stop_reason or "no reason given"
            _stop(session, f"A {event} hook stopped the agent: {why}")
            notes.append(f"A {event} hook stopped the agent: {why}")
        if outcome.blocked:
            notes.append(f"A {event} hook blocked this result: {outcome.reason}")
            return BlockedResult("\n".join(notes))
        return "\n".join(notes) or None

    def _settle(
        self,
        call: ToolUseBlock,
        result: CheckResult,
        outcome: HookOutcome,
        request: PermissionRequest,
        ctx: ToolContext,
        mode: PermissionMode,
        session: HookSession,
    ) -> _Settled:
        decision, reason = result.decision, result.reason
        hook = outcome.permission_decision
        hook_why = outcome.permission_reason
        if decision == "deny":
            if hook == "allow" and mode == "dontAsk" and self._default_ask(request, ctx):
                return _Settled(True, hook_why or "allowed by a PreToolUse hook (dontAsk mode)")
            return _Settled(False, reason)
        if decision == "allow" and hook == "ask":
            decision, reason = "ask", hook_why or "a PreToolUse hook asks for approval"
        elif decision == "ask" and hook == "allow" and result.overridable:
            return _Settled(True, hook_why or "allowed by a PreToolUse hook")
        if decision == "allow":
            return _Settled(True, reason)
        if mode == "dontAsk":  # a hook's ask, which nobody is asked in this mode
            return _Settled(False, f"{reason} (dontAsk mode)")
        answered = self._permission_request_hooks(call, request, ctx, mode, session, reason)
        if answered is not None:
            return answered
        if self.approver is None:
            return _Settled(False, f"{reason}; {NO_APPROVER}")
        self._notify_prompt(call, ctx, session)
        try:
            approved = self.approver(request, ctx, reason)
        except ApprovalRefused as exc:
            return _Settled(False, f"{reason}; {exc}")
        except Exception as exc:
            log.warning("approver failed for %s", request.tool, exc_info=True)
            return _Settled(False, f"{reason}; the approver failed ({exc}), so it was refused")
        if approved:
            return _Settled(True, "approved")
        return _Settled(False, f"{reason}; the approver refused it")

    def _default_ask(self, request: PermissionRequest, ctx: ToolContext) -> bool:
        """True when ``request`` only needs approval by default (no rule, protected path or
        confinement says otherwise): what a hook's ``allow`` may answer in ``dontAsk`` mode."""
        if ctx.read_only:
            return False
        base = self.permissions.check(request, ctx, mode="default")
        return base.decision == "ask" and base.overridable

    def _permission_request_hooks(
        self,
        call: ToolUseBlock,
        request: PermissionRequest,
        ctx: ToolContext,
        mode: PermissionMode,
        session: HookSession,
        reason: str,
    ) -> _Settled | None:
        """``PermissionRequest`` hooks on an ask: their allow or deny, or ``None``."""
        if self.hooks is None or not self.hooks.has_hooks("PermissionRequest"):
            return None
        payload = tool_payload(call, ctx, mode)
        del payload["tool_use_id"]  # Claude Code sends none for this event
        out = self.hooks.run("PermissionRequest", payload, session=session)
        if out.permission_decision == "deny":
            why = out.permission_reason or out.reason or "no reason given"
            if out.stop:
                _stop(session, f"A PermissionRequest hook stopped the agent: {why}")
            return _Settled(False, f"{reason}; denied by a PermissionRequest hook: {why}")
        if out.permission_decision != "allow":
            return None
        if out.updated_input is None:
            return _Settled(True, "allowed by a PermissionRequest hook")
        updated = our_input(call.name, out.updated_input)
        changed = self._redescribe(
            call.model_copy(update={"input": updated}), request, updated, ctx
        )
        again = self.permissions.check(changed, ctx, mode=self.mode)
        if again.decision == "deny":
            return _Settled(False, f"the input a PermissionRequest hook rewrote: {again.reason}")
        return _Settled(True, "allowed by a PermissionRequest hook", updated)

    def _notify_prompt(self, call: ToolUseBlock, ctx: ToolContext, session: HookSession) -> None:
        if self.hooks is None or not self.hooks.has_hooks("Notification"):
            return
        name, _ = claude_call(call.name, call.input)
        payload = {
            "cwd": str(ctx.cwd),
            "message": f"{ctx.agent} needs your permission to use {name}",
            "title": "Permission needed",
            "notification_type": "permission_prompt",
        }
        self.hooks.run("Notification", payload, session=session)

    def _redescribe(
        self,
        call: ToolUseBlock,
        request: PermissionRequest,
        new_input: dict[str, Any],
        ctx: ToolContext,
    ) -> PermissionRequest:
        updated = call.model_copy(update={"input": dict(new_input)})
        if self.describe is not None:
            return self.describe(updated, ctx)
        # Without the tool at hand, re-read the fields built-in tools use for their subject.
        if request.tool == "bash" and isinstance(new_input.get("command"), str):
            return replace(request, target=new_input["command"])
        for key in ("path", "file_path", "pattern_path"):
            value = new_input.get(key)
            if isinstance(value, str):
                return replace(request, target=value, paths=(value,))
        return request


def tool_payload(call: ToolUseBlock, ctx: ToolContext, mode: PermissionMode) -> dict[str, Any]:
    """The tool-event fields of ``call`` as Claude Code gives them to hooks (``tool_name``,
    ``tool_input`` in its field names, file paths absolute), with ``cwd`` and the mode."""
    name, tool_input = claude_call(call.name, call.input)
    path = tool_input.get("file_path")
    if name in _ABSOLUTE_PATHS and isinstance(path, str) and path:
        full = os.path.join(ctx.cwd, os.path.expanduser(path))
        tool_input["file_path"] = os.path.normpath(full)
    return {
        "cwd": str(ctx.cwd),
        "permission_mode": mode,
        "tool_name": name,
        "tool_input": tool_input,
        "tool_use_id": call.id,
    }


def _stop(session: HookSession, reason: str) -> None:
    """End the agent's turn for a hook's ``continue: false`` (when the agent said how)."""
    if session.stop is not None:
        session.stop(reason)
    else:
        log.warning("%s (this agent cannot be stopped by hooks)", reason)


@runtime_checkable
class WrappingPolicy(Protocol):
    """A policy that adds to another one (the runtime's journaling, a workflow step's tool set)."""

    inner: ToolPolicy


def harness_policy(policy: object) -> HarnessPolicy | None:
    """The ``HarnessPolicy`` behind ``policy``: itself, or reached through wrappers' ``inner``."""
    for _ in range(8):  # wrappers nest a level or two; never follow a cycle
        if isinstance(policy, HarnessPolicy):
            return policy
        if not isinstance(policy, WrappingPolicy):
            return None
        policy = policy.inner
    return None
