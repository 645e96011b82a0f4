"""Hooks as Claude Code runs them, end to end: real hook scripts (modelled on the published
examples) run as subprocesses by a real ``Agent`` under the real ``HarnessPolicy``, with the
scripted model. Each test fails if the payload, the decision schema or the event wiring is wrong.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.agent import Agent, AgentConfig
from harness.hooks import HookRunner
from harness.model.scripted import ScriptedModel
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolResultBlock
from harness.settings import HookSettings, PermissionMode
from harness.tools.base import PermissionRequest, ToolContext

PY = sys.executable

# anthropics/claude-code examples/hooks/bash_command_validator_example.py, in substance.
BASH_VALIDATOR = """
import json, re, sys
data = json.load(sys.stdin)
if data.get("tool_name") != "Bash":
    sys.exit(0)
command = data.get("tool_input", {}).get("command", "")
rules = [(r"^grep\\b(?!.*\\|)", "Use 'rg' (ripgrep) instead of 'grep' for better performance"),
         (r"^find\\s+\\S+\\s+-name\\b", "Use 'rg --files -g pattern' instead of 'find -name'")]
issues = [message for pattern, message in rules if re.search(pattern, command)]
if issues:
    for message in issues:
        print(f"• {message}", file=sys.stderr)
    sys.exit(2)
"""

# The .env guard of disler/claude-code-hooks-mastery's pre_tool_use.py, in substance.
ENV_GUARD = """
import json, sys
data = json.load(sys.stdin)
tool, args = data.get("tool_name", ""), data.get("tool_input", {})
if tool in ("Read", "Edit", "MultiEdit", "Write"):
    path = args.get("file_path", "")
    if ".env" in path and not path.endswith(".env.sample"):
        print("BLOCKED: Access to .env files containing sensitive data is prohibited",
              file=sys.stderr)
        sys.exit(2)
if tool == "Bash" and ".env" in args.get("command", ""):
    print("BLOCKED: Access to .env files containing sensitive data is prohibited",
          file=sys.stderr)
    sys.exit(2)
"""

# Records its stdin and environment, one JSON line per call, in $LOG.
RECORDER = """
import json, os, sys
data = json.load(sys.stdin)
data["env"] = {k: os.environ.get(k) for k in ("CLAUDE_PROJECT_DIR", "TEAMCTL_AGENT",
                                              "ANTHROPIC_API_KEY")}
data["pwd"] = os.getcwd()
with open(os.environ["LOG"], "a") as f:
    f.write(json.dumps(data) + "\\n")
