"""Issue 5 end to end: with ``team.worktree_per_task`` two idle teammates claim two tasks, each in
a worktree made for it, and work at the same time without touching each other's files or the
main checkout; a third task conflicts. ``teamctl worktree merge --all`` merges the first two and
reports the conflict of the third, leaving the main checkout as it was."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.members import default_tools
from actors.services import TeammateSpec
from harness.model.scripted import ScriptedModel, latest_input
from harness.ports import ModelRequest, ModelResponse
from tests.actors.cli.cli_support import run
from tests.actors.runtime.runtime_support import Events, runtime, stop_actors
from tests.actors.worktrees.worktree_support import git, make_repo

__all__ = ["stop_actors"]

_BRIEF = r"(?s)You now hold task (?P<id>task_\d+) \(claim \d+\): {subject}.*Working directory: (?P<wd>\S+)"


class TogetherModel:
    """A scripted model whose calls answering a brief matching ``pattern`` wait for each other:
    the teammates holding those tasks are provably at work at the same time."""

    def __init__(self, inner: ScriptedModel, pattern: str, parties: int) -> None:
        self.inner = inner
        self.pattern = re.compile(pattern)
        self.barrier = threading.Barrier(parties, timeout=30)

    def complete(self, request: ModelRequest) -> ModelResponse:
        if self.pattern.search(latest_input(request)):
            self.barrier.wait()
        return self.inner.complete(request)


def _work(subject: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    done = {"name": "complete_task", "input": {"task_id": "{id}", "summary": f"did {subject}"}}
    return {"match": _BRIEF.format(subject=subject), "tool_uses": [*steps, done]}


def _script(root: Path) -> dict[str, Any]:
    def write(path: str, text: str) -> dict[str, Any]:
        return {"name": "write_file", "input": {"path": path, "content": text}}

    other = str(root / ".worktrees")
    return {
        "agents": {
            "lead": {"rules": [{"match": "(?s).*", "text": "ok"}]},
            "*": {
                "rules": [
                    _work(
                        "add a",
                        [
                            write("{wd}/a.txt", "A from task_1\n"),
                            write(str(root / "escape_1.txt"), "x"),  # the main checkout
                            write(f"{other}/task_2/a.txt", "x"),  # the other worktree
                            {
                                "name": "bash",
                                "input": {"command": "git add -A && git commit -qm A"},
                            },
                        ],
                    ),
                    _work(
                        "add b",
                        [
                            write("{wd}/b.txt", "B from task_2\n"),
                            write(str(root / "escape_2.txt"), "x"),
                            write(f"{other}/task_1/b.txt", "x"),
                            # no commit: completing the task commits it on wt/task_2
                        ],
                    ),
                    _work("another a", [write("{wd}/a.txt", "A from task_3\n")]),
                    {"match": "(?s).*", "text": "done", "priority": -1},
                ]
            },
        }
    }


def test_two_teammates_in_two_worktrees_then_merge_all_with_a_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_actors: list[Any]
) -> None:
    root = make_repo(tmp_path, monkeypatch)  # the cwd, on branch main with one commit
    base = git(root, "rev-parse", "HEAD")
    settings = {
        "permissions": {"defaultMode": "acceptEdits", "allow": ["bash"]},
        "team": {"worktree_per_task": True},
    }
    (root / ".team" / "settings.json").write_text(json.dumps(settings))
    model = TogetherModel(ScriptedModel(_script(root)), _BRIEF.format(subject="add [ab]"), 2)
    events = Events()
    rt = runtime(root, model, tools=default_tools, worktrees=True, on_event=events)
    stop_actors.append(rt)
    rt.start()
    for subject in ("add a", "add b", "another a"):
        rt.board.create(subject)
    rt.services.spawn_teammate(TeammateSpec(name="w1"), by="lead")
    rt.services.spawn_teammate(TeammateSpec(name="w2"), by="lead")
    assert rt.wait_idle(timeout=60)
    state = rt.board.refresh()
    rt.stop()

    # Each task was claimed by an idle teammate and worked in a worktree made for it.
    for tid in ("task_1", "task_2", "task_3"):
        task = state.tasks[tid]
        assert (task.status, task.worktree) == ("completed", tid)
        assert state.worktrees[tid].branch == f"wt/{tid}"
    journal = [json.loads(line) for line in (root / ".team" / "journal.jsonl").open()]
    seq = {(e["type"], e["data"].get("task_id")): e["seq"] for e in journal}
    first_done = min(e["seq"] for e in journal if e["type"] == "task.completed")
    assert seq[("task.claimed", "task_1")] < first_done
    assert seq[("task.claimed", "task_2")] < first_done
    assert seq[("worktree.bound", "task_1")] < seq[("task.claimed", "task_1")]

    # Nobody touched the main checkout or the other's worktree; every escape was refused.
    assert git(root, "rev-parse", "HEAD") == base and git(root, "status", "--porcelain") == ""
    assert not list(root.glob("escape_*"))
    wt = root / ".worktrees"
    assert sorted(p.name for p in (wt / "task_1").glob("*.txt")) == ["a.txt"]
    assert sorted(p.name for p in (wt / "task_2").glob("*.txt")) == ["b.txt"]
    results = [e["is_error"] for e in events.of("tool_result") if e["agent"] != "lead"]
    assert len(results) == 11 and results.count(True) == 4  # the four escapes, nothing else

    # The leftovers of task_2 were committed on its branch when it completed; nothing is locked.
    assert "task_2: add b" in git(root, "log", "-1", "--format=%B", "wt/task_2")
    assert git(wt / "task_2", "status", "--porcelain") == ""
    assert "locked" not in git(root, "worktree", "list", "--porcelain")

    # One command merges both branches; the third conflicts and changes nothing.
    result = run(["worktree", "merge", "--all", "--json"])
    assert result.exit_code == 1, result.output
    reports = {r["name"]: r for r in json.loads(result.stdout)}
    assert reports["task_1"]["ok"] and reports["task_2"]["ok"]
    assert not reports["task_3"]["ok"] and reports["task_3"]["conflicts"] == ["a.txt"]
    assert git(root, "rev-parse", "HEAD") == reports["task_2"]["commit"]
    assert git(root, "status", "--porcelain") == ""
    assert (root / "a.txt").read_text() == "A from task_1\n"
    assert (root / "b.txt").read_text() == "B from task_2\n"
    assert (
        subprocess.run(
            ["git", "merge-base", "--is-ancestor", "wt/task_3", "HEAD"], cwd=root
        ).returncode
        == 1
    )
