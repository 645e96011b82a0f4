"""Damage you can survive (issue 12 item 9, docs/RELIABILITY.md): a missing journal is an
error, never a new team; ``teamctl journal salvage`` keeps the events before a corrupt line;
on a full disk read-only commands work and writes fail in one line, leaving no empty files;
``teamctl ask`` in a repository without ``init`` leaves nothing git would pick up."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from actors.cli.ask import ask_command
from actors.factory import open_team
from actors.repo import JournalMissing
from actors.runtime.process import take_runtime_lock
from actors.runtime.runtime import TeamRuntime
from harness.model.fakeapi import FakeMessagesServer
from harness.model.scripted import ScriptedModel
from mailboxes.journal.frame import check_journal
from mailboxes.liveness import FlockLiveness
from mailboxes.maildir import Maildir, MessageDraft
from tests.actors.cli.cli_support import fails, git_repo, ok, ok_json, run
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo
from tests.support.fakes import FakeClock
from tests.support.oracle import assert_nothing_lost

__all__ = ["stop_actors"]  # a fixture

TEAMCTL = str(Path(sys.executable).parent / "teamctl")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = git_repo(tmp_path, monkeypatch)
    for subject in ("a", "b", "c", "d"):
        ok(["task", "add", subject])
    return root


def journal(root: Path) -> Path:
    return root / ".team" / "journal.jsonl"


def corrupt_line(root: Path, n: int) -> bytes:
    """Flip a byte of line ``n`` (1-based); returns the damaged file's bytes."""
    lines = journal(root).read_bytes().splitlines(keepends=True)
    lines[n - 1] = lines[n - 1].replace(b'"subject":"', b'"subject":"X', 1)
    data = b"".join(lines)
    journal(root).write_bytes(data)
    return data


# --- a missing journal ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["tasks"],
        ["task", "add", "e"],
        ["task", "show", "task_1"],
        ["events"],
        ["inbox", "lead"],
        ["send", "lead", "hi"],
        ["journal", "check"],
        ["journal", "salvage"],
        ["run", "--headless", "go"],
    ],
)
def test_a_missing_journal_is_an_error_naming_it_never_a_new_team(
    repo: Path, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "unused")  # `run` checks for a key first
    journal(repo).unlink()
    line = fails(args)
    assert line.startswith("error: the team journal ") and str(journal(repo)) in line
    assert "missing" in line
    assert not journal(repo).exists()  # nothing started a new team


def test_only_init_makes_a_new_journal_and_an_empty_one_is_no_team(repo: Path) -> None:
    journal(repo).unlink()
    with pytest.raises(JournalMissing):
        open_team(repo)
    journal(repo).write_bytes(b"")  # what a failed first write could leave
    assert "is empty: run `teamctl init`" in fails(["status"])
    assert "is empty" in fails(["task", "add", "e"])
    ok(["init"])
    assert ok_json(["status"])["team"] == "repo"


# --- salvage ---------------------------------------------------------------------------------------


def test_salvage_keeps_the_events_before_the_bad_line_and_a_backup(repo: Path) -> None:
    ok(["task", "claim", "task_1", "--as", "ann"])  # seq 6 (member) and 7 (claim)
    damaged = corrupt_line(repo, 3)  # task_2's line; lines 4..7 follow
    assert "corrupt at line 3" in fails(["task", "add", "e"])

    result = ok(["journal", "salvage"])
    backups = sorted((repo / ".team").glob("journal-damaged-*.jsonl"))
    assert len(backups) == 1 and backups[0].read_bytes() == damaged  # the original, whole
    out = result.stdout
    assert "kept events 1-2" in out
    assert "dropped 5 line(s) from line 3 (seq 3-7" in out and "4 intact events" in out
    assert str(backups[0]) in out

    report = check_journal(journal(repo))
    assert report.ok and report.last_seq == 3
    events = [json.loads(e) for e in ok(["events", "--json"]).stdout.splitlines()]
    assert [e["type"] for e in events] == ["team.created", "task.created", "journal.tail_repaired"]
    assert events[-1]["data"]["line_no"] == 3
    assert [t["id"] for t in ok_json(["tasks"])] == ["task_1"]
    assert sorted(p.name for p in (repo / ".tasks").glob("*.json")) == ["task_1.json"]
    assert ok_json(["replay", "--verify"])["ok"] is True  # projections rebuilt
    assert ok(["task", "add", "e"]).stdout.startswith("added task_2: e")
    assert "nothing to salvage" in ok(["journal", "salvage"]).stdout
    assert len(list((repo / ".team").glob("journal-damaged-*.jsonl"))) == 1
    assert_nothing_lost(repo, pids=())


def test_salvage_json_and_the_repair_alias(repo: Path) -> None:
    corrupt_line(repo, 2)
    report = ok_json(["journal", "repair"])
    assert report["salvaged"] is True and report["kept"] == 1
    assert report["problem_line"] == 2 and report["dropped_lines"] == 4
    assert report["dropped_seqs"] == [2, 5] and report["dropped_intact"] == 3
    assert Path(report["backup"]).name.startswith("journal-damaged-")


def test_salvage_is_refused_while_a_runtime_or_a_joined_member_runs_the_team(repo: Path) -> None:
    data = corrupt_line(repo, 2)
    release = take_runtime_lock(repo / ".team" / "runtime.lock")
    try:
        line = fails(["journal", "salvage"])
        assert f"runtime (pid {os.getpid()}) is running this team" in line
    finally:
        release()
    with FlockLiveness(repo / ".team" / "members").hold("alice"):
        assert "hosted by live processes (alice)" in fails(["journal", "salvage"])
    assert journal(repo).read_bytes() == data
    assert not list((repo / ".team").glob("journal-damaged-*"))
    ok(["journal", "salvage"])