"""


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / "hooks" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    return f"{PY} {path}"


def hooks(**events: list[tuple[str, str]]) -> HookRunner:
    """``event=[(matcher, command), ...]`` as a settings ``hooks`` section."""
    raw = {
        event: [{"matcher": m, "hooks": [{"type": "command", "command": c}]} for m, c in pairs]
        for event, pairs in events.items()
    }
    return HookRunner(settings=HookSettings.parse(raw))


def echo(tmp_path: Path, name: str, output: dict[str, Any], exit_code: int = 0) -> str:
    body = f"import json, sys\nsys.stdin.read()\nprint(json.dumps({output!r}))\nsys.exit({exit_code})\n"
    return script(tmp_path, name, body)


class Approver:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        self.asked.append(request.tool)
        return self.answer


def make_agent(
    root: Path,
    steps: list[Any],
    runner: HookRunner,
    *,
    permissions: Permissions | None = None,
    approver: Approver | None = None,
    mode: PermissionMode | None = None,
    name: str = "lead",
) -> tuple[Agent, ScriptedModel]:
    (root / ".git").mkdir(parents=True, exist_ok=True)
    model = ScriptedModel({"agents": {name: {"steps": steps}}})
    policy = HarnessPolicy(permissions or Permissions(), runner, approver, mode)
    agent = Agent(
        AgentConfig(name=name, model="fake-model"),
        root=root,
        model=model,
        policy=policy,
        transcript_dir=root / ".team" / "transcripts",
        hook_runner=runner,
        session_id="sess-1",
    )
    return agent, model


def results(agent: Agent) -> list[ToolResultBlock]:
    return [b for m in agent.messages for b in m.content if isinstance(b, ToolResultBlock)]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_bash_validator_blocks_grep_and_the_model_reads_why(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("TODO: x\n")
    runner = hooks(PreToolUse=[("Bash", script(tmp_path, "validator", BASH_VALIDATOR))])
    steps = [
        {"tool_uses": [{"name": "bash", "input": {"command": "grep TODO notes.txt"}}]},
        {"match": "Use 'rg' \\(ripgrep\\) instead of 'grep'", "text": "switching to rg"},
    ]
    agent, model = make_agent(tmp_path, steps, runner, permissions=Permissions(allow=["Bash"]))
    assert agent.run_turn("find the todos").text == "switching to rg"
    model.assert_consumed()
    [result] = results(agent)
    assert result.is_error and "TODO: x" not in result.content


def test_env_guard_reads_file_path_and_keeps_the_secret_from_the_model(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SECRET_KEY=hunter2\n")
    guard = script(tmp_path, "guard", ENV_GUARD)
    runner = hooks(PreToolUse=[("Read|Edit|MultiEdit|Write|Bash", guard)])
    steps = [
        {"tool_uses": [{"name": "read_file", "input": {"path": ".env"}}]},
        {"tool_uses": [{"name": "bash", "input": {"command": "cat .env"}}]},
        {"tool_uses": [{"name": "write_file", "input": {"path": "sub/.env", "content": "x"}}]},
        "gave up",
    ]
    agent, model = make_agent(tmp_path, steps, runner, permissions=Permissions(allow=["Bash"]))
    agent.run_turn("show me the config")
    model.assert_consumed()
    outs = results(agent)
    assert len(outs) == 3 and all(r.is_error for r in outs)
    assert all("BLOCKED: Access to .env files" in r.content for r in outs)
    assert not any("hunter2" in str(m.model_dump()) for m in agent.messages)
    assert not (tmp_path / "sub" / ".env").exists()


def test_top_level_decision_allow_is_not_an_approval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "touched"
    runner = hooks(PreToolUse=[("", echo(tmp_path, "allow", {"decision": "allow"}))])
    steps = [{"tool_uses": [{"name": "bash", "input": {"command": f"touch {marker}"}}]}, "ok"]
    with caplog.at_level(logging.WARNING, logger="harness"):
        agent, _ = make_agent(tmp_path, steps, runner)  # no approver: an ask is refused
        agent.run_turn("touch it")
    [result] = results(agent)
    assert result.is_error and "no approver" in result.content
    assert not marker.exists()
    assert any("'allow' is not in Claude Code's hook schema" in r.message for r in caplog.records)


def test_permission_decision_allow_skips_the_prompt_even_in_dont_ask_mode(tmp_path: Path) -> None:
    allow = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
    runner = hooks(PreToolUse=[("Bash|Write", echo(tmp_path, "allow", allow))])
    steps = [
        {"tool_uses": [{"name": "bash", "input": {"command": "touch made"}}]},
        {"tool_uses": [{"name": "bash", "input": {"command": "rm -rf build"}}]},
        {"tool_uses": [{"name": "write_file", "input": {"path": ".git/hooks/x", "content": "y"}}]},
        "done",
    ]
    perms = Permissions(deny=["Bash(rm *)"], mode="dontAsk")
    agent, _ = make_agent(tmp_path, steps, runner, permissions=perms, mode="dontAsk")
    agent.run_turn("go")
    touched, removed, protected = results(agent)
    assert not touched.is_error and (tmp_path / "made").exists()
    assert removed.is_error and "Bash(rm *)" in removed.content  # deny rules stay absolute
    assert protected.is_error and not (tmp_path / ".git" / "hooks" / "x").exists()


def test_legacy_approve_and_block_map_to_allow_and_deny(tmp_path: Path) -> None:
    block = {"decision": "block", "reason": "not on Fridays"}
    runner = hooks(PreToolUse=[("Bash", echo(tmp_path, "block", block))])
    agent, _ = make_agent(
        tmp_path, [{"tool_uses": [{"name": "bash", "input": {"command": "ls"}}]}, "k"], runner
    )
    agent.run_turn("go")
    assert "not on Fridays" in results(agent)[0].content
    approve = hooks(PreToolUse=[("Bash", echo(tmp_path, "approve", {"decision": "approve"}))])
    steps = [{"tool_uses": [{"name": "bash", "input": {"command": "touch made"}}]}, "k"]
    other, _ = make_agent(tmp_path / "b", steps, approve)
    other.run_turn("go")
    assert not results(other)[0].is_error and (tmp_path / "b" / "made").exists()


def test_payloads_use_claude_code_names_fields_and_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("LOG", str(log))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    (tmp_path / "a.py").write_text("x = 1\n")
    rec = script(tmp_path, "rec", RECORDER)
    runner = hooks(
        SessionStart=[("startup", rec)],
        UserPromptSubmit=[("", rec)],
        PreToolUse=[("*", rec)],
        PostToolUse=[("Read|Edit", rec)],
        Stop=[("", rec)],
        SessionEnd=[("", rec)],
    )
    steps = [
        {
            "tool_uses": [
                {"name": "read_file", "input": {"path": "a.py"}},
                {"name": "glob", "input": {"pattern": "*.py"}},
                {"name": "grep", "input": {"pattern": "x", "path": "."}},
            ]
        },
        {
            "tool_uses": [
                {
                    "name": "edit_file",
                    "input": {"path": "a.py", "old_string": "1", "new_string": "2"},
                }
            ]
        },
        {"tool_uses": [{"name": "write_file", "input": {"path": "b.py", "content": "y\n"}}]},
        {"tool_uses": [{"name": "bash", "input": {"command": "echo hi"}}]},
        "done",
    ]
    agent, _ = make_agent(tmp_path, steps, runner, approver=Approver(True))
    agent.run_turn("work")
    agent.close()
    seen = lines(log)
    events = [(d["hook_event_name"], d.get("tool_name")) for d in seen]
    assert events[:2] == [("SessionStart", None), ("UserPromptSubmit", None)]
    parallel = [("PreToolUse", "Read"), ("PreToolUse", "Glob"), ("PreToolUse", "Grep"),
                ("PostToolUse", "Read")]  # fmt: skip
    assert sorted(events[2:6]) == sorted(parallel)  # read-only calls run together
    assert events[6:] == [
        ("PreToolUse", "Edit"), ("PostToolUse", "Edit"), ("PreToolUse", "Write"),
        ("PreToolUse", "Bash"), ("Stop", None), ("SessionEnd", None),
    ]  # fmt: skip
    by = {(d["hook_event_name"], d.get("tool_name")): d for d in seen}
    a_py = str(tmp_path / "a.py")
    assert by["PreToolUse", "Read"]["tool_input"] == {"file_path": a_py}  # made absolute
    assert by["PreToolUse", "Glob"]["tool_input"] == {"pattern": "*.py"}
    assert by["PreToolUse", "Grep"]["tool_input"]["path"] == "."
    assert by["PreToolUse", "Edit"]["tool_input"] == {
        "file_path": a_py, "old_string": "1", "new_string": "2",
    }  # fmt: skip
    assert by["PreToolUse", "Write"]["tool_input"] == {
        "file_path": str(tmp_path / "b.py"),
        "content": "y\n",
    }
    assert by["PreToolUse", "Bash"]["tool_input"]["command"] == "echo hi"
    assert by["PostToolUse", "Read"]["tool_response"].endswith("x = 1")
    transcript = agent.transcript.path  # type: ignore[union-attr]
    for d in seen:
        assert d["session_id"] == "sess-1"
        assert d["transcript_path"] == str(transcript) and Path(d["transcript_path"]).is_file()
        assert d["cwd"] == str(tmp_path) == d["pwd"]
        assert d["env"] == {
            "CLAUDE_PROJECT_DIR": str(tmp_path),
            "TEAMCTL_AGENT": "lead",
            "ANTHROPIC_API_KEY": None,  # hooks never get the model credentials
        }
    assert by["PreToolUse", "Bash"]["permission_mode"] == "default"
    assert by["PreToolUse", "Bash"]["tool_use_id"]
    assert by["SessionStart", None]["source"] == "startup"
    assert by["SessionStart", None]["model"] == "fake-model"
    assert by["UserPromptSubmit", None]["prompt"] == "work"
    assert by["Stop", None]["last_assistant_message"] == "done"
    assert by["SessionEnd", None]["reason"] == "other"


def test_project_dir_is_the_project_root_in_a_worktree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("LOG", str(log))
    runner = hooks(PreToolUse=[("Bash", script(tmp_path, "rec", RECORDER))])
    steps = [{"tool_uses": [{"name": "bash", "input": {"command": "true"}}]}, "ok"]
    agent, _ = make_agent(tmp_path, steps, runner, permissions=Permissions(allow=["Bash"]))
    worktree = tmp_path / "wt"
    worktree.mkdir()
    agent.relocate(worktree, worktree, agent.policy)
    agent.run_turn("go")
    [seen] = lines(log)
    assert seen["cwd"] == str(worktree) == seen["pwd"]
    assert seen["env"]["CLAUDE_PROJECT_DIR"] == str(tmp_path)


def test_updated_input_file_path_rewrites_the_path(tmp_path: Path) -> None:
    body = """
