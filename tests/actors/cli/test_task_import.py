"""``teamctl task import``: many tasks in one journal commit, all or nothing; ``teamctl tasks``
pages a long board; opening a big team checks only the projection files touched since the
last projection write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mailboxes.journal.store import FileJournal
from tests.actors.cli.cli_support import git_repo, ok, ok_json, run


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_import_adds_every_task_in_one_commit_with_dependencies_by_subject_or_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    ok(["task", "add", "existing"])
    before = FileJournal(root / ".team").last_seq()
    rows = [
        {"subject": "build", "description": "make it", "verify": "true"},
        {"subject": "test", "blocked_by": ["build"]},
        {"subject": "ship", "blocked_by": ["test", "task_1", "later"]},
        {"subject": "later"},
    ]
    out = ok_json(["task", "import", str(_write(tmp_path / "t.jsonl", rows))])
    assert out == {"imported": 4, "ids": ["task_2", "task_3", "task_4", "task_5"]}
    events = list(FileJournal(root / ".team").read_from(before + 1))
    assert [e.type for e in events] == ["task.created"] * 4
    assert len({e.ts for e in events}) == 1  # one commit
    shown = {t["id"]: t for t in ok_json(["tasks"])}
    assert shown["task_2"]["verify"] == "true" and shown["task_2"]["description"] == "make it"
    assert shown["task_3"]["blocked_by"] == ["task_2"]
    assert sorted(shown["task_4"]["blocked_by"]) == ["task_1", "task_3", "task_5"]
    assert ok(["replay", "--verify"]).exit_code == 0


def test_a_bad_import_adds_nothing_and_reports_every_bad_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    ok(["task", "add", "dup"])
    ok(["task", "add", "dup"])
    before = FileJournal(root / ".team").last_seq()
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"subject": "fine"}),
                json.dumps({"subject": "a", "blocked_by": ["b"]}),
                json.dumps({"subject": "b", "blocked_by": ["a"]}),
                json.dumps({"subjet": "typo"}),
                "{not json",
                json.dumps({"subject": "x", "blocked_by": ["task_99"]}),
                json.dumps({"subject": "y", "blocked_by": ["dup"]}),
                json.dumps({"subject": "   "}),
                "",
            ]
        ),
        encoding="utf-8",
    )
    result = run(["task", "import", str(path)])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert [line.split(":")[1].strip() for line in lines[:-1]] == [
        "line 2",
        "line 3",
        "line 4",
        "line 5",
        "line 6",
        "line 7",
        "line 8",
    ]
    assert "cycle" in lines[0] and "unknown key subjet" in lines[2]
    assert "not JSON" in lines[3] and "no such task" in lines[4]
    assert "more than one task has this subject" in lines[5]
    assert "nothing was imported" in lines[-1]
    assert FileJournal(root / ".team").last_seq() == before


def test_tasks_pages_a_long_board(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo(tmp_path, monkeypatch)
    rows = [{"subject": f"job {n}", "blocked_by": [f"job {n - 1}"] if n else []} for n in range(30)]
    ok(["task", "import", str(_write(tmp_path / "t.jsonl", rows))])
    out = ok(["tasks", "--limit", "5"]).stdout
    assert "task_5 " in out and "task_6 " not in out
    assert "and 25 more (25 blocked)" in out
    assert "job 29" in ok(["tasks"]).stdout  # not a terminal: everything
    ready = ok(["tasks", "--status", "ready"]).stdout
    assert "task_1 " in ready and "task_2 " not in ready
    assert "no tasks match" in ok(["tasks", "--owner", "nobody"]).stdout


def test_opening_repairs_a_projection_edited_by_hand_since_the_last_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    for n in range(3):
        ok(["task", "add", f"task {n}"])
    path = root / ".tasks" / "task_2.json"
    good = path.read_bytes()
    path.write_bytes(good.replace(b"task 1", b"hacked"))
    result = ok(["tasks"])
    assert "rewrote projection" in result.stderr
    assert path.read_bytes() == good
    # A deleted projection file and one the journal never made are found as well.
    path.unlink()
    (root / ".tasks" / "task_9.json").write_text("{}", encoding="utf-8")
    ok(["tasks"])
    assert path.read_bytes() == good
    assert not (root / ".tasks" / "task_9.json").exists()


def test_an_edit_that_hides_its_time_is_still_found_by_replay_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    ok(["task", "add", "one"])
    path = root / ".tasks" / "task_1.json"
    stat = path.stat()
    path.write_bytes(path.read_bytes().replace(b'"one"', b'"two"'))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - 10**9))  # older than the mark
    assert '"two"' in path.read_text()
    result = run(["replay", "--verify"])
    assert result.exit_code == 1 and "task_1.json" in result.stdout


def test_opening_removes_the_temporary_file_of_a_projection_writer_that_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    ok(["task", "add", "a"])
    tasks = root / ".tasks"
    orphan = tasks / ".task_1.json.999999.tmp"  # what atomic_write leaves when killed mid-write
    orphan.write_text('{"id": "task_1", "subj', encoding="utf-8")
    keep = [tasks / ".tmp", tasks / "notes.tmp", tasks / "task_1.json"]
    keep[0].write_text("", encoding="utf-8")
    keep[1].write_text("", encoding="utf-8")
    ok(["tasks"])  # the projections are current: only the files touched since are compared
    assert not orphan.exists()
    assert all(path.exists() for path in keep)
    assert "warning" not in run(["tasks"]).stderr
