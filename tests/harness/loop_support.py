"""Small fakes for the loop, context and transcript tests (no other harness modules needed)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.context.compaction import CompactionConfig, Compactor
from harness.context.prompt import SystemPrompt
from harness.errors import ScriptError
from harness.loop import AgentLoop, LoopConfig, LoopHooks
from harness.ports import (
    ContentBlock,
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from harness.tools.base import ToolContext
from harness.transcript import Transcript

Reply = ModelResponse | Exception | Callable[[ModelRequest], "ModelResponse | Exception"]

_ids = itertools.count(1)


def reply(
    text: str = "", *tools: tuple[str, dict[str, Any]], usage: Usage | None = None
) -> ModelResponse:
    """A response with ``text`` and one tool_use per ``(name, input)``."""
    blocks: list[ContentBlock] = [TextBlock(text=text)] if text else []
    blocks += [ToolUseBlock(id=f"toolu_{next(_ids)}", name=n, input=i) for n, i in tools]
    return ModelResponse(
        id=f"msg_{next(_ids)}",
        model="fake",
        content=tuple(blocks),
        stop_reason="tool_use" if tools else "end_turn",
        usage=usage or Usage(input_tokens=10, output_tokens=5),
    )


class FakeModel:
    """Plays replies in order; fails loudly when called once too often."""

    def __init__(self, replies: Sequence[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if not self.replies:
            raise ScriptError(f"unexpected call #{len(self.requests)}")
        item = self.replies.pop(0)
        if callable(item) and not isinstance(item, ModelResponse):
            item = item(request)
        if isinstance(item, Exception):
            raise item
        return item


class FakeExecutor:
    """Runs tools given as plain functions of the input; unknown names are tool errors."""

    def __init__(
        self,
        tools: dict[str, Callable[[dict[str, Any]], str]] | None = None,
        *,
        terminal: frozenset[str] = frozenset(),
    ) -> None:
        self.tools = tools or {"echo": lambda i: str(i.get("text", ""))}
        self.terminal = terminal
        self.calls: list[ToolUseBlock] = []

    def ends_turn(self, call: ToolUseBlock) -> bool:
        return call.name in self.terminal

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(
            ToolSpec(name=n, description=f"the {n} tool", input_schema={"type": "object"})
            for n in sorted(self.tools)
        )

    def run_batch(self, calls: Sequence[ToolUseBlock], ctx: ToolContext) -> list[ToolResultBlock]:
        out = []
        for c in calls:
            self.calls.append(c)
            fn = self.tools.get(c.name)
            if fn is None:
                out.append(
                    ToolResultBlock(
                        tool_use_id=c.id, content=f"unknown tool {c.name}", is_error=True
                    )
                )
            else:
                text = fn(c.input)
                failed = text.startswith("ERROR")
                out.append(ToolResultBlock(tool_use_id=c.id, content=text, is_error=failed))
        return out


def make_loop(
    root: Path,
    model: Any,
    *,
    executor: FakeExecutor | None = None,
    transcript: bool = True,
    hooks: LoopHooks | None = None,
    compaction: CompactionConfig | None = None,
    state: Callable[[], str] | None = None,
    messages: Sequence[Message] = (),
    **config: Any,
) -> AgentLoop:
    executor = executor or FakeExecutor()
    system = SystemPrompt(identity="You are a test agent.", tool_guidance="Use tools.")
    system.add_section("Workspace", lambda: f"root: {root}")
    if state is not None:
        system.add_volatile("Team state", state)
    cfg = LoopConfig(agent="tester", model="fake-model", **config)
    return AgentLoop(
        model=model,
        executor=executor,
        tools=executor.specs,
        tool_context=ToolContext(agent="tester", root=root, cwd=root, outputs_dir=root / "outputs"),
        system=system,
        compactor=Compactor(model, model_name=cfg.model, agent=cfg.agent, config=compaction),
        config=cfg,
        transcript=Transcript.for_agent(root / "transcripts", "tester") if transcript else None,
        hooks=hooks,
        messages=messages,
    )


def canonical(request: ModelRequest) -> str:
    return json.dumps(request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
