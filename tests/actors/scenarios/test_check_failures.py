"""Every kind of scenario check fails, with a readable reason, when its expectation is not met.

One real run of ``idle-claimers`` (in process, scripted model) is kept; each test checks it
against expectations that deliberately do not hold (``check_all`` reads the kept repository:
journal, board, mailboxes, files, commands), or breaks a copy of it for the "nothing lost"
invariant (docs/RELIABILITY.md, "How the evidence is produced").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from actors.scenarios.check import Check, RunOutcome, check_all
from actors.scenarios.model import Expectations, Scenario, find_scenario
from actors.scenarios.run import execute


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Scenario, RunOutcome]]:
    scenario = find_scenario("idle-claimers")
    root = tmp_path_factory.mktemp("idle-claimers") / "repo"
    outcome = execute(scenario, root, via_api=False, timeout_s=scenario.timeout_s)
    yield scenario, outcome
    shutil.rmtree(root, ignore_errors=True)


def expecting(scenario: Scenario, **fields: Any) -> Scenario:
    """The scenario with only these expectations (no tool-error count unless given)."""
    fields.setdefault("tool_errors", None)
    return scenario.model_copy(update={"expect": Expectations.model_validate(fields)})


def checked(scenario: Scenario, outcome: RunOutcome, **fields: Any) -> list[Check]:
    """The expectation checks (the run's own left out), in file order."""
    checks = check_all(expecting(scenario, **fields), outcome)
    run_checks = {"team went idle", "no agent errors", "script fully played"}
    assert {c.name for c in checks if c.name in run_checks} == run_checks
    assert all(c.ok for c in checks if c.name in run_checks), checks
    return [c for c in checks if c.name not in run_checks]


def failed(checks: list[Check]) -> list[tuple[str, str]]:
    """(name, reason) of each failed check, in order."""
    return [(c.name, c.detail) for c in checks if not c.ok]


def named(checks: list[Check], name: str) -> Check:
    [check] = [c for c in checks if c.name == name]
    return check


def test_the_kept_run_meets_its_own_expectations(run: tuple[Scenario, RunOutcome]) -> None:
    scenario, outcome = run
    checks = check_all(scenario, outcome)
    assert [c for c in checks if not c.ok] == []
    assert len(checks) == 24


def test_a_task_in_another_status_or_owner_or_unknown_fails(
    run: tuple[Scenario, RunOutcome],
) -> None:
    scenario, outcome = run
    got = checked(
        scenario,
        outcome,
        tasks=[
            {"subject": "Add slugify", "status": "pending"},
            {"id": "task_2", "owner": "zed"},
            {"subject": "Add slugify", "status": "completed"},
            {"subject": "No such task"},
            {"id": "task_99", "status": "completed"},
        ],
        task_count=9,
        all_tasks="pending",
    )
    owner = named(got, "task 'task_2'").detail
    assert owner.startswith("owner ") and owner.endswith(" (expected zed)")
    assert owner.split()[1] in {"ann", "bob", "cid"}
    assert failed(got) == [
        ("task count", "8 (expected 9)"),
        ("all tasks pending", ", ".join(f"task_{n} completed" for n in range(1, 9))),
        ("task 'Add slugify'", "status completed (expected pending)"),
        ("task 'task_2'", owner),
        ("task 'No such task'", "no such task (or the subject names several)"),
        ("task 'task_99'", "no such task (or the subject names several)"),
    ]
    # the same task expected as it is passes, showing what it is
    assert [(c.name, c.ok, c.detail.split(" by ")[0]) for c in got][4] == (
        "task 'Add slugify'",
        True,
        "task_1 completed",
    )


def test_an_event_never_journaled_or_counted_wrong_fails(run: tuple[Scenario, RunOutcome]) -> None:
    scenario, outcome = run
    got = checked(
        scenario,
        outcome,
        events=[
            {"type": "member.spawned", "count": 5},
            {"type": "member.spawned", "count": 4},
            {"type": "task.claimed", "count": 0},
            {"type": "plan.reviewed"},
            {"type": "task.completed", "task": "Add slugify", "actor": "lead"},
            {"type": "task.completed", "task": "No such task"},
            {"type": "task.created", "data": {"subject": "Add slugify", "role": "tester"}},
        ],
    )
    assert [(c.ok, c.detail) for c in got[:2]] == [
        (False, "4 (expected 5)"),
        (True, "4 (expected 4)"),
    ]
    assert failed(got) == [
        ("event member.spawned", "4 (expected 5)"),
        ("event task.claimed", "8 (expected 0)"),
        ("event plan.reviewed", "never journaled"),
        ("event task.completed task=Add slugify actor=lead", "never journaled"),
        ("event task.completed task=No such task", "no single task named 'No such task'"),
        ("event task.created subject=Add slugify role=tester", "never journaled"),
    ]


def test_a_message_never_delivered_or_counted_wrong_fails(
    run: tuple[Scenario, RunOutcome],
) -> None:
    scenario, outcome = run
    got = checked(
        scenario,
        outcome,
        messages=[
            {"to": "lead", "type": "cron_fired"},
            {"to": "lead", "type": "idle_notification", "contains": "Finished task_8", "count": 2},
            {"to": "lead", "from": "lead", "type": "idle_notification"},
            {"to": "ann", "contains": "a text nobody sent"},
            {"to": "lead", "type": "idle_notification", "contains": "Finished task_8"},
        ],
    )
    assert failed(got) == [
        ("message to lead cron_fired", "never delivered"),
        ("message to lead idle_notification containing 'Finished task_8'", "1 (expected 2)"),
        ("message to lead idle_notification from lead", "never delivered"),
        ("message to ann containing 'a text nobody sent'", "never delivered"),
    ]
    # the last one (the second without a count) holds: one such message was delivered
    assert (got[-1].ok, got[-1].detail) == (True, "1 found")


def test_events_in_the_wrong_order_or_missing_fail(run: tuple[Scenario, RunOutcome]) -> None:
    scenario, outcome = run
    got = checked(
        scenario,
        outcome,
        order=[
            {
                "before": {"type": "task.claimed", "task": "Test slugify"},
                "after": {"type": "task.completed", "task": "Add slugify"},
            },
            {
                "before": {"type": "task.completed", "task": "Add slugify"},
                "after": {"type": "plan.reviewed"},
            },
            {
                "before": {"type": "plan.reviewed"},
                "after": {"type": "task.claimed"},
            },
            {  # one event is not before itself
                "before": {"type": "task.completed", "task": "Add slugify"},
                "after": {"type": "task.completed", "task": "Add slugify"},
            },
        ],
    )
    wrong = got[0]
    assert wrong.name == (
        "order: task.claimed task=Test slugify before task.completed task=Add slugify"
    )
    first, second = (int(n) for n in wrong.detail.removeprefix("seq ").split(" vs "))
    assert not wrong.ok and first > second
    assert failed(got) == [
        (wrong.name, wrong.detail),
        (
            "order: task.completed task=Add slugify before plan.reviewed",
            "the second never happened",
        ),
        ("order: plan.reviewed before task.claimed", "the first never happened"),
        (got[3].name, got[3].detail),
    ]
    same = got[3].detail.removeprefix("seq ").split(" vs ")
    assert same[0] == same[1]
    assert got[3].as_json() == {"name": got[3].name, "ok": False, "detail": got[3].detail}


def test_a_command_with_another_exit_code_output_or_too_slow_fails(
    run: tuple[Scenario, RunOutcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario, outcome = run
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")  # the checker's, not the commands'
    got = checked(
        scenario,
        outcome,
        commands=[
            {"run": "echo fine; exit 3"},
            {"run": "echo fine", "output_contains": "6 passed"},
            {"run": "echo fine; exit 3", "exit_code": 3},
            {"run": "python -c 'import time; time.sleep(30)'", "timeout_s": 0.5},
            {"run": "test -f textkit/slug.py && echo in the repository"},
            {"run": "echo PYTHONPATH=${PYTHONPATH-unset}", "output_contains": "=unset"},
            {"run": "command -v python"},
        ],
    )
    assert failed(got) == [
        ("command 'echo fine; exit 3'", "exit 3 (expected 0); fine"),
        ("command 'echo fine'", "output lacks '6 passed'; fine"),
        ("command \"python -c 'import time; time.sleep(30)'\"", "timed out after 0.5s"),
    ]
    # ``python`` is this interpreter; the caller's PYTHONPATH does not leak into the commands
    assert [(c.ok, c.detail) for c in got if c.ok] == [
        (True, "fine"),
        (True, "in the repository"),
        (True, "PYTHONPATH=unset"),
        (True, os.path.join(os.path.dirname(sys.executable), "python")),
    ]
    env = subprocess.run(
        ["sh", "-c", "echo PYTHONPATH=${PYTHONPATH-unset}; command -v python"],
        capture_output=True,
        text=True,
    )
    assert env.stdout.startswith("PYTHONPATH=/somewhere/else")


def test_a_file_missing_present_or_with_other_content_fails(
    run: tuple[Scenario, RunOutcome],
) -> None:
    scenario, outcome = run
    got = checked(
        scenario,
        outcome,
        files=[
            {"path": "textkit/slug.py", "contains": ["def slugify", "def unslugify"]},
            {"path": "textkit/nothing.py"},
            {"path": "textkit/slug.py", "absent": True},
            {"path": "textkit/case.py", "lacks": "SMALL", "matches": r"def \w+_case\("},
            {"path": "textkit/counts.py", "matches": "^class "},
            {"path": "tests/test_api.py", "equals": "import textkit\n"},
            {"path": "textkit/slug.py", "branch": "main"},
        ],
    )
    assert failed(got) == [
        ("file textkit/slug.py", "lacks 'def unslugify'"),
        ("file textkit/nothing.py", "missing"),
        ("file textkit/slug.py absent", "exists"),
        ("file textkit/case.py", "still contains 'SMALL'"),
        ("file textkit/counts.py", "does not match /^class /"),
        ("file tests/test_api.py", "differs from the expected content (213 vs 15 chars)"),
        ("file textkit/slug.py on main", "missing"),
    ]


def test_an_unmet_run_expectation_fails(run: tuple[Scenario, RunOutcome]) -> None:
    scenario, outcome = run
    broken = replace(
        outcome,
        idle=False,
        events=[
            *outcome.events,
            {"type": "error", "agent": "ann", "error": "model down"},
            {"type": "tool_result", "agent": "bob", "is_error": True, "content": "no such file"},
            {"type": "tool_result", "agent": "bob", "is_error": False, "content": "fine"},
            {"type": "tool_result", "agent": "cid", "is_error": True, "content": "x" * 300},
        ],
        unconsumed={"lead": ["step 2: {}"], "ann": ["1 steps of '*'"]},
        script_errors=["lead: no rule matched 'x'"],
    )
    checks = {c.name: c for c in check_all(expecting(scenario, tool_errors=0), broken)}
    assert {n: c.detail for n, c in checks.items() if not c.ok} == {
        "team went idle": "not within 60s",
        "no agent errors": "ann: model down | lead: no rule matched 'x'",
        "failed tool calls": "2 (expected 0) | bob: no such file | cid: " + "x" * 200,
        "script fully played": "lead: step 2: {} | ann: 1 steps of '*'",
    }
    allowed = check_all(expecting(scenario, tool_errors=2), broken)
    assert [(c.ok, c.detail[:30]) for c in allowed if c.name == "failed tool calls"] == [
        (True, "2 (expected 2) | bob: no such ")
    ]


def test_an_unmet_workflow_expectation_fails(run: tuple[Scenario, RunOutcome]) -> None:
    scenario, outcome = run
    ran = replace(
        outcome,
        workflow={"run_id": "wf_1", "status": "failed", "result": None, "error": "step 2 failed"},
    )
    long = replace(ran, workflow={**(ran.workflow or {}), "error": "e" * 500})
    checks = check_all(
        expecting(
            scenario,
            workflow={"status": "completed", "result": {"n": 1}, "error_contains": "timeout"},
        ),
        ran,
    )
    assert {c.name: c.detail for c in checks if not c.ok} == {
        "workflow completed": "run wf_1 failed: step 2 failed",
        "workflow result": "got null",
        "workflow error containing 'timeout'": "step 2 failed",
    }
    shown = check_all(
        expecting(scenario, workflow={"status": "failed", "error_contains": "e"}), long
    )
    assert [c.detail for c in shown if c.name.startswith("workflow")] == [
        "run wf_1 failed",
        "e" * 300,  # a long error is cut
    ]


# -- the "nothing lost" invariant on a damaged copy of the run -------------------------------------


@pytest.fixture
def copy(run: tuple[Scenario, RunOutcome], tmp_path: Path) -> tuple[Scenario, RunOutcome]:
    scenario, outcome = run
    root = tmp_path / "repo"
    shutil.copytree(outcome.root, root, symlinks=True)
    return scenario, replace(outcome, root=root)


def nothing_lost(scenario: Scenario, outcome: RunOutcome) -> Check:
    checks = check_all(expecting(scenario, invariants=["nothing_lost"]), outcome)
    [check] = [c for c in checks if c.name == "invariant nothing_lost"]
    return check


def test_nothing_lost_holds_on_the_untouched_copy(copy: tuple[Scenario, RunOutcome]) -> None:
    assert nothing_lost(*copy) == Check("invariant nothing_lost", True, "")


def test_a_message_stored_twice_is_lost_evidence(copy: tuple[Scenario, RunOutcome]) -> None:
    scenario, outcome = copy
    box = outcome.root / ".team" / "mailboxes" / "lead"
    read = sorted((box / "cur").iterdir())[0]
    shutil.copy(read, box / "new" / f"again.{read.name}")
    check = nothing_lost(scenario, outcome)
    assert not check.ok
    assert check.detail.startswith("message ") and check.detail.endswith(" to lead stored twice")


def test_a_process_left_in_the_repository_is_named(copy: tuple[Scenario, RunOutcome]) -> None:
    scenario, outcome = copy
    sub = outcome.root / "textkit"
    left = subprocess.Popen(["sleep", "60"], cwd=sub)
    try:
        check = nothing_lost(scenario, outcome)
    finally:
        left.kill()
        left.wait()
    assert (check.ok, check.detail) == (False, f"process {left.pid} still runs in the repository")


def test_a_drifted_projection_is_named_not_repaired(copy: tuple[Scenario, RunOutcome]) -> None:
    scenario, outcome = copy
    task = outcome.root / ".tasks" / "task_1.json"
    task.write_text(task.read_text().replace('"completed"', '"pending"'))
    check = nothing_lost(scenario, outcome)
    assert (check.ok, check.detail) == (False, f"projection drift: {task}: differs: fields status")
    assert '"pending"' in task.read_text()  # the checker changed nothing


def test_a_torn_or_damaged_journal_is_named(copy: tuple[Scenario, RunOutcome]) -> None:
    scenario, outcome = copy
    journal = outcome.root / ".team" / "journal.jsonl"
    whole = journal.read_bytes()
    with journal.open("ab") as f:
        f.write(b'{"seq": 999, "ty')
    check = nothing_lost(scenario, outcome)
    last = whole.count(b"\n") + 1
    assert (check.ok, check.detail) == (
        False,
        f"journal {journal} line {last}: last line has no newline (torn write)",
    )
    lines = whole.split(b"\n")
    lines[5] = lines[5][:-3] + b"XYZ"
    journal.write_bytes(b"\n".join(lines))
    check = nothing_lost(scenario, outcome)
    assert not check.ok
    assert check.detail.startswith(
        f"journal {journal} line 6: not a framed journal line (torn or overwritten); "
        "projection drift: "
    )
