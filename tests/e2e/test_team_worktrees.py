"""A teammate spawned for a task with its own worktree works only inside that worktree."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from actors.runtime.members import default_tools
from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel
from tests.actors.runtime.runtime_support import Events, runtime, stop_actors, team_repo

__all__ = ["stop_actors"]


def test_a_task_bound_to_a_worktree_is_worked_inside_it_only(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
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
                        "match": r"(?s)You now hold task task_1.*Working directory: (?P<wd>\S+)",
                        "tool_uses": [
                            {
                                "name": "write_file",
                                "input": {"path": "{wd}/new.txt", "content": "x"},
                            },
                            {
                                "name": "write_file",
                                "input": {"path": str(root / "escape.txt"), "content": "x"},
                            },
                            {
                                "name": "complete_task",
                                "input": {"task_id": "task_1", "summary": "ok"},
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
    rt.board.create("isolated change")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1", worktree=True), by="lead")
    assert rt.wait_idle(timeout=60)
    task = rt.board.refresh().tasks["task_1"]
    assert task.worktree == "task_1" and task.status == "completed"
    assert (root / ".worktrees" / "task_1" / "new.txt").read_text() == "x"
    assert not (root / "escape.txt").exists()
    results = [e for e in events.of("tool_result") if e["agent"] == "w1"]
    assert [r["is_error"] for r in results] == [False, True, False]
