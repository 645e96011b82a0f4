"""The team state the lead reads in its reminders: open work in full, finished work on one line."""

from __future__ import annotations

from actors.board.state import Member, Task, TeamState
from actors.runtime.lead import team_state_text


def test_completed_tasks_fold_into_one_line_and_open_tasks_stay_whole() -> None:
    state = TeamState(
        members={"lead": Member("lead"), "w1": Member("w1", status="working")},
        tasks={
            "task_1": Task("task_1", "Write one", status="completed", owner="w1"),
            "task_2": Task("task_2", "Write two", status="completed"),
            "task_3": Task("task_3", "Write three", status="in_progress", owner="w1"),
        },
        holdings={"w1": "task_3"},
    )
    text = team_state_text(state)
    assert "- completed (2): task_1 (w1), task_2" in text
    assert "Write one" not in text and "Write two" not in text
    assert "- task_3 [in_progress, owner w1] Write three" in text


def test_a_long_history_shows_only_the_latest_completed_ids() -> None:
    tasks = {f"task_{n}": Task(f"task_{n}", f"s{n}", status="completed") for n in range(1, 11)}
    text = team_state_text(TeamState(tasks=tasks), limit=3)
    assert "- completed (10): 7 earlier, task_8, task_9, task_10" in text
