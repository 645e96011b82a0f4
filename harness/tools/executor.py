"""The tool pipeline: one batch of ``tool_use`` blocks in, one ``tool_result`` per call out.

Per call: look up → validate input → permission request → plan-mode check → ``policy.before``
(deny, or replace the input) → run → ``policy.after`` (extra context; a ``BlockedResult`` makes
the result an error) → cap and spill. Every
failure along the way, including a tool raising ``SystemExit`` or ``KeyboardInterrupt``, becomes an
``is_error`` result; ``run_batch`` itself never raises for a bad call.

Consecutive calls that are read-only and concurrency-safe run together on a thread pool; any other
call runs alone, after everything before it has finished. Results keep request order.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from harness.ports import ToolResultBlock, ToolUseBlock
from harness.tools.base import (
    BlockedResult,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolPolicy,
)
from harness.tools.outputs import cap_text
from harness.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

DEFAULT_MAX_OUTPUT_CHARS = 30_000


@dataclass(frozen=True)
class _Prepared:
    """A call after lookup and validation: either ready to run or already failed."""

    call: ToolUseBlock
    tool: Tool[Any] | None = None
    args: BaseModel | None = None
    error: str | None = None
    parallel: bool = False


def describe_validation_error(tool: str, exc: ValidationError) -> str:
    """A readable, model-facing message for invalid tool input."""
    lines = [f"Invalid input for tool {tool!r}:"]
    for err in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(input)"
        lines.append(f"- {loc}: {err['msg']}")
    return "\n".join(lines)


class ToolExecutor:
    """Runs tool batches for one agent through the pipeline (thread-safe; holds no call state)."""

    def __init__(
        self,
        registry: ToolRegistry,
        policy: ToolPolicy,
        *,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        max_workers: int = 4,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.max_output_chars = max_output_chars
        self.max_workers = max(1, max_workers)

    def use_policy(self, policy: ToolPolicy) -> None:
        """Decide every tool call from now on with ``policy``."""
        self.policy = policy

    def run_batch(self, calls: Sequence[ToolUseBlock], ctx: ToolContext) -> list[ToolResultBlock]:
        """Run ``calls``; returns exactly one result per call, in request order."""
        prepared = [self._prepare(call) for call in calls]
        results: list[ToolResultBlock] = []
        i = 0
        while i < len(prepared):
            j = i + 1
            if prepared[i].parallel:
                while j < len(prepared) and prepared[j].parallel:
                    j += 1
            results.extend(self._run_group(prepared[i:j], ctx))
            i = j
        return results

    def ends_turn(self, call: ToolUseBlock) -> bool:
        """Whether ``call`` names a terminal tool (``Tool.ends_turn``)."""
        tool = self.registry.get(call.name)
        return tool is not None and tool.ends_turn

    def run_one(self, call: ToolUseBlock, ctx: ToolContext) -> ToolResultBlock:
        """Run a single call through the pipeline."""
        return self._finish(self._prepare(call), ctx)

    def _run_group(self, group: Sequence[_Prepared], ctx: ToolContext) -> list[ToolResultBlock]:
        if len(group) == 1 or self.max_workers == 1:
            return [self._finish(p, ctx) for p in group]
        workers = min(len(group), self.max_workers)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tool") as pool:
            futures = [pool.submit(self._finish, p, ctx) for p in group]
            return [f.result() for f in futures]

    def _prepare(self, call: ToolUseBlock) -> _Prepared:
        tool = self.registry.get(call.name)
        if tool is None:
            available = ", ".join(self.registry.names()) or "(none)"
            return _Prepared(
                call, error=f"Unknown tool {call.name!r}. Available tools: {available}"
            )
        try:
            args = tool.input_model.model_validate(call.input)
        except ValidationError as exc:
            return _Prepared(call, tool, error=describe_validation_error(call.name, exc))
        try:
            parallel = tool.is_read_only(args) and tool.is_concurrency_safe(args)
        except Exception:
            log.warning("classifying %s failed; running it alone", call.name, exc_info=True)
            parallel = False
        return _Prepared(call, tool, args, parallel=parallel)

    def _finish(self, p: _Prepared, ctx: ToolContext) -> ToolResultBlock:
        try:
            return self._pipeline(p, ctx)
        except BaseException as exc:  # last line of defence: a result is always produced
            log.error("tool pipeline failed for %s", p.call.name, exc_info=True)
            return _error(p.call, f"Internal error running {p.call.name}: {_exc_text(exc)}")

    def _pipeline(self, p: _Prepared, ctx: ToolContext) -> ToolResultBlock:
        call, tool, args = p.call, p.tool, p.args
        if p.error is not None or tool is None or args is None:
            return _error(call, p.error or "invalid call")
        if ctx.read_only and not tool.allowed_in_plan(args):
            return self._plan_refused(call, tool, args, ctx)
        try:
            request = tool.permission_request(args, ctx)
        except ToolError as exc:
            return _error(call, str(exc))
        try:
            verdict = self.policy.before(call, request, ctx)
        except Exception as exc:
            log.warning("policy.before failed for %s", call.name, exc_info=True)
            return _error(call, f"Permission check failed, call refused: {_exc_text(exc)}")
        if verdict.decision != "allow":
            reason = verdict.reason or "denied by policy"
            return _error(call, f"Permission denied for {call.name}: {reason}")
        if verdict.updated_input is not None:
            try:
                args = tool.input_model.model_validate(verdict.updated_input)
            except ValidationError as exc:
                text = describe_validation_error(call.name, exc)
                return _error(call, f"A hook rewrote the input into an invalid one.\n{text}")
            call = call.model_copy(update={"input": dict(verdict.updated_input)})
            if ctx.read_only and not tool.allowed_in_plan(args):
                return self._plan_refused(call, tool, args, ctx)
        if verdict.read_guard is not None:
            ctx = replace(ctx, read_guard=verdict.read_guard)  # for this call only
        output = _run_tool(tool, args, ctx)
        try:
            extra = self.policy.after(call, output, ctx)
        except Exception as exc:
            log.warning("policy.after failed for %s", call.name, exc_info=True)
            extra = f"(PostToolUse hook failed: {_exc_text(exc)})"
        content = self._cap(output.content, ctx)
        if verdict.additional_context:
            content = f"{content}\n\n{verdict.additional_context}"
        if extra:
            content = f"{content}\n\n{extra}"
        blocked = isinstance(extra, BlockedResult)  # a PostToolUse hook's block: an error
        return ToolResultBlock(
            tool_use_id=call.id, content=content, is_error=output.is_error or blocked
        )

    def _plan_refused(
        self, call: ToolUseBlock, tool: Tool[Any], args: BaseModel, ctx: ToolContext
    ) -> ToolResultBlock:
        """Refuse a non-read-only call in plan mode; a policy with a ``refused(call, request,
        ctx, reason)`` method is told (the team runtime journals every denial)."""
        reason = _plan_refusal(call.name)
        refused = getattr(self.policy, "refused", None)
        if refused is not None:
            try:
                refused(call, tool.permission_request(args, ctx), ctx, reason)
            except Exception:
                log.warning("policy.refused failed for %s", call.name, exc_info=True)
        return _error(call, reason)

    def _cap(self, content: str, ctx: ToolContext) -> str:
        try:
            return cap_text(content, max_chars=self.max_output_chars, outputs_dir=ctx.outputs_dir)
        except OSError:
            log.warning("could not spill oversize output", exc_info=True)
            return cap_text(content, max_chars=self.max_output_chars, outputs_dir=None)


def _run_tool(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> ToolOutput:
    try:
        output = tool.run(args, ctx)
    except ToolError as exc:
        return ToolOutput(str(exc), is_error=True)
    except BaseException as exc:  # SystemExit/KeyboardInterrupt from a tool must not escape
        log.warning("tool %s raised", tool.name, exc_info=True)
        return ToolOutput(f"Tool {tool.name} failed: {_exc_text(exc)}", is_error=True)
    if not isinstance(output, ToolOutput):
        return ToolOutput(f"Tool {tool.name} returned {type(output).__name__}", is_error=True)
    return output


def _exc_text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _plan_refusal(name: str) -> str:
    return (
        f"{name} is not available in plan mode (read-only): only read-only tools may run "
        "until the plan is approved."
    )


def _error(call: ToolUseBlock, text: str) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=call.id, content=text, is_error=True)
