"""``task``: run a subagent with a fresh context and a restricted tool set; return its summary.

The subagent starts from nothing but the prompt it is given, has no ``task`` tool (no nesting;
``run`` also refuses inside a subagent), runs to the end of one turn, and only its final text
comes back to the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from harness.tools.base import Tool, ToolContext, ToolOutput

SUBAGENT_KEY = "subagent_depth"
"""``ToolContext.extra`` key set to 1 inside a subagent."""


class TaskInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field(description="A short (3-8 words) label for the task.")
    prompt: str = Field(
        description="Everything the subagent needs: it sees none of your conversation."
    )


@dataclass(frozen=True)
class SubagentOutcome:
    """What a subagent run produced: its final text and how its turn ended."""

    text: str
    transition: str
    steps: int
    error: str | None = None


SubagentRunner = Callable[[TaskInput, ToolContext], SubagentOutcome]
"""Builds a fresh subagent for the calling agent and runs one turn (provided by the agent)."""


class TaskTool(Tool[TaskInput]):
    name = "task"
    description = (
        "Delegate a self-contained task (research, a search across many files, a focused change) "
        "to a subagent with a fresh context. It cannot see this conversation, so the prompt must "
        "say everything. Only its final answer comes back; use it to keep your context small."
    )
    input_model = TaskInput

    def __init__(self, runner: SubagentRunner) -> None:
        self.runner = runner

    def allowed_in_plan(self, args: TaskInput) -> bool:
        return True  # the subagent plans too: it runs under the same policy, mode and read_only

    def run(self, args: TaskInput, ctx: ToolContext) -> ToolOutput:
        if ctx.extra.get(SUBAGENT_KEY):
            return ToolOutput("Subagents cannot start subagents.", is_error=True)
        outcome = self.runner(args, ctx)
        if outcome.transition == "error":
            return ToolOutput(f"The subagent failed: {outcome.error}", is_error=True)
        text = outcome.text.strip() or "(the subagent returned no text)"
        if outcome.transition != "completed":
            text += f"\n[subagent stopped early: {outcome.transition} after {outcome.steps} steps]"
        return ToolOutput(text)
