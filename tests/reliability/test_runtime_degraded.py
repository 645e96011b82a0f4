"""The team runtime on a full disk (issue 8 item 6, runtime part): degraded, not crashed, and back.

A real ``TeamRuntime`` with a scripted lead and teammate; every durable write of its journal and
Maildir (and its recovery probe) goes through one fsync switch that fails with ``ENOSPC`` while
the disk is "full". The recovery probe runs on an injected timer the test fires by hand.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.supervision import DiskWatch, disk_full, probe_space
from actors.settings import Settings, TeamSettings
from harness.model.scripted import ScriptedModel
from mailboxes.errors import WriteFailed
from mailboxes.maildir import Maildir
from mailboxes.messages import MessageDraft
from tests.actors.runtime.runtime_support import Events, runtime, stop_actors, team_repo
from tests.support.oracle import assert_nothing_lost

__all__ = ["stop_actors"]

SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "steps": [
                {
                    "match": "Start",
                    "tool_uses": [
                        {"name": "create_task", "input": {"subject": "one"}},
                        {"name": "spawn_teammate", "input": {"name": "w1"}},
                    ],
                },
                "Team started.",
            ],
            "rules": [
                {"match": "idle_notification|error|w1|Status", "text": "Noted.", "priority": -1}
            ],
        },
        "w1": {
            "rules": [
                {
                    "match": "go ahead",
                    "tool_uses": [
                        {
                            "name": "complete_task",
                            "input": {"task_id": "task_1", "summary": "done after the disk"},
                        }
                    ],
                },
                {"match": r"You now hold task task_1 \(claim", "text": "Waiting for a go."},
                {"match": r"completed task_1", "text": "Finished task_1."},
            ]
        },
    }
}


class DiskSwitch:
    """The runtime's fsync: fails with ENOSPC while ``full``."""

    def __init__(self) -> None:
        self.full = False
        self.refused = 0

    def __call__(self, fd: int) -> None:
        if self.full:
            self.refused += 1
            raise OSError(errno.ENOSPC, "No space left on device")
        os.fsync(fd)