import json, sys
data = json.load(sys.stdin)
args = dict(data["tool_input"])
args["file_path"] = args["file_path"].replace("draft.txt", "final.txt")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                         "permissionDecision": "allow", "updatedInput": args}}))
"""
    runner = hooks(PreToolUse=[("Write", script(tmp_path, "rewrite", body))])
    steps = [
        {"tool_uses": [{"name": "write_file", "input": {"path": "draft.txt", "content": "v1"}}]},
        "written",
    ]
    agent, _ = make_agent(tmp_path, steps, runner)  # the hook's allow answers the write's ask
    agent.run_turn("write it")
    assert not results(agent)[0].is_error
    assert (tmp_path / "final.txt").read_text() == "v1"
    assert not (tmp_path / "draft.txt").exists()


def test_post_tool_use_block_reaches_the_model_as_an_error(tmp_path: Path) -> None:
    body = "import sys\nsys.stdin.read()\nprint('lint: 3 errors in a.py', file=sys.stderr)\nsys.exit(2)\n"
    runner = hooks(
        PostToolUse=[("Write", script(tmp_path, "lint", body))],
        PostToolUseFailure=[("Bash", echo(tmp_path, "f", {"decision": "block", "reason": "no"}))],
    )
    steps = [
        {"tool_uses": [{"name": "write_file", "input": {"path": "a.py", "content": "x"}}]},
        {"match": "lint: 3 errors", "text": "will fix"},
    ]
    agent, model = make_agent(tmp_path, steps, runner, approver=Approver(True))
    assert agent.run_turn("write").text == "will fix"
    model.assert_consumed()
    [result] = results(agent)
    assert result.is_error
    assert "PostToolUse hook blocked this result: lint: 3 errors in a.py" in result.content
    json_block = {"decision": "block", "reason": "generated file, edit the schema"}
    runner2 = hooks(PostToolUse=[("Write", echo(tmp_path, "b", json_block))])
    other, _ = make_agent(tmp_path / "two", [steps[0], "ok"], runner2, approver=Approver(True))
    other.run_turn("write")
    [result] = results(other)
    assert result.is_error and "generated file, edit the schema" in result.content


def test_stop_hook_reads_the_transcript_and_blocks_once(tmp_path: Path) -> None:
    # Like ralph-wiggum's stop hook: state on disk, the session and the transcript from stdin.
    state = tmp_path / "loop-state.json"
    body = f"""
