"""Every bundled scenario runs green through ``teamctl scenario run`` (in process), and through
the fake Messages API and the real SDK; what the scenarios execute needs nothing outside the
runtime dependencies (a plain ``pip install`` runs ``teamctl demo``); a deliberately wrong
expectation makes ``teamctl scenario run`` fail with a report."""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
def test_scenario_run_passes_through_the_cli(
    scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the repository is made
    out = CliRunner().invoke(cli, ["scenario", "run", scenario.name, "--json"])
    report = json.loads(out.stdout)
    assert out.exit_code == 0, report
    assert report["ok"], [c for c in report["checks"] if not c["ok"]]
    assert_every_expectation_checked(scenario, report["checks"])
    assert list(tmp_path.iterdir()) == []  # the repository was removed


_COUNTED = re.compile(r"^(\d+) \(expected (\d+)\)$")


def assert_every_expectation_checked(scenario: Scenario, checks: list[dict[str, Any]]) -> None:
    """One passing check per expectation of the scenario (none dropped), each showing what it
    found: counts equal to the expected ones, a task's status, a file's size."""
    want = scenario.expect
    workflow = want.workflow
    count = (
        3  # idle, no agent errors, script fully played
        + (want.tool_errors is not None)
        + (want.task_count is not None)
        + (want.all_tasks is not None)
        + len(want.tasks)
        + len(want.files)
        + len(want.events)
        + len(want.messages)
        + len(want.order)
        + len(want.invariants)
        + len(want.commands)
        + (0 if workflow is None else 1 + (workflow.result is not None))
        + (0 if workflow is None else workflow.error_contains is not None)
    )
    assert len(checks) == count, [c["name"] for c in checks]
    names = [c["name"] for c in checks]
    assert {f"invariant {n}" for n in want.invariants} <= set(names)
    assert "team went idle" in names and "script fully played" in names
    for check in checks:
        assert check["ok"], check
        counted = _COUNTED.match(check["detail"])
        if counted:
            assert counted.group(1) == counted.group(2), check
        if check["name"].startswith("task ") and check["name"] != "task count":
            assert re.match(r"^task_\d+ \w+", check["detail"]), check
        if check["name"].startswith("file ") and not check["name"].endswith(" absent"):
            assert re.match(r"^\d+ chars$", check["detail"]), check
        if check["name"].startswith(("event ", "message ")) and not counted:
            assert re.match(r"^[1-9]\d* found$", check["detail"]), check
        if check["name"].startswith("order: "):
            first, then = map(int, re.findall(r"\d+", check["detail"]))
            assert first < then, check


# -- what a plain install must provide ----------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
_IMPORT = re.compile(
    r"^\s*(?:from\s+([A-Za-z_]\w*)[\w.]*\s+import\b|import\s+([A-Za-z_]\w*))", re.M
)
_RUN_MODULE = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_]\w*)")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_distributions() -> set[str]:
    """The distributions ``[project].dependencies`` of pyproject.toml names (no extras)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {
        _normal(re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0]) for dep in project["dependencies"]
    }
    return names | {"teamctl"}


def _strings(value: Any) -> Iterator[tuple[str | None, str]]:
    """Every string in a loaded YAML document, with the key it is under."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                yield str(key), item
            else:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                yield None, item
            else:
                yield from _strings(item)


def needed_modules(folder: Path) -> dict[str, str]:
    """Top-level modules a scenario runs (``python -m X`` in its commands and its agents'
    scripted shell calls) or imports (its fixture's Python files and the files its script
    writes), each with where it was seen."""
    data = yaml.safe_load((folder / "scenario.yaml").read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for key, text in _strings(data):
        if key in ("run", "command"):
            for module in _RUN_MODULE.findall(text):
                found.setdefault(module, f"{folder.name}: {text}")
        if key == "content":
            for pair in _IMPORT.findall(text):
                found.setdefault(pair[0] or pair[1], f"{folder.name}: a written file")
    for path in sorted((folder / "repo").rglob("*.py")):
        for pair in _IMPORT.findall(path.read_text(encoding="utf-8")):
            found.setdefault(pair[0] or pair[1], str(path.relative_to(folder)))
    return found


def test_what_the_scenarios_execute_needs_only_runtime_dependencies() -> None:
    """``pip install -e . && teamctl demo`` (and every ``scenario run``) works without the dev
    extras: each third-party module a scenario runs or imports comes from a distribution that
    ``[project].dependencies`` names."""
    runtime = runtime_distributions()
    owners = importlib.metadata.packages_distributions()
    seen: set[str] = set()
    problems = []
    for scenario in SCENARIOS:
        folder = scenario.folder
        local = {p.stem for p in (folder / "repo").iterdir()}
        for module, where in needed_modules(folder).items():
            seen.add(module)
            if module in sys.stdlib_module_names or module in local:
                continue
            dists = {_normal(d) for d in owners.get(module, [])}
            if not dists & runtime:
                problems.append(f"{module} ({where}): from {sorted(dists) or 'nowhere'}")
    assert "pytest" in seen  # the scan finds what the scenarios run
    assert problems == [], "not a runtime dependency in pyproject.toml"


VIA_API = [s for s in RUNNABLE if s.name != "idle-claimers"]  # that one: through the CLI below


@pytest.mark.parametrize("scenario", VIA_API, ids=[s.name for s in VIA_API])
def test_scenario_passes_through_the_fake_api(scenario: Scenario, tmp_path: Path) -> None:
    result = run_scenario(scenario, via_api=True, workdir=tmp_path)
    assert result.ok, [f"{c.name}: {c.detail}" for c in result.failures]
    assert_every_expectation_checked(scenario, [c.as_json() for c in result.checks])
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
    """idle-claimers with one wrong expectation of each kind."""
    folder = tmp_path / "idle-claimers"
    shutil.copytree(scenarios_dir() / "idle-claimers", folder)
    path = folder / "scenario.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    expect = data["expect"]
    expect["tasks"].append({"subject": "Add slugify", "status": "pending"})
    expect["events"].append({"type": "task.completed", "count": 9})
    expect["messages"].append({"to": "lead", "type": "cron_fired"})
    expect["commands"].append({"run": "python -m pytest -q", "output_contains": "7 passed"})
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
    assert "FAILED: 6 of" in out.output
    as_json = CliRunner().invoke(cli, ["scenario", "run", str(folder), "--json"])
    assert as_json.exit_code == 1
    failed = [(c["name"], c["detail"]) for c in json.loads(as_json.output)["checks"] if not c["ok"]]
    order = "order: task.claimed task=Test the public API before task.completed task=Add slugify"
    assert [name for name, _ in failed] == [
        "task 'Add slugify'",
        "file textkit/slug.py",
        "event task.completed",
        "message to lead cron_fired",
        order,
        "command 'python -m pytest -q'",
    ]
    details = dict(failed)
    assert details["task 'Add slugify'"] == "status completed (expected pending)"
    assert details["event task.completed"] == "8 (expected 9)"
    assert details["message to lead cron_fired"] == "never delivered"
    assert re.fullmatch(r"seq \d+ vs \d+", details[order])
    assert details["command 'python -m pytest -q'"].startswith("output lacks '7 passed'; 6 passed")


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
