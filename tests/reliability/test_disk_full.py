"""Disk full, simulated with ``RLIMIT_FSIZE`` in a child process (SIGXFSZ ignored, so a write
that reaches the limit is cut short and the next one fails with EFBIG).

A journal append that does not fit is rolled back to the last good line and refused with one
clear ``WriteFailed`` (nothing acknowledged, no torn line left); a Maildir delivery that does not
fit leaves nothing in ``tmp/`` or ``new/``. When the limit is lifted (a new process) the same
store opens cleanly and takes the write.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors.board.board import Board
from actors.board.projections import Projections
from mailboxes import events as ev
from mailboxes.journal.frame import check_journal
from mailboxes.journal.store import FileJournal
from mailboxes.maildir import Maildir, MessageDraft
from tests.actors.runtime.runtime_support import team_repo
from tests.support.oracle import assert_nothing_lost

TEAMCTL = str(Path(sys.executable).parent / "teamctl")
BIG = "x" * 65_536

LIMITED = r"""
import json, os, resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from actors.board.board import Board
from actors.board.projections import Projections
from mailboxes import events as ev
from mailboxes.errors import WriteFailed
from mailboxes.journal.store import FileJournal
from mailboxes.maildir import Maildir, MessageDraft

def created(tid, text, op_id):
    body = ev.TaskCreated(task_id=tid, subject=tid, description=text)
    return ev.draft("task.created", "lead", body, op_id=op_id)

root, out = Path(sys.argv[1]), {}
if sys.argv[3] == "journal":
    journal = FileJournal(root)
    last = journal.last_seq()
    try:
        journal.append(lambda seen: [created("task_4", "x" * 65536, "big")], after=last)
        out["big"] = "acknowledged"
    except WriteFailed as exc:
        out["big"], out["errno"] = str(exc), exc.errno
    out["size"] = os.path.getsize(root / "journal.jsonl")
    stored = journal.append(lambda seen: [created("task_4", "", "small")], after=last)
    out["small"] = stored.appended[0].seq
else:
    box = Maildir(root)
    try:
        box.deliver("lead", MessageDraft.text("ann", "x" * 65536))
        out["big"] = "acknowledged"
    except WriteFailed as exc:
        out["big"], out["errno"] = str(exc), exc.errno
    out["left"] = {d: os.listdir(root / "ann" / d) for d in ("tmp", "new")}
    out["small"] = [e.id for e in box.deliver("lead", MessageDraft.text("ann", "small"))]
