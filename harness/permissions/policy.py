"""``HarnessPolicy``: the ``ToolPolicy`` of an agent — PreToolUse hooks, permissions, approver.

``before``: PreToolUse hooks run first (a block or a hook ``deny`` denies; ``continue: false``
denies too, with the stop reason). If a hook rewrote the input, the permission check is made on
the rewritten call. Then rules, mode, path confinement and shell analysis
(``harness.permissions.checks``). A hook's ``ask`` makes an allow into an ask; a hook's ``allow`` only
answers an ``ask`` that came from the defaults (never a deny, an explicit ask rule, a protected
path or a command that might match a deny rule). An ``ask`` goes to the approver; without one it
is denied with a message telling the model why, and an approver that raises ``ApprovalRefused``
denies with its message. Nothing here waits without a bound: the approver
owns its own timeout.

``after``: PostToolUse (PostToolUseFailure when the output is an error) hooks; their additional
context is returned for the model, and a hook's block is returned as a note for the model too
(the executor decides how to show it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from harness.hooks import HookOutcome, HookRunner
from harness.permissions.checks import CheckResult, Permissions
from harness.ports import ToolUseBlock
from harness.settings import HookEvent, PermissionMode
from harness.tools.base import (
    Approver,
    PermissionRequest,
    PolicyVerdict,
    ToolContext,
    ToolOutput,
)

log = logging.getLogger(__name__)

Describe = Callable[[ToolUseBlock, ToolContext], PermissionRequest]
"""Rebuilds the permission request for a call whose input a hook rewrote."""


class ApprovalRefused(Exception):
    """Raised by an approver that refused (or could not get an answer): its message says who
    refused and why, and reaches the model as the denial's reason (not logged as a failure)."""


NO_APPROVER = (
    "it needs approval and no approver is attached to this turn, so it was refused. "
    "Use a different approach that does not need approval, or ask the lead/human to allow it "
    "in the permission rules."
)


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

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        """PreToolUse hooks, then rules/mode/confinement, then the approver for ``ask``."""
        mode = self.permissions.effective_mode(ctx, self.mode)
        outcome = HookOutcome()
        if self.hooks is not None and self.hooks.has_hooks("PreToolUse"):
            payload = _payload(call, ctx) | {"permission_mode": mode}
            outcome = self.hooks.run("PreToolUse", payload)
            _log_errors(outcome)
            if outcome.blocked or outcome.permission_decision == "deny":
                why = outcome.reason or outcome.permission_reason or "no reason given"
                return PolicyVerdict("deny", f"blocked by a PreToolUse hook: {why}")
            if outcome.stop:
                why = outcome.stop_reason or "a hook stopped the agent"
                return PolicyVerdict("deny", f"stopped by a PreToolUse hook: {why}")
            if outcome.updated_input is not None:
                request = self._redescribe(call, request, outcome.updated_input, ctx)
        result = self.permissions.check(request, ctx, mode=self.mode)
        allowed, reason = self._settle(result, outcome, request, ctx)
        if not allowed:
            return PolicyVerdict("deny", reason)
        return PolicyVerdict(
            "allow",
            reason,
            updated_input=outcome.updated_input,
            additional_context=outcome.additional_context,
        )

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        """PostToolUse / PostToolUseFailure hooks; returns text for the model or ``None``."""
        event: HookEvent = "PostToolUseFailure" if output.is_error else "PostToolUse"
        if self.hooks is None or not self.hooks.has_hooks(event):
            return None
        extra: dict[str, Any] = (
            {"error": output.content} if output.is_error else {"tool_response": output.content}
        )
        outcome = self.hooks.run(event, _payload(call, ctx) | extra)
        _log_errors(outcome)
        notes = [outcome.additional_context] if outcome.additional_context else []
        if outcome.blocked:
            notes.append(f"A {event} hook flagged this result: {outcome.reason}")
        if outcome.stop:
            notes.append(f"A {event} hook asked to stop: {outcome.stop_reason}")
        return "\n".join(notes) or None

    def _settle(
        self,
        result: CheckResult,
        outcome: HookOutcome,
        request: PermissionRequest,
        ctx: ToolContext,
    ) -> tuple[bool, str]:
        decision, reason = result.decision, result.reason
        if decision == "deny":
            return False, reason
        hook = outcome.permission_decision
        if decision == "allow" and hook == "ask":
            decision = "ask"
            reason = outcome.permission_reason or "a PreToolUse hook asks for approval"
        elif decision == "ask" and hook == "allow" and result.overridable:
            return True, outcome.permission_reason or "allowed by a PreToolUse hook"
        if decision == "allow":
            return True, reason
        if self.approver is None:
            return False, f"{reason}; {NO_APPROVER}"
        try:
            approved = self.approver(request, ctx, reason)
        except ApprovalRefused as exc:
            return False, f"{reason}; {exc}"
        except Exception as exc:
            log.warning("approver failed for %s", request.tool, exc_info=True)
            return False, f"{reason}; the approver failed ({exc}), so it was refused"
        return (True, "approved") if approved else (False, f"{reason}; the approver refused it")

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


def _payload(call: ToolUseBlock, ctx: ToolContext) -> dict[str, Any]:
    session = {"session_id": ctx.session_id} if ctx.session_id else {}
    return session | {
        "cwd": str(ctx.cwd),
        "agent_name": ctx.agent,
        "tool_name": call.name,
        "tool_input": dict(call.input),
        "tool_use_id": call.id,
    }


def _log_errors(outcome: HookOutcome) -> None:
    for error in outcome.errors:
        log.warning("hook error: %s", error)
