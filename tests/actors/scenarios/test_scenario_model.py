"""The scenario file is parsed once, strictly: a bad input is one line naming the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from actors.scenarios.model import (
    ScenarioError,
    find_scenario,
    list_scenarios,
    load_scenario,
    scenarios_dir,
)

MINIMAL = {
    "name": "tiny",
    "description": "One lead turn.",
    "prompt": "Hello",
    "script": {"agents": {"lead": {"steps": ["Hi."]}}},
}


def write(tmp_path: Path, data: dict[str, object], name: str = "tiny") -> Path:
    folder = tmp_path / name
    (folder / "repo").mkdir(parents=True)
    (folder / "scenario.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return folder


def error_of(folder: Path) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(folder)
    text = str(info.value)
    assert "\n" not in text
    assert str(folder / "scenario.yaml") in text
    return text


def test_a_minimal_scenario_loads_with_defaults(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, MINIMAL))
    assert scenario.name == "tiny"
    assert scenario.timeout_s == 60
    assert scenario.repo_dir == tmp_path / "tiny" / "repo"
    assert scenario.expect.invariants == ()


def test_an_unknown_key_is_named(tmp_path: Path) -> None:
    text = error_of(write(tmp_path, {**MINIMAL, "expect": {"files": [{"path": "x", "bogus": 1}]}}))
    assert "expect.files.0.bogus: unknown key" in text


def test_an_unknown_key_inside_the_script_is_named(tmp_path: Path) -> None:
    script = {"agents": {"lead": {"rules": [{"match": "x", "txt": "typo"}]}}}
    text = error_of(write(tmp_path, {**MINIMAL, "script": script}))
    assert "script.agents.lead.rules.0.txt: unknown key" in text


def test_a_bad_regular_expression_is_named(tmp_path: Path) -> None:
    script = {"agents": {"lead": {"rules": [{"match": "task (\\d+", "text": "x"}]}}}
    text = error_of(write(tmp_path, {**MINIMAL, "script": script}))
    assert "agents.lead.rules.0.match: bad regular expression" in text


def test_bad_settings_are_named(tmp_path: Path) -> None:
    text = error_of(write(tmp_path, {**MINIMAL, "settings": {"team": {"max_teamates": 3}}}))
    assert "team.max_teamates" in text


def test_a_task_expectation_names_exactly_one_task(tmp_path: Path) -> None:
    expect = {"tasks": [{"id": "task_1", "subject": "both", "status": "completed"}]}
    assert "exactly one of" in error_of(write(tmp_path, {**MINIMAL, "expect": expect}))


def test_the_name_must_be_the_folder_name(tmp_path: Path) -> None:
    assert "differs from the folder name" in error_of(write(tmp_path, MINIMAL, name="other"))


def test_yaml_syntax_errors_are_one_line(tmp_path: Path) -> None:
    folder = write(tmp_path, MINIMAL)
    (folder / "scenario.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    assert "not valid YAML" in error_of(folder)


def test_find_by_name_or_path_and_unknown_names(tmp_path: Path) -> None:
    folder = write(tmp_path, MINIMAL)
    assert find_scenario(str(folder)).name == "tiny"
    assert find_scenario("tiny", root=tmp_path).folder == folder
    with pytest.raises(ScenarioError, match=r"no scenario 'nope' \(known: tiny\)"):
        find_scenario("nope", root=tmp_path)


def test_a_workflow_scenario_runs_a_workflow_instead_of_a_prompt(tmp_path: Path) -> None:
    data: dict[str, object] = {k: v for k, v in MINIMAL.items() if k != "prompt"}
    data["workflow"] = {"name": "review_changes", "args": {"dimensions": ["tests"]}}
    data["expect"] = {"workflow": {"status": "completed", "result": {"findings": []}}}
    scenario = load_scenario(write(tmp_path, data))
    assert scenario.prompt is None
    assert scenario.workflow is not None and scenario.workflow.args == {"dimensions": ["tests"]}
    assert scenario.expect.workflow is not None
    assert scenario.expect.workflow.result == {"findings": []}


def test_exactly_one_of_prompt_and_workflow(tmp_path: Path) -> None:
    both = {**MINIMAL, "workflow": {"name": "review_changes"}}
    assert "exactly one of `prompt` or `workflow`" in error_of(write(tmp_path, both, "a"))
    neither = {k: v for k, v in MINIMAL.items() if k != "prompt"}
    neither["name"] = "b"
    assert "exactly one of `prompt` or `workflow`" in error_of(write(tmp_path, neither, "b"))


def test_workflow_and_goal_inputs_are_checked(tmp_path: Path) -> None:
    unsafe = {k: v for k, v in MINIMAL.items() if k != "prompt"}
    unsafe |= {"name": "a", "workflow": {"name": "../x"}}
    assert "workflow.name" in error_of(write(tmp_path, unsafe, "a"))
    goal = {k: v for k, v in MINIMAL.items() if k != "prompt"}
    goal |= {"name": "b", "workflow": {"name": "w"}, "goal": {"check": "true"}}
    assert "goal: needs a `prompt`" in error_of(write(tmp_path, goal, "b"))
    empty = {**MINIMAL, "name": "c", "goal": {"max_blocks": 2}}
    assert "a goal needs a `condition` or a `check`" in error_of(write(tmp_path, empty, "c"))
    stray = {**MINIMAL, "name": "d", "expect": {"workflow": {"status": "completed"}}}
    assert "expect.workflow: needs a `workflow`" in error_of(write(tmp_path, stray, "d"))
    ok = load_scenario(write(tmp_path, {**MINIMAL, "name": "e", "goal": {"check": "true"}}, "e"))
    assert ok.goal is not None and (ok.goal.check, ok.goal.max_blocks) == ("true", 10)


def test_every_bundled_scenario_parses() -> None:
    names = {s.name for s in list_scenarios()}
    assert {"idle-claimers", "plan-approval", "cron-and-jobs", "parallel-refactor"} <= names
    assert {"review-changes", "fix-until-green"} <= names
    assert all((scenarios_dir() / n / "repo").is_dir() for n in names)