print(json.dumps(out))
"""


def run_limited(root: Path, limit: int, store: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, str(root), str(limit), store],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def created(n: int, op_id: str) -> ev.EventDraft:
    body = ev.TaskCreated(task_id=f"task_{n}", subject=f"seed {n}")
    return ev.draft("task.created", "lead", body, op_id=op_id)


def test_a_journal_append_that_does_not_fit_is_rolled_back(tmp_path: Path) -> None:
    seeds = [f"seed-{n}" for n in range(1, 4)]
    journal = FileJournal(tmp_path)
    journal.append(lambda seen: [created(n, op) for n, op in enumerate(seeds, 1)], after=0)
    size = (tmp_path / "journal.jsonl").stat().st_size

    # Room for the small event but not the big one: the big write is cut short, then EFBIG.
    out = run_limited(tmp_path, size + 600, "journal")
    assert out["errno"] == errno.EFBIG
    assert out["big"] == (
        f"appending to {tmp_path / 'journal.jsonl'} failed: File too large; "
        "nothing was written (rolled back)"
    )
    assert out["size"] == size  # the partial line is gone, not left for a repair
    assert out["small"] == 4  # the same journal keeps working for what fits

    report = check_journal(tmp_path / "journal.jsonl")
    assert report.ok and report.last_seq == 4
    # Space returns (a process without the limit): the journal opens cleanly and appends.
    reopened = FileJournal(tmp_path)
    big = ev.TaskCreated(task_id="task_5", subject="big", description=BIG)
    reopened.append(lambda seen: [ev.draft("task.created", "lead", big, op_id="big")], after=4)
    assert [e.op_id for e in reopened.read_from(1)] == [*seeds, "small", "big"]
    (tmp_path / ".team").mkdir()
    os.replace(tmp_path / "journal.jsonl", tmp_path / ".team" / "journal.jsonl")
    assert_nothing_lost(
        tmp_path,
        attempted={*seeds, "small", "big"},
        acked={*seeds, "small", "big"},
        projections=False,
        pids=(),  # the limited child was waited for; stray ones are found by their folder
    )


def test_a_delivery_that_does_not_fit_leaves_no_partial_message(tmp_path: Path) -> None:
    root = tmp_path / ".team" / "mailboxes"
    box = Maildir(root)
    for agent in ("lead", "ann"):
        box.ensure_inbox(agent)
    out = run_limited(root, 8192, "maildir")
    assert out["errno"] == errno.EFBIG
    assert (
        out["big"]
        == "delivering to 'ann' failed: File too large; nothing was written (rolled back)"
    )
    assert out["left"] == {"tmp": [], "new": []}
    assert [m.id for m in box.pending("ann")] == out["small"]
    # Without the limit the same message goes through.
    sent = box.deliver("lead", MessageDraft.text("ann", BIG))
    assert [m.id for m in box.pending("ann")] == [*out["small"], sent[0].id]
    assert_nothing_lost(tmp_path, delivered={*out["small"], sent[0].id}, projections=False, pids=())


def _limit_writes(limit: int) -> Any:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_the_cli_says_it_in_one_line_and_works_again_when_space_returns(tmp_path: Path) -> None:
    root = team_repo(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}

    def teamctl(*args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TEAMCTL, *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=None if limit is None else _limit_writes(limit),
        )

    for n in range(8):  # a journal larger than any projection file, so only it hits the limit
        assert teamctl("task", "add", f"seed {n}").returncode == 0
    journal = root / ".team" / "journal.jsonl"
    before = journal.read_bytes()
    full = teamctl("task", "add", "big", "-d", BIG, limit=len(before) + 100)
    assert full.returncode == 1
    assert full.stderr.splitlines() == [
        f"error: appending to {journal} failed: File too large; nothing was written (rolled back)"
    ]
    assert journal.read_bytes() == before
    again = teamctl("task", "add", "big", "-d", BIG)
    assert again.returncode == 0 and again.stdout.startswith("added task_9: big")
    assert_nothing_lost(root, pids=())


class FailingFsync:
    """An ``Fsync`` that fails with EIO the next ``failures`` times, then syncs for real."""

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def __call__(self, fd: int) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EIO, "Input/output error")
        os.fsync(fd)


def test_a_failed_fsync_rolls_the_append_back_so_it_never_takes_effect(tmp_path: Path) -> None:
    fsync = FailingFsync(0)
    journal = FileJournal(tmp_path, fsync=fsync)
    journal.append(lambda seen: [created(1, "one")], after=0)
    size = (tmp_path / "journal.jsonl").stat().st_size
    fsync.failures = 1
    with pytest.raises(OSError) as failed:
        journal.append(lambda seen: [created(2, "two")], after=1)
    assert failed.value.errno == errno.EIO
    assert str(failed.value).endswith(
        "failed: Input/output error; nothing was written (rolled back)"
    )
    # Unacknowledged bytes must not become an event at the next catch-up (here or elsewhere).
    assert (tmp_path / "journal.jsonl").stat().st_size == size
    assert [e.op_id for e in FileJournal(tmp_path).read_from(1)] == ["one"]
    retried = journal.append(lambda seen: [created(2, "two")], after=1)
    assert [e.seq for e in retried.appended] == [2]
    assert [e.op_id for e in journal.read_from(1)] == ["one", "two"]


def test_a_failed_fsync_delivers_nothing(tmp_path: Path) -> None:
    fsync = FailingFsync(0)
    box = Maildir(tmp_path, fsync=fsync)
    for agent in ("lead", "ann"):
        box.ensure_inbox(agent)
    fsync.failures = 1
    with pytest.raises(OSError) as failed:
        box.deliver("lead", MessageDraft.text("ann", "lost?"))
    assert failed.value.errno == errno.EIO
    assert os.listdir(tmp_path / "ann" / "tmp") == [] and box.pending("ann") == []
    sent = box.deliver("lead", MessageDraft.text("ann", "again"))
    assert [m.id for m in box.pending("ann")] == [sent[0].id]


def test_a_projection_that_cannot_be_written_does_not_fail_a_committed_command(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The journal is the commit: once the append is acknowledged, a projection write that
    fails (disk full, a folder in the way) must not turn the command into an error — a caller
    told "failed" would retry, and without an ``op_id`` do it twice. It is repaired later."""
    (tmp_path / ".team").mkdir()
    board = Board(FileJournal(tmp_path / ".team"), projections=Projections(tmp_path))
    board.create("one")
    blocker = tmp_path / ".tasks" / "task_2.json"
    blocker.mkdir()
    (blocker / "in-the-way").write_text("x")  # the rename onto task_2.json fails
    with caplog.at_level(logging.WARNING, logger="actors.board.projections"):
        created_task = board.create("two")
    assert created_task.id == "task_2"
    assert [e.data["subject"] for e in FileJournal(tmp_path / ".team").read_from(1)] == [
        "one",
        "two",
    ]
    assert any("task_2.json" in r.getMessage() for r in caplog.records)
    shutil.rmtree(blocker)  # space returns: the next open repairs the view
    Board(FileJournal(tmp_path / ".team"), projections=Projections(tmp_path))
    assert_nothing_lost(tmp_path, pids=())
