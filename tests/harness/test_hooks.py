"""Hooks: the Claude Code command-hook protocol, matchers, failures, in-process callables."""

from __future__ import annotations

import json
import os
import select
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.hooks import HookResult, HookRunner
from harness.settings import HookEvent, HookSettings

PY = sys.executable


def runner(event: str, command: str, *, matcher: str = "", timeout: float = 10) -> HookRunner:
    settings = HookSettings.parse(
        {
            event: [
                {
                    "matcher": matcher,
                    "hooks": [{"type": "command", "command": command, "timeout": timeout}],
                }
            ]
        }
    )
    return HookRunner(settings=settings, session_id="s-1", transcript_path="/t.jsonl")


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "hook.py"
    path.write_text(body)
    return f"{PY} {path}"


def payload(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"cwd": str(tmp_path), "agent_name": "alice", "tool_name": "Bash",
            "tool_input": {"command": "ls"}} | extra  # fmt: skip


def test_stdin_carries_the_claude_code_fields_and_runs_in_cwd(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    cmd = script(
        tmp_path,
        "import json, os, sys\n"
        f"d = json.load(sys.stdin); d['pwd'] = os.getcwd(); d['tty'] = os.isatty(0)\n"
        f"open({str(out)!r}, 'w').write(json.dumps(d))\n",
    )
    outcome = runner("PreToolUse", cmd).run("PreToolUse", payload(tmp_path))
    assert outcome.errors == () and not outcome.blocked
    seen = json.loads(out.read_text())
    assert seen["hook_event_name"] == "PreToolUse"
    assert seen["session_id"] == "s-1"
    assert seen["transcript_path"] == "/t.jsonl"
    assert seen["agent_name"] == "alice"
    assert seen["tool_name"] == "Bash"
    assert seen["tool_input"] == {"command": "ls"}
    assert seen["pwd"] == str(tmp_path)
    assert seen["tty"] is False


def test_exit_2_blocks_with_stderr(tmp_path: Path) -> None:
    outcome = runner("PreToolUse", "echo 'no rm here' >&2; exit 2").run(
        "PreToolUse", payload(tmp_path)
    )
    assert outcome.blocked
    assert outcome.reason == "no rm here"


def test_other_exit_codes_are_non_blocking_errors(tmp_path: Path) -> None:
    outcome = runner("PreToolUse", "echo oops >&2; exit 3").run("PreToolUse", payload(tmp_path))
    assert not outcome.blocked
    assert (
        len(outcome.errors) == 1 and "code 3" in outcome.errors[0] and "oops" in outcome.errors[0]
    )


def test_invalid_json_is_a_non_blocking_error(tmp_path: Path) -> None:
    outcome = runner("PreToolUse", "echo '{not json'").run("PreToolUse", payload(tmp_path))
    assert not outcome.blocked
    assert "invalid JSON" in outcome.errors[0]


def test_missing_command_is_a_reported_error(tmp_path: Path) -> None:
    outcome = runner("PreToolUse", "/nonexistent/hook --flag").run("PreToolUse", payload(tmp_path))
    assert not outcome.blocked
    assert "could not start" in outcome.errors[0]


def test_missing_cwd_is_a_reported_error(tmp_path: Path) -> None:
    outcome = runner("PreToolUse", "true").run("PreToolUse", payload(tmp_path / "gone"))
    assert "could not start" in outcome.errors[0]


def test_a_hanging_hook_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    cmd = f"sleep 300 & echo $! > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; wait"
    # The timeout leaves room for bash to start and write the pid on a loaded machine.
    outcome = runner("PreToolUse", cmd, timeout=2.0).run("PreToolUse", payload(tmp_path))
    assert not outcome.blocked
    assert "timed out" in outcome.errors[0]
    child = int(pidfile.read_text())
    # The group was SIGKILLed; delivery is asynchronous, so wait (bounded) for the child to end:
    # a pidfd becomes readable once the process has exited (a zombie counts).
    try:
        fd = os.pidfd_open(child)
    except ProcessLookupError:
        return  # already gone and reaped
    try:
        ready, _, _ = select.select([fd], [], [], 10.0)
    finally:
        os.close(fd)
    assert ready, "the hook's background child survived the kill of its group"


def test_json_output_fields(tmp_path: Path) -> None:
    out = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": "check with a human",
            "updatedInput": {"command": "ls -la"},
            "additionalContext": "from specific",
        },
        "additionalContext": "from top",
    }
    outcome = runner("PreToolUse", f"echo '{json.dumps(out)}'").run("PreToolUse", payload(tmp_path))
    assert outcome.errors == ()
    assert outcome.permission_decision == "ask"
    assert outcome.permission_reason == "check with a human"
    assert outcome.updated_input == {"command": "ls -la"}
    assert outcome.additional_context == "from top\nfrom specific"


