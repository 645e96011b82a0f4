"""``always`` at the console (issue 12 item 3): the session rule it remembers allows only what
it covers; the settings' deny and ask rules still win, and a compound shell command needs every
part covered. A refusal by an approver reaches the model without an "approver failed" warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from actors.runtime.permission_requests import HumanDesk, PermissionRefused, session_rule
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolUseBlock
from harness.settings import PermissionSettings
from harness.tools.base import PermissionRequest, ToolContext


def _ctx(root: Path) -> ToolContext:
    return ToolContext(root=root, cwd=root, agent="lead")


def _bash(command: str) -> PermissionRequest:
    return PermissionRequest("bash", "shell", command)


def test_always_remembers_edit_for_writes_and_the_program_for_shell_commands() -> None:
    assert session_rule(PermissionRequest("write_file", "write", "/r/a.txt", ("/r/a.txt",))) == (
        "Edit"
    )
    assert session_rule(_bash("git commit -m x")) == "Bash(git:*)"
    assert session_rule(PermissionRequest("mcp__time__now", "network")) == "mcp__time__now"


def test_a_session_rule_allows_what_it_covers_and_nothing_the_settings_forbid(
    tmp_path: Path,
) -> None:
    settings = PermissionSettings(ask=("Bash(git push:*)",), deny=("Bash(rm:*)",))
    desk = HumanDesk(present=True, permissions=settings)
    ctx = _ctx(tmp_path)
    assert desk.remembered(_bash("git commit -m x"), ctx) is None  # nothing remembered yet
    desk.remember("Bash(git:*)")
    assert desk.remembered(_bash("git commit -m x"), ctx) == "Bash(git:*)"
    assert desk.remembered(_bash("git push origin main"), ctx) is None  # an ask rule wins
    assert desk.remembered(_bash("git status; curl http://x"), ctx) is None  # every part
    assert desk.remembered(_bash("git log && rm -rf src"), ctx) is None  # a deny rule wins
    write = PermissionRequest("write_file", "write", str(tmp_path / "a.txt"))
    assert desk.remembered(write, ctx) is None
    desk.remember("Edit")
    assert desk.remembered(write, ctx) == "Bash(git:*), Edit"
    outside = PermissionRequest("write_file", "write", "/etc/passwd")
    assert desk.remembered(outside, ctx) is None


def test_a_refusal_is_the_denial_reason_not_an_approver_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        raise PermissionRefused("permission request perm-1 refused: nobody can approve it")

    policy = HarnessPolicy(Permissions(), approver=refuse)
    call = ToolUseBlock(id="t1", name="write_file", input={"path": "a.txt", "content": "x"})
    request = PermissionRequest("write_file", "write", str(tmp_path / "a.txt"))
    with caplog.at_level(logging.WARNING):
        verdict = policy.before(call, request, _ctx(tmp_path))
    assert verdict.decision == "deny"
    assert verdict.reason.endswith("; permission request perm-1 refused: nobody can approve it")
    assert "approver failed" not in caplog.text and "approver failed" not in verdict.reason
