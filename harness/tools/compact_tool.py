"""``compact``: the model asks for its history to be summarised before its next step."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from harness.tools.base import Tool, ToolContext, ToolOutput


class CompactInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instructions: str = Field(
        "", description="Optional: what the summary must keep (e.g. the failing test names)."
    )


class CompactTool(Tool[CompactInput]):
    name = "compact"
    description = (
        "Summarise the conversation so far to free context space. The summary keeps the goal, "
        "decisions, files touched, errors and open todos; recent messages stay verbatim. Use it "
        "when a long task has accumulated output you no longer need."
    )
    input_model = CompactInput

    def __init__(self, request: Callable[[str], None]) -> None:
        self.request = request

    def is_read_only(self, args: CompactInput) -> bool:
        return True  # it only touches the agent's own context

    def run(self, args: CompactInput, ctx: ToolContext) -> ToolOutput:
        # The pair (this tool_use, its result) must stay intact, so compaction happens before
        # the next model call rather than now.
        self.request(args.instructions)
        return ToolOutput("The conversation will be compacted before your next step.")
