"""Every bundled scenario runs green in process, one through the fake Messages API and the real
SDK; a deliberately wrong expectation makes ``teamctl scenario run`` fail with a report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from actors.cli.main import cli
from actors.scenarios.model import Scenario, list_scenarios, scenarios_dir
from actors.scenarios.run import capabilities, run_scenario

SCENARIOS = list_scenarios()
RUNNABLE = [s for s in SCENARIOS if set(s.requires) <= capabilities()]


def test_every_bundled_scenario_is_runnable() -> None:
    assert "parallel-refactor" in {s.name for s in RUNNABLE}
    assert RUNNABLE == SCENARIOS


@pytest.mark.parametrize("scenario", RUNNABLE, ids=[s.name for s in RUNNABLE])
def test_scenario_passes_in_process(scenario: Scenario, tmp_path: Path) -> None:
    result = run_scenario(scenario, workdir=tmp_path)
    assert result.ok, [f"{c.name}: {c.detail}" for c in result.failures]
    assert len(result.checks) > 5
    assert list(tmp_path.iterdir()) == []  # the repository was removed


VIA_API = [s for s in RUNNABLE if s.name != "idle-claimers"]  # that one: through the CLI below


@pytest.mark.parametrize("scenario", VIA_API, ids=[s.name for s in VIA_API])
def test_scenario_passes_through_the_fake_api(scenario: Scenario, tmp_path: Path) -> None:
    result = run_scenario(scenario, via_api=True, workdir=tmp_path)
    assert result.ok, [f"{c.name}: {c.detail}" for c in result.failures]
    assert len(result.checks) > 5
    assert list(tmp_path.iterdir()) == []  # the repository was removed


def test_idle_claimers_passes_through_the_fake_api_and_keeps_the_repo(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        cli, ["scenario", "run", "idle-claimers", "--via-api", "--keep", "--json"]
    )
    report = json.loads(out.output)
    assert out.exit_code == 0, report
    assert report["ok"] and report["via_api"]
    repo = Path(report["repo"])
    try:
        assert (repo / "textkit" / "slug.py").is_file()
        assert (repo / ".team" / "journal.jsonl").is_file()
    finally:
        shutil.rmtree(repo.parent)


def broken_copy(tmp_path: Path) -> Path:
    """idle-claimers with one wrong expectation."""
    folder = tmp_path / "idle-claimers"
    shutil.copytree(scenarios_dir() / "idle-claimers", folder)
    path = folder / "scenario.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["expect"]["files"].append({"path": "textkit/slug.py", "contains": "def unslugify"})
    data["expect"]["order"].append(
        {
            "before": {"type": "task.claimed", "task": "Test the public API"},
            "after": {"type": "task.completed", "task": "Add slugify"},
        }
    )
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return folder


def test_a_wrong_expectation_fails_the_run_with_the_failure_reported(tmp_path: Path) -> None:
    folder = broken_copy(tmp_path)
    out = CliRunner().invoke(cli, ["scenario", "run", str(folder)])
    assert out.exit_code == 1, out.output
    assert "✗  file textkit/slug.py" in out.output
    assert "lacks 'def unslugify'" in out.output
    assert "FAILED: 2 of" in out.output
    as_json = CliRunner().invoke(cli, ["scenario", "run", str(folder), "--json"])
    assert as_json.exit_code == 1
    failed = [c["name"] for c in json.loads(as_json.output)["checks"] if not c["ok"]]
    assert failed == [
        "file textkit/slug.py",
        "order: task.claimed task=Test the public API before task.completed task=Add slugify",
    ]


def test_a_bad_scenario_file_is_one_error_line(tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    (folder / "repo").mkdir(parents=True)
    (folder / "scenario.yaml").write_text("name: bad\nprompt: x\nscrpt: {}\n", encoding="utf-8")
    out = CliRunner().invoke(cli, ["scenario", "run", str(folder)])
    assert out.exit_code == 1
    lines = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "scrpt: unknown key" in lines[0]


def test_scenario_list_shows_every_scenario() -> None:
    out = CliRunner().invoke(cli, ["scenario", "list", "--json"])
    assert out.exit_code == 0
    listed = {row["name"]: row for row in json.loads(out.output)}
    assert set(listed) == {s.name for s in SCENARIOS}
    assert listed["idle-claimers"]["runnable"]


def test_a_scenario_needing_a_missing_capability_is_skipped_with_the_reason(
    tmp_path: Path,
) -> None:
    scenario = next(s for s in SCENARIOS if s.name == "parallel-refactor")
    result = run_scenario(scenario, workdir=tmp_path, available=frozenset())
    assert not result.ok and result.checks == ()
    assert result.skipped == "needs runtime support for worktrees, which is not built yet"
    assert list(tmp_path.iterdir()) == []
