"""A verified task through a scripted team: the teammate's first ``complete_task`` is refused
(its ``verify`` command fails in the task's worktree), the teammate reads the output, writes the
file and completes; the lead's merge re-runs the command on the merge result and lands it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from actors.runtime.members import default_tools
from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from mailboxes.events import TaskVerified, payload
from tests.actors.runtime.runtime_support import Events, runtime, stop_actors, team_repo

__all__ = ["stop_actors"]


def test_refused_until_verified_then_merged(tmp_path: Path, stop_actors: list[Any]) -> None:
    root = team_repo(tmp_path)
    (root / "README.md").write_text("base\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "README.md"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=root, check=True)
    script = {
        "agents": {
            "lead": {"rules": [{"match": "(?s).", "text": "ok"}]},
            "w1": {
                "rules": [
                    {
                        "match": r"You now hold task task_1",
                        "tool_uses": [
                            {
                                "name": "complete_task",
                                "input": {"task_id": "task_1", "summary": "nothing to do"},
                            }
                        ],
                    },
                    {
                        "match": r"(?s)Completion of task_1 refused.*exited 1",
                        "tool_uses": [
                            {"name": "write_file", "input": {"path": "done.txt", "content": "x"}},
                            {
                                "name": "complete_task",
                                "input": {"task_id": "task_1", "summary": "wrote done.txt"},
                            },
                        ],
                    },
                    {"match": "(?s).", "text": "done", "priority": -1},
                ]
            },
        }
    }
    events = Events()
    rt = runtime(
        root,
        ScriptedModel(script),
        tools=default_tools,
        worktrees=True,
        permission_mode="acceptEdits",
        on_event=events,
    )
    stop_actors.append(rt)
    rt.start()
    rt.board.create("write done.txt", verify="test -f done.txt")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1", worktree=True), by="lead")
    assert rt.wait_idle(timeout=60)

    task = rt.board.refresh().tasks["task_1"]
    assert task.status == "completed" and task.verified is True
    assert task.summary == "wrote done.txt"
    results = [e for e in events.of("tool_result") if e["agent"] == "w1"]
    assert [r["is_error"] for r in results] == [True, False, False]
    runs = [payload(e) for e in rt.team.journal.read_from(1) if e.type == TaskVerified.TYPE]
    assert [(r.stage, r.passed, r.worktree) for r in runs if isinstance(r, TaskVerified)] == [
        ("complete", False, "task_1"),
        ("complete", True, "task_1"),
    ]

    handle = rt.services.worktrees
    assert handle is not None
    merged = handle.merge("task_1")
    assert merged.ok and merged.verified and (root / "done.txt").read_text() == "x"
