"""The brief that hands a task to a teammate stays in its conversation and is sent again with
every later request: it says what this task needs and nothing every brief would repeat."""

from __future__ import annotations

from pathlib import Path

from actors.board.state import Task
from actors.runtime.teammate import task_brief


def test_a_brief_names_the_claim_and_the_outcomes_of_its_dependencies_and_nothing_else(
    tmp_path: Path,
) -> None:
    tasks = {
        "task_1": Task("task_1", "lay the base", status="completed", summary="base laid"),
        "task_2": Task("task_2", "draw the plan", status="in_progress", owner="w2"),
        "task_3": Task("task_3", "build", "on top", blocked_by=("task_1", "task_2"), epoch=2),
    }
    brief = task_brief(tasks["task_3"], tasks, tmp_path, tmp_path)
    assert brief == (
        "You now hold task task_3 (claim 2): build\n"
        "Description: on top\n"
        "Dependencies:\n"
        "- task_1: base laid\n"  # completed: the status goes without saying
        "- task_2 (in_progress): (no summary)"  # a claim forced past it: the status matters
    )
    moved = task_brief(tasks["task_1"], tasks, tmp_path / ".worktrees" / "a", tmp_path)
    assert moved.endswith(f"\nWorking directory: {tmp_path / '.worktrees' / 'a'}")