def test_decision_block_and_continue_false(tmp_path: Path) -> None:
    block = runner("PreToolUse", """echo '{"decision": "block", "reason": "nope"}'""")
    assert block.run("PreToolUse", payload(tmp_path)).reason == "nope"
    stop = runner("Stop", """echo '{"continue": false, "stopReason": "enough"}'""")
    outcome = stop.run("Stop", {"cwd": str(tmp_path), "agent_name": "alice"})
    assert outcome.stop and outcome.stop_reason == "enough"


def test_plain_stdout_is_context_for_prompt_events(tmp_path: Path) -> None:
    r = runner("UserPromptSubmit", "echo 'today is Sunday'")
    outcome = r.run("UserPromptSubmit", {"cwd": str(tmp_path), "agent_name": "a", "prompt": "hi"})
    assert outcome.additional_context == "today is Sunday"


@pytest.mark.parametrize(
    ("matcher", "tool", "runs"),
    [("Bash", "Bash", True), ("Bash", "bash", True), ("bash", "Bash", True),
     ("Edit|Write", "Edit", True), ("Edit, Write", "Write", True), ("Read", "Write", False),
     ("Read", "Grep", False), ("Edit", "Write", False), ("Agent", "Task", True),
     ("Bash", "BashOutput", False), ("", "anything", True), ("*", "x", True),
     ("mcp__gh__.*", "mcp__gh__list", True), ("mcp__gh__.*", "mcp__other__x", False),
     ("mcp__.*", "mcp__gh__list", True), ("Edit.*", "NotebookEdit", True),
     ("^Edit$", "NotebookEdit", False), ("^Write$", "write_file", True)],
)  # fmt: skip
def test_matchers(tmp_path: Path, matcher: str, tool: str, runs: bool) -> None:
    r = runner("PreToolUse", "exit 2", matcher=matcher)
    assert r.run("PreToolUse", payload(tmp_path, tool_name=tool)).blocked is runs


def test_env_names_the_project_and_agent(tmp_path: Path) -> None:
    r = runner("PreToolUse", 'echo "$TEAMCTL_AGENT $CLAUDE_PROJECT_DIR" >&2; exit 2')
    assert r.run("PreToolUse", payload(tmp_path)).reason == f"alice {tmp_path}"


def test_in_process_callables(tmp_path: Path) -> None:
    seen: list[Mapping[str, Any]] = []

    def audit(event: HookEvent, data: Mapping[str, Any]) -> HookResult | None:
        seen.append(data)
        return HookResult(additional_context="audited")

    def broken(event: HookEvent, data: Mapping[str, Any]) -> HookResult | None:
        raise RuntimeError("bug in hook")

    r = HookRunner()
    r.register("PostToolUse", audit, matcher="Bash")
    r.register("PostToolUse", broken)
    outcome = r.run("PostToolUse", payload(tmp_path, tool_response="ok"))
    assert outcome.additional_context == "audited"
    assert "bug in hook" in outcome.errors[0]
    assert seen[0]["hook_event_name"] == "PostToolUse"
    assert not r.has_hooks("Stop")


def test_first_block_stops_later_hooks(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    settings = HookSettings.parse(
        {"PreToolUse": [{"hooks": [{"command": "exit 2"}, {"command": f"touch {marker}"}]}]}
    )
    outcome = HookRunner(settings=settings).run("PreToolUse", payload(tmp_path))
    assert outcome.blocked
    assert not marker.exists()


def test_settings_reject_unknown_events_and_keys() -> None:
    with pytest.raises(ValueError):
        HookSettings.parse({"PreToolUsee": []})
    with pytest.raises(ValueError):
        HookSettings.parse({"PreToolUse": [{"matcher": "x", "hook": []}]})
    assert os.environ.get("TEAMCTL_AGENT") is None


def outcome_of(tmp_path: Path, output: object, code: int = 0, event: str = "PreToolUse") -> Any:
    body = f"import sys\nsys.stdin.read()\nprint({json.dumps(output)!r})\nsys.exit({code})\n"
    data = payload(tmp_path) if event.startswith(("Pre", "Post")) else {"cwd": str(tmp_path)}
    return runner(event, script(tmp_path, body)).run(event, data)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "output",
    [{"decision": "allow"}, {"decision": "deny"}, {"decision": "ask"},
     {"hookSpecificOutput": {"permissionDecision": "yes"}},
     {"hookSpecificOutput": {"hookEventName": "PostToolUse", "permissionDecision": "allow"}},
     {"continue": "no"}, {"systemMessage": 3}],
)  # fmt: skip
def test_output_outside_the_schema_is_ignored_with_an_error(tmp_path: Path, output: Any) -> None:
    outcome = outcome_of(tmp_path, output)
    assert outcome.permission_decision is None and not outcome.blocked and not outcome.stop
    assert len(outcome.errors) == 1 and "schema" in outcome.errors[0]


