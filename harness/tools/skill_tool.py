"""``load_skill``: returns the body of a skill listed in the prompt's catalog and makes it active
for the rest of the turn (its ``allowed-tools`` and ``model``; see ``harness.context.skills``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.context.skills import SkillError, SkillLibrary, SkillSession
from harness.tools.base import PermissionRequest, Tool, ToolContext, ToolOutput


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

    def __init__(self, library: SkillLibrary, session: SkillSession | None = None) -> None:
        self.library = library
        self.session = session

    def is_read_only(self, args: LoadSkillInput) -> bool:
        return True

    def is_concurrency_safe(self, args: LoadSkillInput) -> bool:
        # Loading changes the turn's grants and model: one at a time, in request order.
        return self.session is None

    def permission_request(self, args: LoadSkillInput, ctx: ToolContext) -> PermissionRequest:
        # The skill name is the subject, so `Skill(name)` rules (Claude Code's) can name it.
        return PermissionRequest(tool=self.name, kind="other", target=args.name, read_only=True)

    def run(self, args: LoadSkillInput, ctx: ToolContext) -> ToolOutput:
        try:
            skill, body = self.library.load_skill(args.name)
        except (SkillError, OSError, UnicodeDecodeError) as exc:
            return ToolOutput(str(exc), is_error=True)
        head = f"Skill {skill.name} (files in {skill.path.parent}):"
        notes = self.session.activate(skill, ctx) if self.session is not None else []
        if notes:
            head += "\n" + "\n".join(notes)
        return ToolOutput(f"{head}\n\n{body}")
