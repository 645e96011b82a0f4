"""Shared pieces of the attack suites: the real policy stack, hashes, process waits."""

from __future__ import annotations

import hashlib
import os
import select
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolResultBlock, ToolUseBlock
from harness.settings import PermissionMode
from harness.tools.base import (
    PermissionRequest,
    ToolContext,
    ToolPolicy,
)
from harness.tools.executor import ToolExecutor
from harness.tools.registry import ToolRegistry, builtin_tools

MODES: tuple[PermissionMode, ...] = (
    "default",
    "acceptEdits",
    "plan",
    "dontAsk",
    "bypassPermissions",
)


def sha256(path: Path) -> str:
    """The file's hash, or a marker when it does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return "(missing)"


def tree_hashes(root: Path, rels: Sequence[str]) -> dict[str, str]:
    """Hashes of files (and listings of directories) under ``root``."""
    out: dict[str, str] = {}
    for rel in rels:
        p = root / rel
        if p.is_dir() and not p.is_symlink():
            out[rel] = "dir:" + ",".join(sorted(c.name for c in p.iterdir()))
        else:
            out[rel] = sha256(p)
    return out


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` has exited (a pidfd becomes readable); waits, never polls."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


_ids = iter(range(1, 10**9))


def call(tool: str, /, **args: Any) -> ToolUseBlock:
    return ToolUseBlock(id=f"toolu_{next(_ids)}", name=tool, input=args)


@dataclass
class RecordingApprover:
    """An approver that refuses and records what it was asked (so an ask is visible)."""

    asked: list[tuple[str, str | None, str]] = field(default_factory=list)

    def __call__(self, request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        self.asked.append((request.tool, request.target, reason))
        return False


@dataclass
class Stack:
    """The real policy stack with the built-in tools, and what it decided."""

    executor: ToolExecutor
    ctx: ToolContext
    approver: RecordingApprover

    def run(self, tool: str, /, **args: Any) -> ToolResultBlock:
        return self.executor.run_one(call(tool, **args), self.ctx)

    def outcome(self, tool: str, /, **args: Any) -> str:
        """``"asked"``, ``"denied"`` or ``"allowed"`` for one call (the approver always refuses)."""
        before = len(self.approver.asked)
        result = self.run(tool, **args)
        if len(self.approver.asked) > before:
            return "asked"
        if result.is_error and "Permission denied" in str(result.content):
            return "denied"
        return "allowed"


def stack(
    root: Path,
    *,
    mode: PermissionMode = "default",
    allow: Sequence[str] = (),
    deny: Sequence[str] = (),
    wrap: Any = None,
    cwd: Path | None = None,
) -> Stack:
    """``HarnessPolicy`` + ``Permissions`` + ``ToolExecutor`` over the built-in tools.

    ``wrap`` (e.g. ``lambda p: confine_policy(p, worktree, repo)``) wraps the policy.
    """
    approver = RecordingApprover()
    policy: ToolPolicy = HarnessPolicy(
        Permissions(allow=allow, deny=deny, mode=mode, home=root.parent / "home"),
        approver=approver,
    )
    if wrap is not None:
        policy = wrap(policy)
    ctx = ToolContext(agent="mallory", root=root, cwd=cwd or root, outputs_dir=None)
    return Stack(ToolExecutor(ToolRegistry(builtin_tools()), policy), ctx, approver)
