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
    return {"cwd": str(tmp_path), "agent_name": "alice", "tool_name": "bash",
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
    assert seen["tool_name"] == "bash"
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
    [("Bash", "bash", True), ("bash", "bash", True), ("Edit|Write", "edit_file", True),
     ("Read", "write_file", False), ("", "anything", True), ("*", "x", True),
     ("mcp__gh__.*", "mcp__gh__list", True), ("mcp__gh__.*", "mcp__other__x", False)],
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