class ManualTimer:
    """A timer the test fires by hand (no waiting)."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self._pending: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def __call__(self, delay_s: float, callback: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            self.delays.append(delay_s)
            self._pending.append(callback)
        return lambda: None

    def fire(self) -> None:
        with self._lock:
            callback = self._pending.pop(0)
        callback()


def _status_events(root: Path, status: str) -> list[str]:
    from mailboxes.journal.store import FileJournal

    journal = FileJournal(root / ".team")
    try:
        return [
            str(e.data["name"])
            for e in journal.read_from(1)
            if e.type == "member.status_changed" and e.data.get("status") == status
        ]
    finally:
        journal.close()


def test_a_full_disk_degrades_the_team_and_it_recovers_losing_nothing(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    model = ScriptedModel(SCRIPT)
    events, disk, timer = Events(), DiskSwitch(), ManualTimer()
    hold = Settings(team=TeamSettings(task_reminders=None))  # w1 waits for a go, holding task_1
    rt = runtime(root, model, on_event=events, fsync=disk, disk_timer=timer, settings=hold)
    stop_actors.append(rt)
    rt.start()
    rt.submit("Start")
    assert rt.wait_idle(timeout=60)
    held = rt.board.refresh().task("task_1")
    assert held.owner == "w1" and held.status != "completed"

    # The disk fills up; a message for w1 arrives (written by another process, before). The
    # disk is full before the message lands: the watcher may wake w1 as soon as it is in new/,
    # and a turn that started on a writable disk would read (and ack) it before any write fails.
    disk.full = True
    Maildir(root / ".team" / "mailboxes").deliver(
        "lead",
        MessageDraft.model_validate({"to": "w1", "type": "message", "body": {"text": "go ahead"}}),
    )
    rt.hosting.wake("w1")
    assert rt.wait_until(lambda: bool(events.of("degraded")), timeout=30)
    [degraded] = events.of("degraded")
    assert "disk full" in degraded["reason"] and "No space left" in degraded["reason"]
    assert not rt.is_idle()
    # not a crash: no crashed status, no error, no restart, the claim kept, the mail unread
    assert not _status_events(root, "crashed")
    assert not events.of("error")
    assert rt.supervision.crashes() == []
    task = rt.board.refresh().task("task_1")
    assert (task.owner, task.epoch, task.status) == (held.owner, held.epoch, held.status)
    assert rt.mailbox.counts("w1")[0] == 1
    # user input while degraded: the first stalls the lead too (its status write fails), the
    # second reaches the stalled lead and is kept for the next incarnation
    rt.submit("Status one?")
    rt.submit("Status two?")
    assert rt.wait_until(lambda: rt.roster.held("lead") == ["Status two?"], timeout=30)
    assert not _status_events(root, "crashed") and not events.of("error")

    # Probes on the backoff timer keep failing while the disk is full.
    timer.fire()
    timer.fire()
    assert timer.delays == [1.0, 2.0, 5.0]
    assert not events.of("recovered") and rt.supervision.paused()

    # Space returns: the next probe recovers, w1 comes back and finishes its task.
    disk.full = False
    timer.fire()
    assert events.of("recovered") and not rt.supervision.paused()
    assert rt.wait_idle(timeout=60)
    task = rt.board.refresh().task("task_1")
    assert (task.status, task.owner, task.summary) == ("completed", "w1", "done after the disk")
    assert len(events.of("degraded")) == 1
    assert not _status_events(root, "crashed")
    assert rt.mailbox.counts("w1")[0] == 0
    lead_transcript = (root / ".team" / "transcripts" / "lead.jsonl").read_text()
    assert "Status one?" in lead_transcript and "Status two?" in lead_transcript
    rt.stop()
    assert disk.refused >= 3  # the failed write and the two failed probes
    assert_nothing_lost(root, check_processes=False)


def test_disk_full_finds_the_errno_through_wrappers() -> None:
    cause = OSError(errno.EDQUOT, "Disk quota exceeded")
    wrapped = WriteFailed("journal append", cause)
    assert disk_full(wrapped) is wrapped
    try:
        try:
            raise OSError(errno.EFBIG, "File too large")
        except OSError as inner:
            raise RuntimeError("while writing") from inner
    except RuntimeError as outer:
        found = disk_full(outer)
    assert found is not None and found.errno == errno.EFBIG
    assert disk_full(OSError(errno.EIO, "I/O error")) is None
    assert disk_full(ValueError("x")) is None


def test_the_probe_writes_syncs_and_leaves_nothing(tmp_path: Path) -> None:
    synced: list[int] = []
    probe_space(tmp_path, fsync=synced.append)
    assert len(synced) == 1 and list(tmp_path.iterdir()) == []

    def refuse(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError):
        probe_space(tmp_path, fsync=refuse)
    assert list(tmp_path.iterdir()) == []


def test_disk_watch_enters_once_backs_off_and_stops_probing_when_closed() -> None:
    timer, seen = ManualTimer(), []
    failing = [True]

    def probe() -> None:
        if failing[0]:
            raise OSError(errno.ENOSPC, "full")

    watch = DiskWatch(
        probe=probe,
        timer=timer,
        on_enter=lambda r: seen.append(f"enter {r}"),
        on_recover=lambda: seen.append("recover"),
    )
    assert watch.enter("disk full") and not watch.enter("again")
    for _ in range(4):
        timer.fire()
    assert timer.delays == [1.0, 2.0, 5.0, 5.0, 5.0]
    failing[0] = False
    timer.fire()
    assert seen == ["enter disk full", "recover"] and not watch.active
    assert watch.enter("full again")
    watch.close()
    timer.fire()  # a probe that fires after close does nothing
    assert seen == ["enter disk full", "recover", "enter full again"]


def test_the_console_shows_degraded_and_recovered() -> None:
    from actors.cli.run import _text_line

    line = _text_line({"type": "degraded", "reason": "disk full: No space left on device"})
    assert line is not None and "degraded" in line and "No space left" in line
    assert "recovered" in (_text_line({"type": "recovered"}) or "")
