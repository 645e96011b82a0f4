"""Tool schemas as the model receives them: an optional property that defaults to null is the
plain type (leaving it out says it is null), while validation still takes an explicit null."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.tools.base import plain_optionals, without_titles
from harness.tools.registry import builtin_tools
from harness.tools.todo import TodoStore


class Spawn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    model: str | None = Field(default=None, min_length=1, description="Model id.")
    tools: list[str] | None = Field(default=None, description="Restrict its tools.")
    parent: str | None = Field(description="Required, but may be null.")
    role: str | None = Field(default="general", description="Null means any role.")


def test_optional_properties_defaulting_to_null_are_the_plain_type() -> None:
    schema = plain_optionals(without_titles(Spawn.model_json_schema()))
    props = schema["properties"]
    assert props["model"] == {"type": "string", "minLength": 1, "description": "Model id."}
    assert props["tools"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Restrict its tools.",
    }
    # Required-but-nullable and nullable-with-another-default keep their anyOf: null means
    # something there that leaving the property out does not say.
    assert {"type": "null"} in props["parent"]["anyOf"]
    assert {"type": "null"} in props["role"]["anyOf"] and props["role"]["default"] == "general"
    assert schema["required"] == ["name", "parent"]
    assert schema["additionalProperties"] is False
    # The input model still validates an explicit null.
    assert Spawn.model_validate({"name": "w1", "model": None, "parent": None}).model is None


def test_builtin_tools_send_no_null_default() -> None:
    nullable = 0
    for tool in builtin_tools(TodoStore()):
        raw = tool.input_model.model_json_schema()["properties"]
        sent = tool.spec().input_schema["properties"]
        for name, prop in raw.items():
            if prop.get("default", "") is None and {"type": "null"} in prop.get("anyOf", []):
                nullable += 1
                assert "anyOf" not in sent[name] and "default" not in sent[name], (tool.name, name)
    assert nullable >= 3  # bash, glob, grep and todo_write have some
