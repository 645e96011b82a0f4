"""teamctl task commands in-process: the board through the CLI, refusals and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.actors.cli.cli_support import fails, git_repo, ok, ok_json, run


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return git_repo(tmp_path, monkeypatch)


def test_add_show_edit_delete(repo: Path) -> None:
    added = ok_json(["task", "add", "write docs", "-d", "all of them"])
    assert added["id"] == "task_1" and added["status"] == "pending" and added["ready"] is True
    ok(["task", "add", "review", "--blocked-by", "task_1"])
    shown = ok_json(["task", "show", "task_2"])
    assert shown["blocked_by"] == ["task_1"] and shown["ready"] is False
    assert "review" in ok(["task", "show", "task_2"]).stdout

    ok(["task", "edit", "task_2", "--subject", "review docs", "--remove-blocked-by", "task_1"])
    shown = ok_json(["task", "show", "task_2"])
    assert (shown["subject"], shown["blocked_by"], shown["ready"]) == ("review docs", [], True)
    ok(["task", "edit", "task_2", "--add-blocked-by", "task_1"])
    assert ok_json(["task", "show", "task_1"])["blocks"] == ["task_2"]

    assert "task_1 blocks task_2" in fails(["task", "delete", "task_1"])
    ok(["task", "delete", "task_1", "--force"])
    assert [t["id"] for t in ok_json(["tasks"])] == ["task_2"]
    assert [t["status"] for t in ok_json(["tasks", "--all"])] == ["pending", "deleted"]
    on_disk = json.loads((repo / ".tasks" / "task_1.json").read_text())
    assert on_disk["status"] == "deleted"


def test_tasks_table_by_status(repo: Path) -> None:
    assert "no tasks yet" in ok(["tasks"]).stdout
    ok(["task", "add", "a"])
    ok(["task", "add", "b", "--blocked-by", "task_1"])
    ok(["task", "add", "c"])
    ok(["task", "claim", "task_3", "--as", "ann"])
    rows = [line for line in ok(["tasks"]).stdout.splitlines() if line.startswith("task_")]
    assert [r.split()[0] for r in rows] == ["task_3", "task_1", "task_2"]
    assert "ann (human)" in rows[0] and "ready" in rows[1] and "blocked" in rows[2]
    listed = ok_json(["tasks"])
    top = listed[0]
    assert (top["id"], top["owner"], top["held_by_human"]) == ("task_3", "ann", True)


def test_unknown_task_id(repo: Path) -> None:
    for args in (
        ["task", "show", "task_9"],
        ["task", "edit", "task_9", "--subject", "x"],
        ["task", "delete", "task_9"],
        ["task", "claim", "task_9", "--as", "ann"],
        ["task", "complete", "task_9", "--as", "ann"],
        ["task", "add", "x", "--blocked-by", "task_9"],
        ["task", "show", "nonsense"],
    ):
        assert "unknown task" in fails(args), args


def test_cycle_is_refused(repo: Path) -> None:
    ok(["task", "add", "a"])
    ok(["task", "add", "b", "--blocked-by", "task_1"])
    ok(["task", "add", "c", "--blocked-by", "task_2"])
    line = fails(["task", "edit", "task_1", "--add-blocked-by", "task_3"])
    assert "cycle" in line and "task_1" in line
    assert "cycle" in fails(["task", "edit", "task_1", "--add-blocked-by", "task_1"])
    assert ok_json(["task", "show", "task_1"])["blocked_by"] == []


def test_claiming_a_blocked_or_owned_task_is_a_plain_no(repo: Path) -> None:
    ok(["task", "add", "a"])
    ok(["task", "add", "b", "--blocked-by", "task_1"])
    assert "blocked by task_1" in fails(["task", "claim", "task_2", "--as", "ann"])
    ok(["task", "claim", "task_1", "--as", "ann"])
    assert "already claimed by ann" in fails(["task", "claim", "task_1", "--as", "bob"])
    assert "does not hold" in fails(["task", "complete", "task_1", "--as", "bob"])
    assert "does not hold" in fails(["task", "release", "task_1", "--as", "bob"])
    assert ok_json(["task", "show", "task_1"])["owner"] == "ann"


def test_human_claim_release_complete(repo: Path) -> None:
    ok(["task", "add", "a"])
    ok(["task", "add", "b", "--blocked-by", "task_1"])
    ok(["task", "claim", "task_1", "--as", "ann"])
    team = json.loads((repo / ".team" / "team.json").read_text())
    assert team["members"][0]["name"] == "ann" and team["members"][0]["kind"] == "human"
    ok(["task", "release", "task_1", "--as", "ann"])
    assert ok_json(["task", "show", "task_1"])["status"] == "pending"
    ok(["task", "claim", "task_1", "--as", "ann"])
    done = ok(["task", "complete", "task_1", "--as", "ann", "--summary", "did it"]).stdout
    assert "now ready: task_2" in done
    shown = ok_json(["task", "show", "task_1"])
    assert (shown["status"], shown["summary"], shown["epoch"]) == ("completed", "did it", 2)
    spawned = [
        e
        for e in map(json.loads, ok(["events", "--json"]).stdout.splitlines())
        if e["type"] == "member.spawned"
    ]
    assert len(spawned) == 1 and spawned[0]["data"]["kind"] == "human"


def test_hand_edited_task_file_is_ignored_and_repaired(repo: Path) -> None:
    ok(["task", "add", "a"])
    path = repo / ".tasks" / "task_1.json"
    original = path.read_text()
    path.write_text('{"id": "task_1", "subject": "hacked", "status": "completed"')  # malformed
    result = run(["tasks", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)[0]["subject"] == "a"  # the journal is the truth
    assert "warning:" in result.stderr and "task_1.json" in result.stderr
    assert path.read_text() == original

    path.write_text(original.replace('"subject": "a"', '"subject": "hacked"'))  # valid JSON
    result = run(["task", "add", "b"])
    assert result.exit_code == 0 and "task_1.json" in result.stderr
    assert path.read_text() == original
    ok(["replay", "--verify"])


def test_json_outputs_parse(repo: Path) -> None:
    ok(["task", "add", "a"])
    ok(["task", "claim", "task_1", "--as", "ann"])
    ok(["send", "ann", "hi"])
    for args in (["tasks"], ["task", "show", "task_1"], ["status"], ["inbox", "ann"]):
        assert ok_json(args) is not None, args
    assert ok_json(["replay", "--verify"])["ok"] is True
    assert ok_json(["journal", "check"])["ok"] is True
    lines = ok(["events", "--json"]).stdout.splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(1, len(lines) + 1))