# --- a full disk -----------------------------------------------------------------------------------


def _limit_writes(limit: int) -> Any:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _files(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_size
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def test_on_a_full_disk_reads_work_writes_fail_in_one_line_and_no_empty_file_is_left(
    repo: Path,
) -> None:
    """``RLIMIT_FSIZE`` of 1 byte: every write that grows a file fails (EFBIG), as on a full
    disk. The team needs repairs that write (a torn last line, a hand-edited projection)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}

    def teamctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TEAMCTL, *args],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_limit_writes(1),
        )

    ok(["send", "lead", "hello"])
    with journal(repo).open("ab") as f:
        f.write(b'{"actor":"cli","data":{"task_id":"task_5"')  # a writer died mid-line
    task_file = repo / ".tasks" / "task_1.json"
    task_file.write_text(task_file.read_text().replace('"subject": "a"', '"subject": "A"'))
    before = _files(repo)

    for args in (["status"], ["tasks"], ["task", "show", "task_1"], ["events"], ["inbox", "lead"]):
        done = teamctl(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr and "Errno" not in done.stderr
    assert "task_4" in teamctl("tasks").stdout and "hello" in teamctl("inbox", "lead").stdout
    assert '"subject": "a"' in teamctl("task", "show", "task_1", "--json").stdout

    for args in (["task", "add", "e"], ["task", "claim", "task_1", "--as", "ann"]):
        done = teamctl(*args)
        assert done.returncode == 1, (args, done.stdout)
        assert done.stderr.splitlines()[-1].startswith("error: ")
        assert "File too large" in done.stderr.splitlines()[-1]
        assert "Traceback" not in done.stderr
    sent = teamctl("send", "lead", "more")
    assert sent.returncode == 1
    assert sent.stderr.splitlines() == [
        "error: delivering to 'lead' failed: File too large; nothing was written (rolled back)"
    ]

    after = _files(repo)
    new = set(after) - set(before)
    assert not new, new  # no tmp file, no projection, no message left behind
    empty = [p for p, size in after.items() if size == 0 and not p.endswith((".lock", ".gate"))]
    assert not empty, empty
    # Space returns: the next command repairs the tail and the view, and writes.
    assert ok(["task", "add", "e"]).stdout.startswith("added task_5: e")
    assert ok_json(["replay", "--verify"])["ok"] is True


def test_init_on_a_full_disk_leaves_no_empty_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch, init=False)
    done = subprocess.run(
        [TEAMCTL, "init"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_writes(1),
    )
    assert done.returncode == 1 and done.stderr.startswith("error: ")
    assert not journal(root).exists()
    assert [p for p, size in _files(root).items() if size == 0] == []
    ok(["init"])  # space returns
    assert ok_json(["status"])["seq"] == 1


# --- ask without init ------------------------------------------------------------------------------


def test_ask_in_a_repository_without_init_leaves_nothing_for_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch, init=False)
    (root / "README").write_text("hello\n")
    subprocess.run(["git", "-C", str(root), "add", "README"], check=True)
    script = {"agents": {"ask": {"steps": [{"text": "It says hello."}]}}}
    with FakeMessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        result = CliRunner().invoke(ask_command, ["what does README say?"])
    assert result.exit_code == 0, result.output
    assert (root / ".team" / "transcripts" / "ask.jsonl").exists()
    status = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status.splitlines() == ["A  README"]
    assert ".team/" in (root / ".git" / "info" / "exclude").read_text()
    assert run(["status"]).exit_code == 1  # still no team: `ask` did not make one


# --- mailbox housekeeping at runtime start ----------------------------------------------------------


def test_a_runtime_start_removes_orphaned_tmp_files_and_prunes_old_acked_mail(
    tmp_path: Path, stop_actors: list[TeamRuntime]
) -> None:
    """``Maildir.recover`` and ``Maildir.prune`` run when a runtime opens the team (issue 12
    item 12): ``mailbox.cur_retention_days`` (here 2 days) bounds ``cur/``; ``new/`` and a
    ``tmp/`` file a live sender may still be writing (younger than a minute) are kept."""
    root = team_repo(tmp_path)
    settings_path = root / ".team" / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["mailbox"] = {"cur_retention_days": 2}
    settings_path.write_text(json.dumps(settings))
    boxes = root / ".team" / "mailboxes"
    now = time.time()
    for age_days, text in ((3, "old"), (1, "recent")):
        sender = Maildir(boxes, clock=FakeClock(now - age_days * 86_400))
        sent = sender.deliver("user", MessageDraft.text("lead", text))
        sender.ack("lead", [sent[0].id])
    unread = Maildir(boxes, clock=FakeClock(now - 5 * 86_400))
    unread.deliver("user", MessageDraft.text("lead", "unread, old"))
    orphan = boxes / "lead" / "tmp" / "orphan"
    orphan.write_bytes(b"")  # a sender died before writing
    os.utime(orphan, (now - 120, now - 120))
    in_flight = boxes / "lead" / "tmp" / "in-flight"
    in_flight.write_bytes(b"{")
    assert Maildir(boxes).counts("lead") == (1, 2)

    rt = runtime(root, ScriptedModel({"agents": {"*": {"rules": []}}}), idle_timer=None)
    stop_actors.append(rt)
    rt.start()
    box = Maildir(boxes)
    assert sorted(os.listdir(boxes / "lead" / "tmp")) == ["in-flight"]
    cur = os.listdir(boxes / "lead" / "cur")
    assert len(cur) == 1
    assert json.loads((boxes / "lead" / "cur" / cur[0]).read_text())["body"]["text"] == "recent"
    assert box.counts("lead")[0] == 1  # unread mail is never pruned
