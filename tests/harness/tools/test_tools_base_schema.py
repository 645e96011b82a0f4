"""Tool schemas as the model receives them: no pydantic titles, names kept."""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.tools.base import without_titles
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