import json, os, sys
data = json.load(sys.stdin)
lines = open(data["transcript_path"]).read().splitlines()
said = [json.loads(l) for l in lines]
state = {str(state)!r}
if os.path.exists(state) or data["stop_hook_active"]:
    sys.exit(0)
json.dump({{"session": data["session_id"], "records": len(said)}}, open(state, "w"))
print(json.dumps({{"decision": "block", "reason": "Iteration 2: keep going on the same prompt"}}))
"""
    runner = hooks(Stop=[("", script(tmp_path, "ralph", body))])
    steps = ["first try", {"match": "Iteration 2: keep going", "text": "second try"}]
    agent, model = make_agent(tmp_path, steps, runner)
    result = agent.run_turn("build it")
    assert (result.transition, result.text) == ("completed", "second try")
    model.assert_consumed()
    saved = json.loads(state.read_text())
    assert saved["session"] == "sess-1" and saved["records"] >= 2


def test_stop_hook_continue_false_ends_the_turn(tmp_path: Path) -> None:
    stop = {"continue": False, "stopReason": "budget reached"}
    runner = hooks(PreToolUse=[("Bash", echo(tmp_path, "stop", stop))])
    steps = [{"tool_uses": [{"name": "bash", "input": {"command": "ls"}}]}]
    agent, model = make_agent(tmp_path, steps, runner, permissions=Permissions(allow=["Bash"]))
    result = agent.run_turn("go")
    assert result.transition == "hook_stopped" and "budget reached" in result.text
    model.assert_consumed()  # no model call after the stop
    assert "budget reached" in results(agent)[0].content


def test_system_message_is_shown_as_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    note = {"systemMessage": "formatter ran on a.py"}
    runner = hooks(PostToolUse=[("Write", echo(tmp_path, "fmt", note))])
    steps = [{"tool_uses": [{"name": "write_file", "input": {"path": "a.py", "content": "x"}}]}]
    agent, _ = make_agent(tmp_path, [*steps, "ok"], runner, approver=Approver(True))
    with caplog.at_level(logging.WARNING, logger="harness"):
        agent.run_turn("write")
    assert any("formatter ran on a.py" in r.getMessage() for r in caplog.records)


def test_permission_request_hooks_answer_and_notification_fires_before_the_approver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("LOG", str(log))
    allow_npm = """
