"""Every denied tool call of a hosted agent is journaled
(issue 8 item 7; docs/RELIABILITY.md, "What is guaranteed").

``JournaledPolicy`` wraps the ``ToolPolicy`` the runtime builds for a member. When ``before``
returns ``deny`` it appends, in one ``Board.execute``, ``permission.requested`` {request_id,
agent, tool, input, reason} and ``permission.decided`` {request_id, ``deny``, by ``policy``,
reason}, then returns the verdict unchanged. The pair is decided at once, so the live view and
``teamctl permissions`` never list it as pending.

Asks routed by a teammate's ``PermissionRouter`` are journaled by the router already: the router
is wrapped (``mark_routed``) so a call that reached it during ``before`` is known (per thread)
and not journaled twice. A write refused by the executor in plan mode (before the policy is
asked) is reported through ``refused``. A lead's ask without an approver, or with one that does not journal,
is denied by the policy and journaled here.

Journaling never changes the verdict: if the append fails the call is still denied (fail
closed) and a warning is logged. ``input`` is the permission request's subject plus the tool's
arguments, made strict JSON (no NaN, no lone surrogates) and bounded in size.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.board.protocols import new_permission_id
from harness.ports import ToolUseBlock
from harness.tools.base import (
    Approver,
    PermissionRequest,
    PolicyVerdict,
    ToolContext,
    ToolOutput,
    ToolPolicy,
)
from mailboxes.events import EventDraft, PermissionDecided, PermissionRequested, draft

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import TeamState

__all__ = [
    "BY",
    "JournaledPolicy",
    "confine_journaled",
    "journal_denials",
    "mark_routed",
    "safe_input",
]

log = logging.getLogger(__name__)

BY = "policy"
"""``permission.decided.by`` of a call the policy denied outright."""

MAX_STRING = 1_000
MAX_ITEMS = 50
MAX_DEPTH = 6
MAX_INPUT_BYTES = 8_192
MAX_REASON = 2_000

_local = threading.local()


def _routed() -> bool:
    return bool(getattr(_local, "routed", False))


def mark_routed(approver: Approver | None) -> Approver | None:
    """``approver`` (a teammate's ``PermissionRouter``, which journals its asks) wrapped so a
    call that reached it is not journaled again by ``JournaledPolicy``. Other approvers (or
    ``None``) are returned as they are: their denials are journaled by the wrapper."""
    from actors.runtime.permission_requests import PermissionRefused, PermissionRouter

    if not isinstance(approver, PermissionRouter):
        return approver
    router = approver

    def routed(request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        try:
            allowed = router(request, ctx, reason)
        except PermissionRefused:  # journaled, then refused
            _local.routed = True
            raise
        _local.routed = True
        return allowed

    return routed


def _text(value: str, limit: int = MAX_STRING) -> str:
    clean = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return clean if len(clean) <= limit else clean[:limit] + f"… [{len(clean) - limit} more]"


def _safe(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**63 else _text(str(value))
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return _text(value)
    if depth >= MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        items = list(value.items())
        out = {_text(str(k), 200): _safe(v, depth + 1) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            out["…"] = f"{len(items) - MAX_ITEMS} more keys"
        return out
    if isinstance(value, list | tuple):
        seq = [_safe(v, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            seq.append(f"… {len(value) - MAX_ITEMS} more items")
        return seq
    return _text(repr(value))


def safe_input(call: ToolUseBlock, request: PermissionRequest) -> dict[str, Any]:
    """The ``input`` journaled for a denied call: strict JSON, at most ``MAX_INPUT_BYTES``."""
    body: dict[str, Any] = {
        "kind": request.kind,
        "target": request.target,
        "paths": list(request.paths),
        "destructive": request.destructive,
        "args": dict(call.input),
    }
    out: dict[str, Any] = _safe(body, 0)
    text = json.dumps(out, ensure_ascii=False, allow_nan=False)
    if len(text.encode("utf-8")) <= MAX_INPUT_BYTES:
        return out
    short = text.encode("utf-8")[: MAX_INPUT_BYTES // 2].decode("utf-8", "ignore")
    return {"kind": request.kind, "target": _text(request.target or ""), "truncated": short}


class JournaledPolicy:
    """A ``ToolPolicy`` journaling each call ``inner`` denies without routing it."""

    def __init__(self, inner: ToolPolicy, board: Board, agent: str) -> None:
        self.inner = inner
        self.board = board
        self.agent = agent

    def around(self, inner: ToolPolicy) -> JournaledPolicy:
        """The same journaling around another policy (e.g. ``inner`` confined to a worktree)."""
        return JournaledPolicy(inner, self.board, self.agent)

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        outer = _routed()
        _local.routed = False
        try:
            verdict = self.inner.before(call, request, ctx)
            routed = _routed()
        except Exception as exc:  # the executor refuses the call: journal that too
            if not _routed():
                self.refused(call, request, ctx, f"the permission check failed: {exc}")
            raise
        finally:
            _local.routed = outer
        if verdict.decision == "deny" and not routed:
            self.refused(call, request, ctx, verdict.reason)
        return verdict

    def refused(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext, reason: str
    ) -> None:
        """Journal a refusal (also called by the executor for a write in plan mode); a journal
        that fails is logged, never raised: the call stays refused."""
        try:
            self._journal(call, request, ctx, reason)
        except Exception as exc:
            log.warning("could not journal the denial of %s by %s: %s", call.name, ctx.agent, exc)

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        return self.inner.after(call, output, ctx)

    def _journal(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext, reason: str
    ) -> None:
        agent = ctx.agent or self.agent
        rid = new_permission_id()
        why = _text(reason or "denied", MAX_REASON)
        asked = PermissionRequested(
            request_id=rid,
            agent=agent,
            tool=_text(request.tool or call.name, 200),
            input=safe_input(call, request),
            reason=why,
        )
        denied = PermissionDecided(request_id=rid, decision="deny", by=BY, reason=why)

        def decision(st: TeamState) -> Sequence[EventDraft]:
            return (
                draft(asked.TYPE, agent, asked, f"permission.requested:{rid}"),
                draft(denied.TYPE, BY, denied, f"permission.decided:{rid}"),
            )

        self.board.execute(decision)


def journal_denials(policy: ToolPolicy, board: Board, agent: str) -> JournaledPolicy:
    """``policy`` with its denials journaled on ``board`` as caused by ``agent``."""
    return JournaledPolicy(policy, board, agent)


def confine_journaled(policy: ToolPolicy, worktree: Path, repo_root: Path) -> ToolPolicy:
    """``worktree_confine.confine_policy`` that keeps confinement denials journaled when
    ``policy`` is a ``JournaledPolicy`` (confinement goes inside the journaling)."""
    from actors.worktrees.confine import confine_policy

    if isinstance(policy, JournaledPolicy):
        return policy.around(confine_policy(policy.inner, worktree, repo_root))
    return confine_policy(policy, worktree, repo_root)
