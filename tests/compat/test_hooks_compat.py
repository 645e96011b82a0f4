"""Real hook scripts do in a ``teamctl ask`` turn what they do in Claude Code.

Each test installs the real script in a real repository, configures it as its repository does
(the command pointed at our copy, run with ``python3``/``bash`` instead of ``uv run`` or a plugin
root), and plays a scripted model through ``harness.headless.run_ask``. What Claude Code does, per
its hooks reference: a PreToolUse hook fires before the permission checks, in every mode; exit
code 2 blocks the call and its stderr reaches the model; exit code 1 is a non-blocking error (the
call goes on); only ``hookSpecificOutput.permissionDecision`` (or the legacy
``decision: approve|block``) decides, so a top-level ``decision: "allow"`` approves nothing; a
Stop hook answering ``decision: "block"`` keeps the agent going with its ``reason``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.settings import PermissionMode
from tests.compat import artifacts
from tests.compat.support import MODES, ask_turn, bash, call, git_repo, write_settings

SECRET = "SECRET_KEY=compat-secret-4242"


def project(tmp_path: Path) -> Path:
    root = git_repo(tmp_path)
    (root / "build").mkdir()
    (root / "build" / "out.o").write_text("object\n")
    (root / ".env").write_text(SECRET + "\n")
    (root / "file.txt").write_text("foo bar\n")
    return root


def one_hook(event: str, matcher: str, command: str) -> dict[str, Any]:
    return {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]}


# -- disler/claude-code-hooks-mastery: pre_tool_use.py -----------------------------------------

DISLER = "hooks/disler__claude-code-hooks-mastery__pre_tool_use.py"


def disler_repo(tmp_path: Path) -> Path:
    root = project(tmp_path)
    artifacts.install(DISLER, root / ".claude" / "hooks" / "pre_tool_use.py")
    real = json.loads(
        artifacts.need("settings/disler__claude-code-hooks-mastery__settings.json").read_bytes()
    )
    # Its own configuration is `uv run $CLAUDE_PROJECT_DIR/.claude/hooks/pre_tool_use.py` for
    # every tool (matcher ""); the same with python3. Its other hooks need uv, TTS and LLM keys.
    hooks = one_hook("PreToolUse", "", "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/pre_tool_use.py")
    write_settings(root, {"permissions": real["permissions"], "hooks": hooks})
    return root


@pytest.mark.parametrize("mode", MODES)
def test_disler_guard_stops_rm_rf_in_every_mode(tmp_path: Path, mode: PermissionMode) -> None:
    root = disler_repo(tmp_path)
    turn = ask_turn(root, [bash("rm -rf build"), "done"], mode=mode)
    assert (root / "build" / "out.o").exists()
    assert "BLOCKED: Dangerous rm command detected and prevented" in turn.everything_the_model_saw()
    assert all(r.is_error for r in turn.results)


@pytest.mark.parametrize("mode", MODES)
def test_disler_guard_stops_every_read_of_env(tmp_path: Path, mode: PermissionMode) -> None:
    root = disler_repo(tmp_path)
    steps = [call("read_file", path=".env"), bash("cat .env"), bash("cat ./.env | head -1"), "done"]
    turn = ask_turn(root, steps, mode=mode)
    seen = turn.everything_the_model_saw()
    assert "compat-secret" not in seen
    assert "compat-secret" not in "\n".join(turn.texts)
    assert seen.count("BLOCKED: Access to .env files") == 3, seen


def test_disler_guard_lets_ordinary_calls_through(tmp_path: Path) -> None:
    root = disler_repo(tmp_path)
    turn = ask_turn(root, [call("read_file", path="file.txt"), bash("mkdir -p out"), "done"])
    assert "foo bar" in turn.results[0].content and not turn.results[0].is_error
    assert (root / "out").is_dir()  # Bash(mkdir:*) is allowed by its settings
    log = json.loads((root / "logs" / "pre_tool_use.json").read_text())
    # The hook saw Claude Code's names and fields.
    assert [(e["tool_name"], e["hook_event_name"]) for e in log] == [
        ("Read", "PreToolUse"),
        ("Bash", "PreToolUse"),
    ]
    assert log[0]["tool_input"]["file_path"] == str(root / "file.txt")
    assert log[1]["tool_input"]["command"] == "mkdir -p out"
    assert log[0]["session_id"] and log[0]["cwd"] == str(root)
    assert Path(log[0]["transcript_path"]).is_file()


# -- anthropics/claude-code: bash_command_validator_example.py ---------------------------------

VALIDATOR = "hooks/anthropics__claude-code__bash_command_validator_example.py"


@pytest.mark.parametrize("mode", ("default", "bypassPermissions"))
def test_bash_validator_blocks_grep_and_tells_the_model(
    tmp_path: Path, mode: PermissionMode
) -> None:
    root = project(tmp_path)
    artifacts.install(VALIDATOR, root / ".claude" / "hooks" / "validator.py")
    hooks = one_hook("PreToolUse", "Bash", "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/validator.py")
    write_settings(root, {"permissions": {"allow": ["Bash(grep:*)"]}, "hooks": hooks})
    steps = [
        bash("grep foo file.txt"),
        {"match": "ripgrep", "text": "I will use rg."},
    ]
    turn = ask_turn(root, steps, mode=mode)
    (result,) = turn.results
    assert result.is_error
    assert "Use 'rg' (ripgrep) instead of 'grep'" in result.content
    assert "foo bar" not in result.content  # grep never ran
    assert turn.texts[-1] == "I will use rg."


# -- jpoley/jp-spec-kit: git-safety and sensitive-files answer {"decision": "allow"} -----------

JP_HOOKS = (
    "pre-tool-use-git-safety.py",
    "pre-tool-use-sensitive-files.py",
    "logging_helper.py",
    "run-hook.sh",
)


def jp_repo(tmp_path: Path) -> Path:
    root = project(tmp_path)
    for name in JP_HOOKS:
        artifacts.install(f"hooks/jpoley__jp-spec-kit__{name}", root / ".claude" / "hooks" / name)
    real = json.loads(artifacts.need("settings/jpoley__jp-spec-kit__settings.json").read_bytes())
    # Its PreToolUse hooks as configured, less permission-auto-approve.py (not collected).
    pre = [m for m in real["hooks"]["PreToolUse"] if "auto-approve" not in json.dumps(m)]
    write_settings(root, {"permissions": real["permissions"], "hooks": {"PreToolUse": pre}})
    return root


def test_a_top_level_decision_allow_approves_nothing(tmp_path: Path) -> None:
    root = jp_repo(tmp_path)
    steps = [
        bash("touch created-by-touch"),
        bash("git push --force origin main"),
        call("write_file", path="notes.md", content="x"),
        "done",
    ]
    turn = ask_turn(root, steps, mode="default")
    assert not (root / "created-by-touch").exists()
    assert not (root / "notes.md").exists()
    assert len(turn.asked) == 3, turn.asked  # each still went to the approver, who said no


def test_a_top_level_decision_allow_does_not_override_dont_ask(tmp_path: Path) -> None:
    root = jp_repo(tmp_path)
    turn = ask_turn(root, [bash("touch created-by-touch"), "done"], mode="dontAsk")
    assert not (root / "created-by-touch").exists()
    assert turn.asked == [] and turn.results[0].is_error


# -- trailofbits/claude-code-config: inline guard hooks in settings.json -----------------------


@pytest.mark.parametrize("mode", MODES)
def test_trailofbits_inline_guard_blocks_split_rm_flags(
    tmp_path: Path, mode: PermissionMode
) -> None:
    """``rm -r -f`` slips past its ``Bash(rm -rf *)`` deny rule; its hook catches it."""
    root = project(tmp_path)
    artifacts.install(
        "settings/trailofbits__claude-code-config__settings.json",
        root / ".claude" / "settings.json",
    ).chmod(0o644)
    turn = ask_turn(root, [bash("rm -r -f build"), "done"], mode=mode)
    assert (root / "build" / "out.o").exists()
    assert "BLOCKED: Use trash instead of rm -rf" in turn.everything_the_model_saw()


# -- pydantic/pydantic-ai: reject-no-verify.sh exits 1 -----------------------------------------


def test_exit_code_1_is_not_a_block_and_echoed_input_is_not_a_decision(tmp_path: Path) -> None:
    root = project(tmp_path)
    artifacts.install(
        "hooks/pydantic__pydantic-ai__reject-no-verify.sh",
        root / ".claude" / "hooks" / "reject-no-verify.sh",
    )
    for key, value in (("user.name", "compat"), ("user.email", "compat@example.test")):
        subprocess.run(["git", "-C", str(root), "config", key, value], check=True)
    hooks = one_hook(
        "PreToolUse", "Bash", "bash $CLAUDE_PROJECT_DIR/.claude/hooks/reject-no-verify.sh"
    )
    write_settings(root, {"permissions": {"allow": ["Bash(git commit:*)"]}, "hooks": hooks})
    steps = [bash("git commit --no-verify --allow-empty -m compat"), bash("touch echoed"), "done"]
    turn = ask_turn(root, steps)
    log = subprocess.run(
        ["git", "-C", str(root), "log", "--format=%s"], capture_output=True, text=True
    )
    assert log.stdout.strip() == "compat"  # exit 1 is a non-blocking error in Claude Code
    # The hook echoes the payload (no decision fields) on stdout for `touch`: that is no
    # approval, so the call without an allow rule still went to the approver.
    assert turn.asked == ["bash: touch echoed"]
    assert not (root / "echoed").exists()


# -- anthropics/claude-code: the ralph-wiggum plugin's Stop hook -------------------------------


def test_ralph_wiggum_stop_hook_keeps_the_agent_going_until_the_promise(tmp_path: Path) -> None:
    root = project(tmp_path)
    ralph = root / ".claude" / "ralph"
    stop = artifacts.install("hooks/anthropics__claude-code__stop-hook.sh", ralph / "stop-hook.sh")
    setup = artifacts.install(
        "hooks/anthropics__claude-code__setup-ralph-loop.sh", ralph / "setup-ralph-loop.sh"
    )
    plugin = json.loads(
        artifacts.need("hooks/anthropics__claude-code__ralph-wiggum-hooks.json").read_bytes()
    )
    command = plugin["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command == "${CLAUDE_PLUGIN_ROOT}/hooks/stop-hook.sh"
    write_settings(root, {"hooks": one_hook("Stop", "", f"bash {stop}")})
    subprocess.run(
        ["bash", str(setup), "polish", "the", "notes", "--max-iterations", "5",
         "--completion-promise", "DONE"],
        cwd=root, check=True, capture_output=True,
    )  # fmt: skip
    state = root / ".claude" / "ralph-loop.local.md"
    assert "iteration: 1" in state.read_text()
    steps = [
        "First pass done.",
        {"match": "polish the notes", "text": "Second pass. <promise>DONE</promise>"},
    ]
    turn = ask_turn(root, steps, prompt="polish the notes")
    assert turn.code == 0, turn.stderr
    assert turn.texts[-1] == "Second pass. <promise>DONE</promise>"
    assert not state.exists()  # the hook saw the promise in the transcript and ended the loop
