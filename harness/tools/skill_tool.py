"""``load_skill``: returns the body of a skill listed in the prompt's catalog."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.context.skills import SkillError, SkillLibrary
from harness.tools.base import Tool, ToolContext, ToolOutput


class LoadSkillInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The skill's name, as listed in the skills catalog.")


class LoadSkillTool(Tool[LoadSkillInput]):
    name = "load_skill"
    description = (
        "Load the full instructions of a skill from the skills catalog in your system prompt. "
        "Do this before starting work that a skill's description matches."
    )
    input_model = LoadSkillInput

    def __init__(self, library: SkillLibrary) -> None:
        self.library = library

    def is_read_only(self, args: LoadSkillInput) -> bool:
        return True

    def is_concurrency_safe(self, args: LoadSkillInput) -> bool:
        return True

    def run(self, args: LoadSkillInput, ctx: ToolContext) -> ToolOutput:
        try:
            return ToolOutput(self.library.load(args.name))
        except (SkillError, OSError) as exc:
            return ToolOutput(str(exc), is_error=True)
