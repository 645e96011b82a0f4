"""Tool schemas as the model receives them: no pydantic titles, names kept."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from harness.tools.base import Tool, ToolContext, ToolOutput, without_titles
from harness.tools.files import ReadFileTool


class Inner(BaseModel):
    title: str = Field(description="A field that is itself called title.")


class Outer(BaseModel):
    items: list[Inner]
    path: str


def test_titles_go_but_fields_named_title_stay() -> None:
    schema = without_titles(Outer.model_json_schema())
    assert "title" not in schema
    assert "title" not in schema["properties"]["path"]
    inner = schema["$defs"]["Inner"]
    assert "title" not in inner and set(inner["properties"]) == {"title"}
    assert inner["properties"]["title"] == {
        "description": "A field that is itself called title.",
        "type": "string",
    }


def test_builtin_tool_specs_carry_no_titles() -> None:
    schema = ReadFileTool().spec().input_schema
    assert "title" not in schema and all("title" not in p for p in schema["properties"].values())
    assert schema["required"] == ["path"]


class Counted(BaseModel):
    """An input model that counts how often pydantic is asked for its schema."""

    path: str
    made: ClassVar[int] = 0

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        Counted.made += 1
        return super().model_json_schema(*args, **kwargs)


class CountedTool(Tool[Counted]):
    name = "counted"
    description = "A tool whose schema is counted."
    input_model = Counted

    def run(self, args: Counted, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content=args.path)


def test_a_tool_schema_is_made_once_for_every_agent_of_the_process() -> None:
    # Every agent of a team builds the same tools: the schema is made once, not once per agent.
    first, second = CountedTool().spec(), CountedTool().spec()
    assert Counted.made == 1
    assert first.input_schema == second.input_schema
    assert second.input_schema["properties"] == {"path": {"type": "string"}}