def test_decision_block_outside_pre_tool_use_and_approve_elsewhere(tmp_path: Path) -> None:
    assert outcome_of(tmp_path, {"decision": "approve"}).permission_decision == "allow"
    stop = outcome_of(tmp_path, {"decision": "block", "reason": "again"}, event="Stop")
    assert stop.blocked and stop.reason == "again"
    assert not outcome_of(tmp_path, {"decision": "approve"}, event="Stop").blocked
    assert not outcome_of(tmp_path, {"decision": "block"}, event="SessionStart").blocked


def test_defer_is_no_decision(tmp_path: Path) -> None:
    out = {"hookSpecificOutput": {"permissionDecision": "defer", "updatedInput": {"command": "x"}}}
    outcome = outcome_of(tmp_path, out)
    assert outcome.errors == () and outcome.permission_decision is None
    assert outcome.updated_input is None


def test_exit_2_blocks_and_a_json_reason_wins_over_stderr(tmp_path: Path) -> None:
    body = (
        "import json, sys\nsys.stdin.read()\nprint('from stderr', file=sys.stderr)\n"
        "print(json.dumps({'hookSpecificOutput': {'permissionDecision': 'allow'}}))\nsys.exit(2)\n"
    )
    outcome = runner("PreToolUse", script(tmp_path, body)).run("PreToolUse", payload(tmp_path))
    assert outcome.blocked and outcome.reason == "from stderr"  # allow cannot undo exit 2
    deny = {"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "j"}}
    outcome = outcome_of(tmp_path, deny, code=2)
    assert outcome.blocked and outcome.reason == "j"


def test_json_on_another_exit_code_decides_alone(tmp_path: Path) -> None:
    deny = {"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "r"}}
    outcome = outcome_of(tmp_path, deny, code=1)
    assert outcome.errors == () and outcome.permission_decision == "deny" and outcome.blocked


def test_a_json_array_is_plain_text(tmp_path: Path) -> None:
    outcome = outcome_of(tmp_path, ["not", "an", "object"])
    assert outcome.errors == () and not outcome.blocked
    context = outcome_of(tmp_path, ["x"], event="UserPromptSubmit")
    assert context.additional_context == '["x"]'


def test_permission_request_decision_object(tmp_path: Path) -> None:
    allow = {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                    "decision": {"behavior": "allow",
                                                 "updatedInput": {"command": "ls"}}}}  # fmt: skip
    outcome = outcome_of(tmp_path, allow, event="PermissionRequest")
    assert outcome.permission_decision == "allow" and outcome.updated_input == {"command": "ls"}
    deny = {"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "m",
                                                "interrupt": True}}}  # fmt: skip
    outcome = outcome_of(tmp_path, deny, event="PermissionRequest")
    assert outcome.permission_decision == "deny" and outcome.reason == "m" and outcome.stop
    assert (
        "schema" in outcome_of(tmp_path, {"decision": "block"}, event="PermissionRequest").errors[0]
    )


@pytest.mark.parametrize(
    ("command", "runs"),
    [("rm -rf build", True), ("ls", False), ("FOO=1 rm x", True), ("ls && rm x", True),
     ("echo $(date)", True), ("rmdir x", False), ("rm", True)],
)  # fmt: skip
def test_if_condition_narrows_a_handler(tmp_path: Path, command: str, runs: bool) -> None:
    settings = HookSettings.parse(
        {"PreToolUse": [{"matcher": "Bash", "hooks": [{"command": "exit 2", "if": "Bash(rm *)"}]}]}
    )
    r = HookRunner(settings=settings)
    data = payload(tmp_path, tool_name="Bash", tool_input={"command": command})
    assert r.run("PreToolUse", data).blocked is runs


def test_if_condition_on_file_paths_and_non_tool_events(tmp_path: Path) -> None:
    settings = HookSettings.parse(
        {
            "PreToolUse": [{"hooks": [{"command": "exit 2", "if": "Edit(*.ts)"}]}],
            "Stop": [{"hooks": [{"command": "exit 2", "if": "Bash(*)"}]}],
        }
    )
    r = HookRunner(settings=settings)
    edit = payload(tmp_path, tool_name="Edit", tool_input={"file_path": str(tmp_path / "a.ts")})
    assert r.run("PreToolUse", edit).blocked
    edit["tool_input"] = {"file_path": str(tmp_path / "a.py")}
    assert not r.run("PreToolUse", edit).blocked
    assert not r.run("Stop", {"cwd": str(tmp_path)}).blocked  # `if` never runs off tool events


def test_async_hooks_do_not_decide(tmp_path: Path) -> None:
    settings = HookSettings.parse(
        {"PreToolUse": [{"hooks": [{"command": "exit 2", "async": True}]}]}
    )
    outcome = HookRunner(settings=settings).run("PreToolUse", payload(tmp_path))
    assert not outcome.blocked and outcome.ran == 0
