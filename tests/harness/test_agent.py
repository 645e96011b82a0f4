"""The assembled Agent with the scripted model and the real tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.agent import Agent, AgentConfig
from harness.context.prompt import check_pairing, is_reminder
from harness.loop import LoopHooks
from harness.model.scripted import ScriptedModel
from harness.ports import Message, TextBlock, ToolResultBlock, ToolUseBlock
from harness.tools.base import ToolContext
from harness.tools.subagent import SUBAGENT_KEY, TaskInput, TaskTool
from harness.transcript import OUTCOME_UNKNOWN, Transcript, load_transcript
from tests.harness.loop_support import canonical
from tests.support.fakes import AllowAll


def make_agent(root: Path, script: dict[str, Any], **kw: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel({"agents": script})
    config = AgentConfig(name=kw.pop("name", "lead"), model="fake-model", **kw.pop("config", {}))
    agent = Agent(
        config,
        root=root,
        model=model,
        policy=kw.pop("policy", AllowAll()),
        transcript_dir=root / ".team" / "transcripts",
        session_id="s1",
        **kw,
    )
    return agent, model


def test_reads_a_file_and_answers(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    script = {
        "lead": {
            "steps": [
                {"tool_uses": [{"name": "read_file", "input": {"path": "notes.txt"}}]},
                {"match": "answer is (?P<n>\\d+)", "text": "It says {n}."},
            ]
        }
    }
    agent, model = make_agent(tmp_path, script)
    result = agent.run_turn("what do the notes say?")
    assert (result.transition, result.text) == ("completed", "It says 42.")
    model.assert_consumed()
    assert load_transcript(agent.transcript.path).messages == agent.messages  # type: ignore[union-attr]


def test_resumed_agent_sends_a_byte_identical_request(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("print(1)\n")
    script = {
        "lead": {
            "steps": [
                {"tool_uses": [{"name": "read_file", "input": {"path": "a.py"}}]},
                {"tool_uses": [{"name": "glob", "input": {"pattern": "*.py"}}]},
            ]
        }
    }
    agent, _ = make_agent(tmp_path, script, state_provider=lambda: "alice: idle")
    agent.begin_turn("look around")
    agent.step()
    agent.step()
    expected = canonical(agent.loop.build_request())
    agent.close()
    again, _ = make_agent(tmp_path, {"lead": {}}, state_provider=lambda: "alice: idle", resume=True)
    assert canonical(again.loop.build_request()) == expected


def test_resume_repairs_a_crash_between_tool_use_and_result(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("content of f\n")
    t = Transcript.for_agent(tmp_path / ".team" / "transcripts", "lead")
    t.message(Message(role="user", content=(TextBlock(text="go"),)))
    t.message(
        Message(
            role="assistant",
            content=(
                ToolUseBlock(id="r", name="read_file", input={"path": "f.txt"}),
                ToolUseBlock(id="w", name="bash", input={"command": "touch deployed"}),
            ),
        )
    )
    t.close()
    script = {"lead": {"steps": [{"match": "content of f", "text": "verified"}]}}
    agent, _ = make_agent(tmp_path, script, resume=True)
    read, write = agent.messages[-1].content
    assert (
        isinstance(read, ToolResultBlock) and "content of f" in read.content and not read.is_error
    )
    assert (
        isinstance(write, ToolResultBlock) and write.is_error and write.content == OUTCOME_UNKNOWN
    )
    assert not (tmp_path / "deployed").exists()  # the non-read-only call was not re-run
    check_pairing(agent.messages)
    assert agent.run_turn(None).text == "verified"  # continue the interrupted turn
    assert load_transcript(agent.transcript.path).messages == agent.messages  # type: ignore[union-attr]


def test_fresh_session_over_an_old_transcript_starts_empty(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, {"lead": {"steps": ["one"]}})
    agent.run_turn("first")
    agent.close()
    again, _model = make_agent(tmp_path, {"lead": {"steps": ["two"]}})
    assert again.messages == []
    again.run_turn("second")
    assert len(load_transcript(again.transcript.path).messages) == 2  # type: ignore[union-attr]


def test_subagent_has_fresh_context_restricted_tools_and_returns_its_summary(
    tmp_path: Path,
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "x.py").write_text("def parse(): ...\n")
    script = {
        "lead": {
            "steps": [
                {
                    "text": "delegating",
                    "tool_uses": [
                        {
                            "name": "task",
                            "input": {
                                "description": "find parse",
                                "prompt": "Where is parse defined?",
                            },
                        }
                    ],
                },
                {"match": "parse is in src/x.py", "text": "The subagent found it."},
            ]
        },
        "lead.task-1": {
            "steps": [
                {
                    "match": "^Where is parse defined\\?$",
                    "tool_uses": [{"name": "grep", "input": {"pattern": "def parse"}}],
                },
                {"match": "x.py", "text": "parse is in src/x.py"},
            ]
        },
    }
    agent, model = make_agent(tmp_path, script)
    agent.begin_turn("secret parent context")
    agent.step()
    result = agent.messages[-1].content[0]
    assert isinstance(result, ToolResultBlock) and result.content == "parse is in src/x.py"
    assert agent.step().text == "The subagent found it."
    model.assert_consumed()
    sub_lines = load_transcript(tmp_path / ".team" / "transcripts" / "lead.task-1.jsonl").messages
    assert sub_lines[0].content == (TextBlock(text="Where is parse defined?"),)  # fresh context
    assert all("secret" not in str(m.model_dump()) for m in sub_lines)


def test_subagent_tool_set_has_no_task_and_nesting_is_refused(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, {"lead": {}})
    assert "task" in agent.registry
    sub, _ = make_agent(tmp_path, {"lead.task-1": {}}, name="lead.task-1", subagent=True)
    assert "task" not in sub.registry and "read_file" in sub.registry
    called: list[str] = []
    tool = TaskTool(lambda a, c: called.append(a.prompt))  # type: ignore[arg-type,func-returns-value]
    ctx = ToolContext(agent="x", root=tmp_path, cwd=tmp_path, extra={SUBAGENT_KEY: 1})
    out = tool.run(TaskInput(description="d", prompt="p"), ctx)
    assert out.is_error and called == []


def test_skills_catalog_in_prompt_and_load_skill(tmp_path: Path) -> None:
    skill = tmp_path / ".team" / "skills" / "release" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(
        "---\nname: release\ndescription: How to cut a release.\n---\nStep 1: tag it.\n"
    )
    script = {
        "lead": {
            "steps": [
                {"tool_uses": [{"name": "load_skill", "input": {"name": "release"}}]},
                {"match": "Step 1: tag it", "text": "ok"},
            ]
        }
    }
    agent, model = make_agent(tmp_path, script)
    agent.memory.write("build", "use make", description="how to build")
    agent.run_turn("release please")
    model.assert_consumed()
    system, _own = agent.loop.build_request().system
    assert "- release: How to cut a release." in system.text and "Step 1" not in system.text
    # written during the session: not in the system prompt, in a reminder with the prompt
    assert "build.md" not in system.text
    prompt, reminder = (b.text for b in agent.messages[0].content if isinstance(b, TextBlock))
    assert prompt == "release please"
    assert is_reminder(reminder) and "build.md: how to build" in reminder


def test_compact_tool_compacts_before_the_next_step(tmp_path: Path) -> None:
    script = {
        "lead": {
            "steps": [
                {"tool_uses": [{"name": "compact", "input": {"instructions": "keep the plan"}}]},
                {"match": "keep the plan", "text": "SUMMARY of the work"},
                "continuing",
            ]
        }
    }
    agent, model = make_agent(tmp_path, script)
    result = agent.run_turn("long task")
    assert result.text == "continuing"
    model.assert_consumed()
    first = agent.messages[0].content[0]
    assert isinstance(first, TextBlock) and "SUMMARY of the work" in first.text
    check_pairing(agent.messages)


def test_todo_reminder_after_stale_steps(tmp_path: Path) -> None:
    todo = {"todos": [{"content": "a", "status": "in_progress", "active_form": "doing a"}]}
    script = {
        "lead": {
            "steps": [
                {"tool_uses": [{"name": "todo_write", "input": todo}]},
                {"tool_uses": [{"name": "glob", "input": {"pattern": "*"}}]},
                {"tool_uses": [{"name": "glob", "input": {"pattern": "*"}}]},
                "done",
            ]
        }
    }
    agent, _model = make_agent(tmp_path, script, config={"todo_reminder_steps": 2})
    agent.run_turn("work")
    texts = [
        b.text
        for m in agent.messages
        if m.role == "user"
        for b in m.content
        if isinstance(b, TextBlock)
    ]
    assert any(t.startswith("Reminder: the todo list") for t in texts)


def test_stop_hook_passes_through_the_agent(tmp_path: Path) -> None:
    from harness.loop import StopVerdict

    hooks = LoopHooks(on_stop=lambda text, active: StopVerdict("stop", "halt"))
    agent, _ = make_agent(tmp_path, {"lead": {"steps": ["x"]}}, hooks=hooks)
    assert agent.run_turn("go").transition == "hook_stopped"


def test_hook_runner_drives_prompt_stop_precompact_and_session_start(tmp_path: Path) -> None:
    from harness.hooks import HookResult, HookRunner

    runner = HookRunner(session_id="s1")
    seen: list[tuple[str, dict[str, Any]]] = []

    def hook(event: Any, payload: Any) -> HookResult | None:
        seen.append((event, dict(payload)))
        if event == "SessionStart":
            return HookResult(additional_context="branch: main, CI red")
        if event == "UserPromptSubmit":
            return HookResult(additional_context="ctx from hook")
        if event == "Stop" and not payload["stop_hook_active"]:
            return HookResult(blocked=True, reason="tests not run")
        if event == "PreCompact":
            return HookResult(additional_context="keep test names")
        return None

    for event in ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact"):
        runner.register(event, hook)  # type: ignore[arg-type]
    script = {
        "lead": {
            "steps": [
                {"match": "ctx from hook", "text": "done"},
                {"match": "tests not run", "tool_uses": [{"name": "compact", "input": {}}]},
                {"match": "keep test names", "text": "summary"},
                "really done",
            ]
        }
    }
    agent, model = make_agent(tmp_path, script, hook_runner=runner)
    result = agent.run_turn("work")
    assert (result.transition, result.text) == ("completed", "really done")
    model.assert_consumed()
    # The hook's context is the agent's own: after the block agents of one kind share.
    shared, own = agent.loop.build_request().system
    assert "branch: main, CI red" in own.text and "branch: main" not in shared.text
    events = [e for e, _ in seen]
    assert events == ["SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "Stop"]
    assert all(p["agent_name"] == "lead" for _, p in seen)
    assert seen[3][1]["trigger"] == "manual"


def test_relocate_moves_the_tools_and_read_only_holds_writes_back(tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    script = {
        "lead": {
            "steps": [
                {"tool_uses": [{"name": "write_file", "input": {"path": "a.txt", "content": "x"}}]},
                "wrote",
                {"tool_uses": [{"name": "write_file", "input": {"path": "b.txt", "content": "y"}}]},
                "refused",
            ]
        }
    }
    agent, _ = make_agent(tmp_path, script)
    seen: list[str] = []
    agent.observe_messages(lambda message: seen.append(message.role))
    inner = AllowAll()
    agent.relocate(worktree, worktree, inner)
    assert (agent.cwd, agent.tool_context.root, agent.executor.policy) == (
        worktree,
        worktree,
        inner,
    )
    agent.run_turn("write a")
    assert (worktree / "a.txt").read_text() == "x" and not (tmp_path / "a.txt").exists()
    agent.set_read_only(True)
    agent.run_turn("write b")
    assert not (worktree / "b.txt").exists()
    assert seen[:3] == ["user", "assistant", "user"]  # every appended message, in order