import json, sys
data = json.load(sys.stdin)
command = data["tool_input"].get("command", "")
if command.startswith("npm "):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                             "decision": {"behavior": "allow"}}}))
elif command.startswith("curl "):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
        "decision": {"behavior": "deny", "message": "no network from here"}}}))
"""
    runner = hooks(
        PermissionRequest=[("Bash", script(tmp_path, "pr", allow_npm))],
        Notification=[("permission_prompt", script(tmp_path, "rec", RECORDER))],
    )
    steps = [
        {"tool_uses": [{"name": "bash", "input": {"command": "npm --version >/dev/null; true"}}]},
        {"tool_uses": [{"name": "bash", "input": {"command": "curl http://127.0.0.1:9"}}]},
        {"tool_uses": [{"name": "bash", "input": {"command": "touch made"}}]},
        "done",
    ]
    approver = Approver(True)
    agent, _ = make_agent(tmp_path, steps, runner, approver=approver)
    agent.run_turn("go")
    npm, curl, touch = results(agent)
    assert not npm.is_error
    assert curl.is_error and "no network from here" in curl.content
    assert not touch.is_error and (tmp_path / "made").exists()
    assert approver.asked == ["bash"]  # only the call no hook answered went to the approver
    [note] = lines(log)
    assert note["notification_type"] == "permission_prompt"
    assert note["message"] == "lead needs your permission to use Bash"


def test_subagent_start_and_stop_carry_the_agent_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("LOG", str(log))
    rec = script(tmp_path, "rec", RECORDER)
    context = {"hookSpecificOutput": {"hookEventName": "SubagentStart",
                                      "additionalContext": "follow the security guide"}}  # fmt: skip
    runner = hooks(
        SubagentStart=[("general-purpose", rec), ("", echo(tmp_path, "ctx", context))],
        SubagentStop=[("general-purpose", rec)],
    )
    (tmp_path / ".git").mkdir()
    model = ScriptedModel(
        {
            "agents": {
                "lead": {
                    "steps": [
                        {
                            "tool_uses": [
                                {
                                    "name": "task",
                                    "input": {"description": "look", "prompt": "find x"},
                                }
                            ]
                        },
                        "lead done",
                    ]
                },
                "lead.task-1": {"steps": [{"match": "follow the security guide", "text": "x"}]},
            }
        }
    )
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=tmp_path,
        model=model,
        policy=HarnessPolicy(Permissions(), runner),
        transcript_dir=tmp_path / ".team" / "transcripts",
        hook_runner=runner,
        session_id="sess-1",
    )
    assert agent.run_turn("delegate").text == "lead done"
    model.assert_consumed()
    start, stop = lines(log)
    assert (start["hook_event_name"], stop["hook_event_name"]) == ("SubagentStart", "SubagentStop")
    for d in (start, stop):
        assert (d["agent_id"], d["agent_type"]) == ("lead.task-1", "general-purpose")
        assert d["session_id"] == "sess-1"
        assert d["transcript_path"] == str(agent.transcript.path)  # type: ignore[union-attr]
    assert stop["agent_transcript_path"].endswith("lead.task-1.jsonl")
    assert stop["last_assistant_message"] == "x"


def test_pre_compact_exit_2_blocks_compaction(tmp_path: Path) -> None:
    body = (
        "import json, sys\ndata = json.load(sys.stdin)\n"
        "print('not now: ' + data['trigger'], file=sys.stderr)\nsys.exit(2)\n"
    )
    runner = hooks(PreCompact=[("manual", script(tmp_path, "nocompact", body))])
    steps = [{"tool_uses": [{"name": "compact", "input": {}}]}, "done"]
    agent, model = make_agent(tmp_path, steps, runner)
    result = agent.run_turn("tidy up")  # a summary call would take "done" and want one more step
    assert (result.transition, result.text) == ("completed", "done")
    model.assert_consumed()
    assert agent.messages[0].content[0].text == "tidy up"  # type: ignore[union-attr]
