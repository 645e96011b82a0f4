"""teamctl events / replay --verify / journal check, and journal faults seen through the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.actors.cli.cli_support import fails, git_repo, ok, ok_json, run


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = git_repo(tmp_path, monkeypatch)
    ok(["task", "add", "a"])
    ok(["task", "add", "b"])
    return root


def journal_lines(repo: Path) -> list[bytes]:
    return (repo / ".team" / "journal.jsonl").read_bytes().splitlines(keepends=True)


def test_events_table_json_and_since(repo: Path) -> None:
    table = ok(["events"]).stdout
    assert "team.created" in table and "task.created" in table
    events = [json.loads(line) for line in ok(["events", "--json"]).stdout.splitlines()]
    assert [e["type"] for e in events] == ["team.created", "task.created", "task.created"]
    assert set(events[0]) == {"seq", "ts", "type", "actor", "op_id", "data", "v"}
    later = ok(["events", "--json", "--since", "2"]).stdout.splitlines()
    assert [json.loads(line)["seq"] for line in later] == [3]
    assert ok(["events", "--since", "3"]).stdout.strip() == "no events"


def test_torn_last_line_is_repaired(repo: Path) -> None:
    path = repo / ".team" / "journal.jsonl"
    with path.open("ab") as f:
        f.write(b'{"actor":"cli","data":{"task_id":"task_3"')  # a writer died mid-line
    check = run(["journal", "check"])
    assert check.exit_code == 0 and "torn" in check.stdout
    assert ok_json(["journal", "check"])["repairable"] is True
    assert [t["id"] for t in ok_json(["tasks"])] == ["task_1", "task_2"]
    types = [json.loads(line)["type"] for line in ok(["events", "--json"]).stdout.splitlines()]
    assert types[-1] == "journal.tail_repaired"
    assert ok_json(["journal", "check"])["ok"] is True
    ok(["task", "add", "c"])
    ok(["replay", "--verify"])


def test_corrupted_middle_line_refuses_writes_and_shows_what_it_can(repo: Path) -> None:
    """Issue 12 item 9: writing commands refuse with one line; read-only ones show the events
    before the bad line with one warning naming it and the salvage command."""
    path = repo / ".team" / "journal.jsonl"
    ok(["send", "lead", "hello"])
    ok(["task", "add", "c"])  # so the bad line is not the last (a bad last line is torn)
    lines = journal_lines(repo)
    lines[2] = lines[2].replace(b'"subject":"b"', b'"subject":"B"')  # task_2's line
    path.write_bytes(b"".join(lines))
    for args in (["task", "add", "d"], ["task", "claim", "task_1", "--as", "ann"]):
        line = fails(args)
        assert "corrupt at line 3" in line and "teamctl journal salvage" in line, args
    for args in (["tasks"], ["status"], ["task", "show", "task_1"], ["events"], ["inbox", "lead"]):
        shown = run(args)
        assert shown.exit_code == 0, (args, shown.output)
        warnings = shown.stderr.splitlines()
        assert len(warnings) == 1 and warnings[0].startswith("warning: journal "), args
        assert "damaged at line 3" in warnings[0] and "teamctl journal salvage" in warnings[0]
    assert [t["id"] for t in ok_json(["tasks"])] == ["task_1"]
    assert ok_json(["status"])["seq"] == 2
    assert [json.loads(e)["seq"] for e in ok(["events", "--json"]).stdout.splitlines()] == [1, 2]
    assert "task_2" not in ok(["events"]).stdout
    assert "hello" in ok(["inbox", "lead"]).stdout
    hidden = run(["task", "show", "task_2"])  # its line is the bad one
    assert hidden.exit_code == 1 and "unknown task 'task_2'" in hidden.stderr
    report = run(["journal", "check"])
    assert report.exit_code == 1 and "CORRUPT at line 2" not in report.stdout
    assert "CORRUPT at line 3" in report.stdout and "journal salvage" in report.stdout
    assert "Traceback" not in report.output
    assert b"".join(journal_lines(repo)) == b"".join(lines)  # nothing was changed


def test_replay_verify_finds_drift_and_exits_non_zero(repo: Path) -> None:
    assert "projections match" in ok(["replay", "--verify"]).stdout
    task_file = repo / ".tasks" / "task_2.json"
    task_file.write_text(task_file.read_text().replace('"subject": "b"', '"subject": "B"'))
    (repo / ".tasks" / "task_7.json").write_text("{}")
    result = run(["replay", "--verify"])
    assert result.exit_code == 1
    assert "task_2.json: differs: fields subject" in result.stdout
    assert "task_7.json: extra" in result.stdout
    verdict = json.loads(run(["replay", "--verify", "--json"]).stdout)
    assert verdict["ok"] is False and len(verdict["drift"]) == 2
    ok(["tasks"])  # the next board open repairs both
    assert ok_json(["replay", "--verify"]) == {"seq": 3, "ok": True, "drift": []}


def test_journal_check_on_a_missing_team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo(tmp_path, monkeypatch, init=False)
    assert "teamctl init" in fails(["journal", "check"])


def test_events_follow_is_woken_by_appends_and_stops_on_ctrl_c(repo: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    code = "from actors.cli.main import main; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "events", "--follow", "--json"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    try:
        seen = [json.loads(proc.stdout.readline()) for _ in range(3)]
        assert [e["seq"] for e in seen] == [1, 2, 3]
        # The existing events are out; the follower has started (or is starting) its watcher.
        # An append from another process must reach it without any sleep-poll.
        ok(["task", "add", "c"])
        got = _readline_within(proc, 20.0)
        assert json.loads(got)["data"]["subject"] == "c"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err


def _readline_within(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    box: list[bytes] = []
    done = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        box.append(proc.stdout.readline())
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(timeout), "follower printed nothing"
    return box[0]
