"""HarnessPolicy: hooks first, a hook's allow never beats a deny, ask goes to the approver."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.hooks import HookResult, HookRunner
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolUseBlock
from harness.settings import HookEvent, HookSettings
from harness.tools.base import PermissionRequest, ToolContext, ToolOutput


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / ".git").mkdir()
    return ToolContext(agent="alice", root=tmp_path, cwd=tmp_path, session_id="s")


def bash(command: str) -> tuple[ToolUseBlock, PermissionRequest]:
    call = ToolUseBlock(id="t1", name="bash", input={"command": command})
    return call, PermissionRequest(tool="bash", kind="shell", target=command)


def hook_says(result: HookResult, event: HookEvent = "PreToolUse") -> HookRunner:
    r = HookRunner()
    r.register(event, lambda e, d: result)
    return r


class Approver:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        self.asked.append(reason)
        return self.answer


def test_ask_without_approver_is_denied_with_an_explanation(ctx: ToolContext) -> None:
    v = HarnessPolicy(Permissions()).before(*bash("npm install"), ctx)
    assert v.decision == "deny"
    assert "no approver" in v.reason


def test_ask_goes_to_the_approver(ctx: ToolContext) -> None:
    yes, no = Approver(True), Approver(False)
    assert (
        HarnessPolicy(Permissions(), approver=yes).before(*bash("npm install"), ctx).decision
        == "allow"
    )
    assert yes.asked and "npm install" in yes.asked[0]
    assert (
        HarnessPolicy(Permissions(), approver=no).before(*bash("npm install"), ctx).decision
        == "deny"
    )
    assert not Approver(True).asked


def test_failing_approver_denies(ctx: ToolContext) -> None:
    def boom(request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        raise TimeoutError("nobody answered")

    v = HarnessPolicy(Permissions(), approver=boom).before(*bash("npm install"), ctx)
    assert v.decision == "deny" and "nobody answered" in v.reason


def test_hook_block_denies_even_an_allowed_call(ctx: ToolContext) -> None:
    policy = HarnessPolicy(
        Permissions(allow=["Bash"]), hooks=hook_says(HookResult(blocked=True, reason="frozen"))
    )
    v = policy.before(*bash("ls"), ctx)
    assert v.decision == "deny" and "frozen" in v.reason


def test_hook_allow_never_overrides_a_deny_rule_or_a_protected_path(ctx: ToolContext) -> None:
    allow = hook_says(HookResult(permission_decision="allow"))
    policy = HarnessPolicy(Permissions(deny=["Bash(rm:*)"]), hooks=allow, approver=Approver(True))
    assert policy.before(*bash("rm -rf x"), ctx).decision == "deny"
    assert policy.before(*bash("bash -c 'rm x'"), ctx).decision == "deny"
    assert policy.before(*bash("echo x > .git/config"), ctx).decision == "deny"
    call = ToolUseBlock(id="t", name="write_file", input={"path": ".git/config"})
    req = PermissionRequest(
        tool="write_file", kind="write", target=".git/config", paths=(".git/config",)
    )
    assert policy.before(call, req, ctx).decision == "deny"


def test_hook_allow_answers_a_default_ask_but_not_an_ask_rule(ctx: ToolContext) -> None:
    allow = hook_says(HookResult(permission_decision="allow"))
    assert (
        HarnessPolicy(Permissions(), hooks=allow).before(*bash("npm test"), ctx).decision == "allow"
    )
    strict = HarnessPolicy(Permissions(ask=["Bash(npm:*)"]), hooks=allow)
    assert strict.before(*bash("npm test"), ctx).decision == "deny"  # ask, and no approver


def test_hook_ask_turns_allow_into_ask(ctx: ToolContext) -> None:
    ask = hook_says(HookResult(permission_decision="ask", reason="double-check"))
    approver = Approver(False)
    v = HarnessPolicy(Permissions(), hooks=ask, approver=approver).before(*bash("ls"), ctx)
    assert v.decision == "deny"
    assert approver.asked == ["double-check"]


def test_updated_input_is_rechecked(ctx: ToolContext) -> None:
    rewrite = hook_says(HookResult(updated_input={"command": "rm -rf x"}))
    policy = HarnessPolicy(Permissions(allow=["Bash(ls:*)"], deny=["Bash(rm:*)"]), hooks=rewrite)
    assert policy.before(*bash("ls"), ctx).decision == "deny"
    safe = hook_says(HookResult(updated_input={"command": "ls -la"}, additional_context="note"))
    v = HarnessPolicy(Permissions(), hooks=safe).before(*bash("ls"), ctx)
    assert v.decision == "allow"
    assert v.updated_input == {"command": "ls -la"}
    assert v.additional_context == "note"


def test_command_hooks_through_the_policy(ctx: ToolContext) -> None:
    settings = HookSettings.parse(
        {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"command": "echo 'not today' >&2; exit 2"}]}
            ]
        }
    )
    policy = HarnessPolicy(Permissions(allow=["Bash"]), hooks=HookRunner(settings=settings))
    v = policy.before(*bash("ls"), ctx)
    assert v.decision == "deny" and "not today" in v.reason


def test_after_runs_post_hooks(ctx: ToolContext) -> None:
    seen: dict[str, Mapping[str, Any]] = {}

    def post(event: HookEvent, data: Mapping[str, Any]) -> HookResult:
        seen[event] = data
        return HookResult(additional_context=f"{event} saw it")

    hooks = HookRunner()
    hooks.register("PostToolUse", post)
    hooks.register("PostToolUseFailure", post)
    policy = HarnessPolicy(Permissions(), hooks=hooks)
    call, _ = bash("ls")
    assert policy.after(call, ToolOutput("a b"), ctx) == "PostToolUse saw it"
    assert seen["PostToolUse"]["tool_response"] == "a b"
    assert policy.after(call, ToolOutput("bad", is_error=True), ctx) == "PostToolUseFailure saw it"
    assert seen["PostToolUseFailure"]["error"] == "bad"
    assert seen["PostToolUse"]["agent_name"] == "alice"
    assert HarnessPolicy(Permissions()).after(call, ToolOutput("x"), ctx) is None


def test_plan_mode_via_context(ctx: ToolContext) -> None:
    ctx.read_only = True
    policy = HarnessPolicy(Permissions(), approver=Approver(True))
    assert policy.before(*bash("npm test"), ctx).decision == "deny"
    assert policy.before(*bash("git diff"), ctx).decision == "allow"


def test_hook_ask_in_dont_ask_mode_is_denied_without_asking(ctx: ToolContext) -> None:
    ask = hook_says(HookResult(permission_decision="ask", reason="check"))
    approver = Approver(True)
    policy = HarnessPolicy(Permissions(mode="dontAsk"), hooks=ask, approver=approver)
    v = policy.before(*bash("ls"), ctx)
    assert v.decision == "deny" and "dontAsk" in v.reason
    assert approver.asked == []


def test_hook_allow_in_dont_ask_mode_never_beats_an_ask_rule(ctx: ToolContext) -> None:
    allow = hook_says(HookResult(permission_decision="allow"))
    policy = HarnessPolicy(Permissions(ask=["Bash(npm:*)"], mode="dontAsk"), hooks=allow)
    assert policy.before(*bash("npm test"), ctx).decision == "deny"
    assert policy.before(*bash("make"), ctx).decision == "allow"


def test_permission_request_rewrite_is_rechecked_against_deny_rules(ctx: ToolContext) -> None:
    rewrite = hook_says(
        HookResult(permission_decision="allow", updated_input={"command": "rm -rf x"}),
        "PermissionRequest",
    )
    policy = HarnessPolicy(Permissions(deny=["Bash(rm:*)"]), hooks=rewrite)
    v = policy.before(*bash("npm install"), ctx)
    assert v.decision == "deny" and "Bash(rm:*)" in v.reason
    fine = hook_says(
        HookResult(permission_decision="allow", updated_input={"command": "npm ci"}),
        "PermissionRequest",
    )
    v = HarnessPolicy(Permissions(), hooks=fine).before(*bash("npm install"), ctx)
    assert v.decision == "allow" and v.updated_input == {"command": "npm ci"}


def test_post_tool_use_block_is_a_blocked_result(ctx: ToolContext) -> None:
    from harness.tools.base import BlockedResult

    policy = HarnessPolicy(
        Permissions(), hooks=hook_says(HookResult(blocked=True, reason="lint"), "PostToolUse")
    )
    note = policy.after(bash("ls")[0], ToolOutput("ok"), ctx)
    assert isinstance(note, BlockedResult) and "lint" in note
