"""Settings: every key optional, typos named, env file merged on top, env model override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.settings import (
    MODEL_ENV,
    SETTINGS_ENV,
    Settings,
    SettingsError,
    default_settings_json,
    load_settings,
    merge,
)

SETTINGS_EXAMPLE = {
    "models": {"lead": "a", "teammate": "b", "fallback": "c", "max_tokens": 8000},
    "permissions": {"defaultMode": "default", "allow": [], "ask": [], "deny": []},
    "approvals": {"permissions": "human", "plans": "lead", "timeout_s": 300},
    "hooks": {
        "PreToolUse": [
            {"matcher": "bash", "hooks": [{"type": "command", "command": "x", "timeout": 30}]}
        ]
    },
    "team": {
        "max_teammates": 8,
        "idle_timeout_s": None,
        "worktree_per_task": False,
        "restart": "on-crash",
    },
    "mailbox": {"batch_max_messages": 50, "cur_retention_days": 7},
    "mcpServers": {},
}


def write(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value))
    return path


def test_missing_file_and_empty_object_give_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "absent.json", environ={}) == Settings()
    assert load_settings(write(tmp_path / "s.json", {}), environ={}) == Settings()


def test_the_design_example_parses(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path / "s.json", SETTINGS_EXAMPLE), environ={})
    assert settings.models.fallback == "c"
    assert settings.hooks["PreToolUse"][0].hooks[0].command == "x"
    assert settings.permissions.default_mode == "default"


def test_default_file_round_trips_with_file_key_names() -> None:
    raw = json.loads(default_settings_json())
    assert "mcpServers" in raw and "bash_sandbox" in raw and "sandbox" not in raw
    # left to Claude Code's files, which a default spelled out here would override
    assert "defaultMode" not in raw["permissions"] and "enabled" not in raw["bash_sandbox"]
    assert Settings.model_validate(raw) == Settings()


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"team": {"max_teamates": 3}}, "team.max_teamates"),
        ({"modles": {}}, "modles"),
        ({"permissions": {"default_mode_x": "plan"}}, "permissions.default_mode_x"),
        ({"hooks": {"PreToolUse": [{"matcher": "x", "hook": []}]}}, "hooks.PreToolUse.0.hook"),
        ({"hooks": {"PreToolUze": []}}, "PreToolUze"),
        ({"permissions": {"defaultMode": "yolo"}}, "permissions.defaultMode"),
        ({"team": {"max_teammates": 0}}, "team.max_teammates"),
        ({"mcpServers": {"s": {"type": "http"}}}, "url"),
    ],
)
def test_a_typo_or_bad_value_names_the_key_and_file(
    tmp_path: Path, raw: dict[str, object], named: str
) -> None:
    path = write(tmp_path / "settings.json", raw)
    with pytest.raises(SettingsError) as info:
        load_settings(path, environ={})
    message = str(info.value)
    assert named in message
    assert str(path) in message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["{", '{"team": NaN}', '{"a": 1, "a": 2}', "[]"])
def test_bad_json_is_a_settings_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(SettingsError, match=r"settings .*settings\.json"):
        load_settings(path, environ={})


def test_env_file_is_merged_on_top(tmp_path: Path) -> None:
    base = write(
        tmp_path / "settings.json", {"team": {"max_teammates": 3}, "models": {"lead": "x"}}
    )
    top = write(tmp_path / "top.json", {"team": {"worktree_per_task": True}})
    settings = load_settings(base, environ={SETTINGS_ENV: str(top)})
    assert settings.team.max_teammates == 3
    assert settings.team.worktree_per_task is True
    assert settings.models.lead == "x"


def test_a_typo_in_the_env_file_names_that_file(tmp_path: Path) -> None:
    base = write(tmp_path / "settings.json", {})
    top = write(tmp_path / "top.json", {"team": {"restrat": "never"}})
    with pytest.raises(SettingsError, match=r"top\.json .*team\.restrat"):
        load_settings(base, environ={SETTINGS_ENV: str(top)})


def test_missing_env_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(tmp_path / "s.json", environ={SETTINGS_ENV: str(tmp_path / "nope.json")})


def test_model_env_overrides_every_model(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "s.json", environ={MODEL_ENV: "m"})
    assert (settings.models.lead, settings.models.teammate, settings.models.fallback) == (
        "m",
        "m",
        "m",
    )


def test_merge_replaces_lists_and_merges_objects() -> None:
    assert merge({"a": {"b": 1, "c": [1]}, "d": 1}, {"a": {"c": [2]}, "d": {"e": 1}}) == {
        "a": {"b": 1, "c": [2]},
        "d": {"e": 1},
    }


def test_every_field_has_a_docstring() -> None:
    from pydantic import BaseModel

    seen: set[type[BaseModel]] = set()
    stack: list[type[BaseModel]] = [Settings]
    while stack:
        model = stack.pop()
        if model in seen:
            continue
        seen.add(model)
        documented = _documented_fields(model)
        for name, field in model.model_fields.items():
            assert name in documented, f"{model.__name__}.{name} has no docstring"
            for arg in _models_in(field.annotation):
                stack.append(arg)
    assert len(seen) >= 8


def _documented_fields(model: type) -> set[str]:
    """Fields of ``model`` (and its bases) whose annotated assignment is followed by a string
    literal in the class body: its attribute docstring. (Read from the source here rather than
    by pydantic's ``use_attribute_docstrings``, which tokenizes every settings class's source at
    every command's start-up.)"""
    import ast
    import inspect
    import textwrap

    found: set[str] = set()
    for cls in model.__mro__:
        if cls.__module__.split(".")[0] not in {"actors", "harness"}:
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
        assert isinstance(body, ast.ClassDef)
        for stmt, after in zip(body.body, body.body[1:], strict=False):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
                and after.value.value.strip()
            ):
                found.add(stmt.target.id)
    return found


def _models_in(annotation: object) -> list[type]:
    from typing import get_args

    from pydantic import BaseModel

    found: list[type] = []
    todo = [annotation]
    while todo:
        item = todo.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            found.append(item)
        todo.extend(get_args(item))
    return found
