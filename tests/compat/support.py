"""Running real artifacts through the real code paths.

- ``decide``: one tool call through the real tool's permission request and ``HarnessPolicy`` built
  the way ``teamctl ask`` builds it (``actors.cli.ask.default_policy_factory``: the settings of
  every scope of the repository), without the settings' hooks (some start ``npx``/``uv``);
  ``ask`` means the approver was consulted.
- ``ask_turn``: one whole ``teamctl ask`` turn (``harness.headless.run_ask``) with the scripted
  model, so hooks fire from the agent loop exactly as in a run.
"""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.permissions.policy import HarnessPolicy
from harness.ports import TextBlock, ToolResultBlock, ToolUseBlock
from harness.settings import PermissionMode
from harness.tools.base import PermissionRequest, ToolContext

MODES: tuple[PermissionMode, ...] = (
    "default",
    "acceptEdits",
    "plan",
    "dontAsk",
    "bypassPermissions",
)


def git_repo(tmp_path: Path, name: str = "repo") -> Path:
    root = (tmp_path / name).resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def write_settings(root: Path, settings: dict[str, Any] | bytes, *, local: bool = False) -> Path:
    """``settings`` as ``.claude/settings.json`` (``settings.local.json`` when ``local``)."""
    path = root / ".claude" / ("settings.local.json" if local else "settings.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(settings if isinstance(settings, bytes) else json.dumps(settings).encode())
    return path


def _tool(name: str) -> Any:
    from harness.tools.registry import builtin_tools

    for tool in builtin_tools():
        if tool.name == name:
            return tool
    raise KeyError(name)


def decide(root: Path, tool: str, args: dict[str, Any], mode: PermissionMode = "default") -> str:
    """``allow``, ``ask`` or ``deny`` for one call of our tool ``tool`` under the repository's
    permission rules in ``mode``."""
    from actors.cli.ask import default_policy_factory

    asked: list[str] = []

    def approver(request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        asked.append(reason)
        return False

    built = default_policy_factory(root, mode, approver)
    assert isinstance(built, HarnessPolicy)
    policy = HarnessPolicy(built.permissions, None, approver, mode)
    impl = _tool(tool)
    parsed = impl.input_model.model_validate(args)
    ctx = ToolContext(agent="ask", root=root, cwd=root, session_id="compat")
    request = impl.permission_request(parsed, ctx)
    verdict = policy.before(ToolUseBlock(id="t1", name=tool, input=args), request, ctx)
    if asked:
        assert verdict.decision == "deny"  # the approver said no
        return "ask"
    return verdict.decision


@dataclass
class Turn:
    code: int
    results: list[ToolResultBlock] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""

    def everything_the_model_saw(self) -> str:
        return "\n".join(r.content for r in self.results)


def ask_turn(
    root: Path,
    steps: list[Any],
    *,
    mode: PermissionMode = "default",
    prompt: str = "go",
) -> Turn:
    """One ``teamctl ask`` turn on ``root`` whose model plays ``steps``."""
    from actors.cli.ask import default_policy_factory
    from harness.headless import ASK_AGENT, run_ask
    from harness.model.scripted import ScriptedModel
    from harness.transcript import load_transcript

    asked: list[str] = []

    def approver(request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        asked.append(f"{request.tool}: {request.target}")
        return False

    model = ScriptedModel({"agents": {ASK_AGENT: {"steps": steps}}})
    out, err = io.StringIO(), io.StringIO()
    code = run_ask(
        root,
        prompt,
        model_client=model,
        permission_mode=mode,
        approver=approver,
        policy_factory=default_policy_factory,
        out=out,
        err=err,
    )
    turn = Turn(code, asked=asked, stdout=out.getvalue(), stderr=err.getvalue())
    for message in load_transcript(root / ".team" / "transcripts" / f"{ASK_AGENT}.jsonl").messages:
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                turn.results.append(block)
            elif message.role == "assistant" and isinstance(block, TextBlock):
                turn.texts.append(block.text)
    return turn


def bash(command: str) -> dict[str, Any]:
    return {"tool_uses": [{"name": "bash", "input": {"command": command}}]}


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool_uses": [{"name": tool, "input": args}]}
