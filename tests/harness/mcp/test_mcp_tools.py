"""MCP tools through the real executor and policy: results, caps, schemas, permissions, hooks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.hooks import HookResult, HookRunner
from harness.mcp.catalog import McpToolset
from harness.mcp.client import McpManager
from harness.mcp.config import McpOptions, load_mcp_servers
from harness.mcp.tools import McpTool, hints_text, render_result
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolResultBlock, ToolUseBlock
from harness.tools.base import PermissionRequest, ToolContext
from harness.tools.executor import ToolExecutor
from harness.tools.registry import ToolRegistry
from tests.harness.mcp_servers import basic_server


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpManager]:
    root = tmp_path_factory.mktemp("mcp-tools")
    m = McpManager(load_mcp_servers(root, {"basic": basic_server()}), root=root)
    yield m
    m.close()


@pytest.fixture(scope="module")
def toolset(manager: McpManager) -> McpToolset:
    return McpToolset.build(manager)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(agent="lead", root=tmp_path, cwd=tmp_path, outputs_dir=tmp_path / "out")


def run(
    toolset: McpToolset,
    ctx: ToolContext,
    name: str,
    args: dict[str, Any],
    policy: HarnessPolicy | None = None,
    **executor_kw: Any,
) -> ToolResultBlock:
    policy = policy or HarnessPolicy(Permissions(allow=["mcp__basic"]))
    executor = ToolExecutor(ToolRegistry(toolset.initial_tools()), policy, **executor_kw)
    return executor.run_one(ToolUseBlock(id="t1", name=name, input=args), ctx)


def test_tools_are_offered_by_model_name_with_schemas_passed_through(
    toolset: McpToolset, manager: McpManager
) -> None:
    registry = ToolRegistry(toolset.initial_tools())
    names = registry.names()
    assert "mcp__basic__add" in names and "mcp__basic__echo" in names
    assert {"list_mcp_resources", "read_mcp_resource"} <= set(names)
    specs = {s.name: s for s in registry.specs()}
    raw = next(t for t in manager.tools("basic") if t.name == "add")
    assert specs["mcp__basic__add"].input_schema == raw.input_schema
    assert specs["mcp__basic__add"].description.startswith("Add two integers.")
    assert [s.name for s in registry.specs()] == sorted(s.name for s in registry.specs())
    assert not toolset.deferred


def test_results_text_structured_and_errors(toolset: McpToolset, ctx: ToolContext) -> None:
    ok = run(toolset, ctx, "mcp__basic__add", {"a": 1, "b": 2})
    assert (ok.content, ok.is_error) == ("3", False)
    err = run(toolset, ctx, "mcp__basic__fail", {"message": "disk on fire"})
    assert err.is_error
    assert "disk on fire" in err.content


def test_images_and_embedded_resources_become_text(toolset: McpToolset, ctx: ToolContext) -> None:
    out = run(toolset, ctx, "mcp__basic__picture", {})
    lines = out.content.splitlines()
    assert lines[0] == "here is a picture"
    assert lines[1].startswith("[image image/png, ") and lines[1].endswith("bytes: not shown]")
    assert "[resource memo://inline]" in out.content and "inline memo" in out.content
    assert "iVBOR" not in out.content  # no base64 in the context


def test_render_result_shows_structured_content_only_when_the_text_lacks_it() -> None:
    class Block:
        type = "text"

        def __init__(self, text: str) -> None:
            self.text = text

    class Result:
        def __init__(self, content: list[Any], structured: Any, is_error: bool = False) -> None:
            self.content, self.structured_content, self.is_error = content, structured, is_error

    same = render_result(Result([Block('{"a": 1}')], {"a": 1}))
    assert same.content == '{"a": 1}'
    only = render_result(Result([], {"rows": [1, 2]}))
    assert only.content == 'Structured content:\n{"rows": [1, 2]}'
    differs = render_result(Result([Block("two rows")], {"rows": [1, 2]}))
    assert differs.content == 'two rows\nStructured content:\n{"rows": [1, 2]}'
    empty_error = render_result(Result([], None, is_error=True))
    assert empty_error.is_error and "without a message" in empty_error.content


def test_big_results_are_capped_and_spilled_like_builtins(
    toolset: McpToolset, ctx: ToolContext
) -> None:
    out = run(toolset, ctx, "mcp__basic__big", {"n": 50_000}, max_output_chars=2_000)
    assert len(out.content) < 3_000
    assert "omitted of 50000" in out.content
    spilled = list((ctx.outputs_dir or Path()).iterdir())
    assert len(spilled) == 1
    assert len(spilled[0].read_text()) == 50_000


def test_input_is_checked_against_the_servers_schema_before_the_call(
    toolset: McpToolset, ctx: ToolContext
) -> None:
    seen: list[str] = []
    hooks = HookRunner()
    hooks.register("PreToolUse", lambda event, payload: seen.append(payload["tool_name"]))
    policy = HarnessPolicy(Permissions(allow=["mcp__basic"]), hooks)
    out = run(toolset, ctx, "mcp__basic__add", {"a": "one"}, policy)
    assert out.is_error
    assert "Invalid input for tool 'mcp__basic__add'" in out.content
    assert "'b' is a required property" in out.content
    assert seen == []  # refused before hooks and permissions


def test_mcp_tools_ask_by_default_and_are_refused_without_an_approver(
    toolset: McpToolset, ctx: ToolContext
) -> None:
    out = run(toolset, ctx, "mcp__basic__echo", {"text": "hi"}, HarnessPolicy(Permissions()))
    assert out.is_error
    assert "Permission denied for mcp__basic__echo" in out.content
    assert "needs approval" in out.content


def test_an_approver_sees_the_ask_and_can_allow(toolset: McpToolset, ctx: ToolContext) -> None:
    asked: list[PermissionRequest] = []

    def approver(request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        asked.append(request)
        return True

    policy = HarnessPolicy(Permissions(), approver=approver)
    out = run(toolset, ctx, "mcp__basic__echo", {"text": "hi"}, policy)
    assert (out.content, out.is_error) == ("hi", False)
    assert [r.tool for r in asked] == ["mcp__basic__echo"]
    assert not asked[0].read_only  # the server's readOnlyHint grants nothing


@pytest.mark.parametrize("rule", ["mcp__basic__echo", "mcp__basic__*", "mcp__basic"])
def test_allow_rules(toolset: McpToolset, ctx: ToolContext, rule: str) -> None:
    out = run(
        toolset, ctx, "mcp__basic__echo", {"text": "ok"}, HarnessPolicy(Permissions(allow=[rule]))
    )
    assert (out.content, out.is_error) == ("ok", False)


def test_a_deny_rule_beats_an_allow_rule(toolset: McpToolset, ctx: ToolContext) -> None:
    policy = HarnessPolicy(Permissions(allow=["mcp__basic__*"], deny=["mcp__basic__wipe"]))
    denied = run(toolset, ctx, "mcp__basic__wipe", {"target": "prod"}, policy)
    assert denied.is_error and "deny rule mcp__basic__wipe" in denied.content
    assert not run(toolset, ctx, "mcp__basic__echo", {"text": "x"}, policy).is_error


def test_annotations_grant_nothing_in_plan_mode(toolset: McpToolset, ctx: ToolContext) -> None:
    policy = HarnessPolicy(Permissions(allow=["mcp__basic"], mode="plan"))
    out = run(toolset, ctx, "mcp__basic__echo", {"text": "x"}, policy)
    assert out.is_error and "plan mode" in out.content
    tool = ToolRegistry(toolset.initial_tools()).get("mcp__basic__echo")
    assert isinstance(tool, McpTool)
    assert "server hints, unverified: read-only, not destructive" in tool.description


def test_a_pre_tool_use_hook_on_mcp_tools(toolset: McpToolset, ctx: ToolContext) -> None:
    payloads: list[dict[str, Any]] = []

    def guard(event: str, payload: dict[str, Any]) -> HookResult | None:
        payloads.append(payload)
        if payload["tool_input"].get("target") == "prod":
            return HookResult(blocked=True, reason="never wipe prod")
        return None

    hooks = HookRunner()
    hooks.register("PreToolUse", guard, matcher="mcp__.*")
    policy = HarnessPolicy(Permissions(allow=["mcp__basic", "list_mcp_resources"]), hooks)
    blocked = run(toolset, ctx, "mcp__basic__wipe", {"target": "prod"}, policy)
    assert blocked.is_error and "never wipe prod" in blocked.content
    assert run(toolset, ctx, "mcp__basic__wipe", {"target": "dev"}, policy).content == "wiped dev"
    run(toolset, ctx, "list_mcp_resources", {}, policy)  # not an mcp__ tool: no hook
    assert [p["tool_name"] for p in payloads] == ["mcp__basic__wipe", "mcp__basic__wipe"]
    assert payloads[0]["agent_name"] == "lead"


def test_a_command_hook_can_allow_what_the_default_would_ask(
    toolset: McpToolset, ctx: ToolContext
) -> None:
    from harness.settings import HookSettings

    answer = {"hookSpecificOutput": {"permissionDecision": "allow"}}
    settings = HookSettings.parse(
        {
            "PreToolUse": [
                {"matcher": "mcp__.*", "hooks": [{"command": f"echo '{json.dumps(answer)}'"}]}
            ]
        }
    )
    policy = HarnessPolicy(Permissions(), HookRunner(settings))
    out = run(toolset, ctx, "mcp__basic__echo", {"text": "via hook"}, policy)
    assert (out.content, out.is_error) == ("via hook", False)


def test_resource_tools(toolset: McpToolset, ctx: ToolContext) -> None:
    listing = run(toolset, ctx, "list_mcp_resources", {})
    assert "basic  memo://greeting  greeting (text/plain) - A greeting" in listing.content
    read = run(toolset, ctx, "read_mcp_resource", {"server": "basic", "uri": "memo://greeting"})
    assert read.content == "[resource memo://greeting]\nhello from the memo"
    blob = run(toolset, ctx, "read_mcp_resource", {"server": "basic", "uri": "memo://data"})
    assert blob.content == "[resource memo://data: application/octet-stream, 3 bytes: not shown]"
    bad = run(toolset, ctx, "read_mcp_resource", {"server": "nope", "uri": "x://y"})
    assert bad.is_error and "no MCP server 'nope'" in bad.content


def test_hints_text() -> None:
    assert hints_text({}) == ""
    assert hints_text({"readOnlyHint": False, "destructiveHint": True, "title": "x"}) == (
        "not read-only, destructive"
    )


def test_a_crash_reaches_the_agent_as_a_tool_error(tmp_path: Path, ctx: ToolContext) -> None:
    manager = McpManager(
        load_mcp_servers(tmp_path, {"basic": basic_server()}),
        root=tmp_path,
        options=McpOptions(max_restarts=1),
    )
    try:
        toolset = McpToolset.build(manager)
        out = run(toolset, ctx, "mcp__basic__crash", {})
        assert out.is_error and "stopped during tool 'crash'" in out.content
        again = run(toolset, ctx, "mcp__basic__echo", {"text": "back"})
        assert (again.content, again.is_error) == ("back", False)
    finally:
        manager.close()
