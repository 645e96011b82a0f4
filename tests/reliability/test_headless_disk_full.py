"""A headless run on a full disk stops with its exit code (issue 12 item 9).

The real ``teamctl run --headless`` in-process (click's runner), with a scripted lead and teammate.
Its runtime's journal, Maildir and recovery probe fsync through one switch that starts failing
with ``ENOSPC`` once ``w1`` has claimed ``task_1`` (read from the run's own events), so the team
goes degraded. The probe and the grace (``team.disk_full_grace_s``) run on a virtual timer that a
helper thread advances by 30 s once the runtime has scheduled its first probe: no real waiting.
The run must end with exit code 5, one ``error: disk full: …`` line and a stream-json ``result``
``error_disk_full``, leaving every member resumable; with space back, nothing is lost and
``teamctl resume --headless`` finishes the task.
"""

from __future__ import annotations

import heapq
import itertools
import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.runtime import TeamRuntime
from mailboxes.liveness import FlockLiveness
from mailboxes.maildir import Maildir
from mailboxes.messages import MessageDraft
from tests.actors.cli.cli_support import git_repo, run
from tests.reliability.test_runtime_degraded import DiskSwitch
from tests.support.oracle import assert_nothing_lost

_NOTED = [
    {"match": "(?s).", "text": "Noted.", "priority": -1},
    {"match": "^$", "text": "Noted.", "priority": -2},
]
SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "rules": [
                {
                    "match": "^Start",
                    "tool_uses": [
                        {"name": "create_task", "input": {"subject": "one"}},
                        {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "Work."}},
                    ],
                },
                *_NOTED,
            ]
        },
        "w1": {
            "rules": [
                {
                    "match": r"You now hold task task_1 \(claim",
                    "text": "Waiting for a go.",  # first run; the resume's script completes it
                },
                {"match": "(?s).", "text": "Waiting.", "priority": -1},
                {"match": "^$", "text": "Waiting.", "priority": -2},
            ]
        },
    }
}
RESUME: dict[str, Any] = {
    "agents": {
        "lead": {"rules": _NOTED},
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
                {"match": "(?s).", "text": "Finished.", "priority": -1},
                {"match": "^$", "text": "Finished.", "priority": -2},
            ]
        },
    }
}


HEADLESS = ("--headless", "--output-format", "stream-json", "--script")


class VirtualTimer:
    """A ``Timer`` on a virtual clock: ``advance`` runs what falls due, in time order."""

    def __init__(self) -> None:
        self.now = 0.0
        self.delays: list[float] = []
        self.scheduled = threading.Event()
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def __call__(self, delay_s: float, callback: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            self.delays.append(delay_s)
            heapq.heappush(self._due, (self.now + delay_s, next(self._seq), callback))
        self.scheduled.set()
        return lambda: None

    def advance(self, seconds: float) -> None:
        until = self.now + seconds
        while True:
            with self._lock:
                if not self._due or self._due[0][0] > until:
                    self.now = until
                    return
                self.now, _, callback = heapq.heappop(self._due)
            callback()


def _write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_headless_run_on_a_full_disk_stops_paused_with_exit_code_5_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    settings_path = root / ".team" / "settings.json"
    settings = json.loads(settings_path.read_text())
    team = settings.setdefault("team", {})
    team.update(task_reminders=None, disk_full_grace_s=30)  # w1 keeps task_1 while it waits
    _write_json(settings_path, settings)
    disk, timer = DiskSwitch(), VirtualTimer()

    def fill_disk_once_w1_waits(event: Mapping[str, Any]) -> None:
        if event.get("agent") == "w1" and event.get("text") == "Waiting for a go.":
            disk.full = True  # w1's turn is still running: its next write fails

    class OnAFullDisk(TeamRuntime):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            shown = kwargs["on_event"]

            def on_event(event: Mapping[str, Any]) -> None:
                fill_disk_once_w1_waits(event)
                shown(event)

            kwargs.update(on_event=on_event, fsync=disk, disk_timer=timer)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr("actors.runtime.runtime.TeamRuntime", OnAFullDisk)

    def drive() -> None:  # once degraded (the first probe scheduled), 30 virtual seconds pass
        if timer.scheduled.wait(timeout=60):
            timer.advance(30.0)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    script = _write_json(tmp_path / "first.json", SCRIPT)
    first = run(["run", *HEADLESS, str(script), "--timeout", "60", "Start"])
    driver.join(timeout=10)
    events = _lines(first.stdout)
    assert first.exit_code == 5, (first.exit_code, first.stdout, first.stderr, first.exception)
    [degraded] = [e for e in events if e["type"] == "degraded"]
    assert "No space left" in degraded["reason"]
    result = events[-1]
    assert result["type"] == "result" and result["subtype"] == "error_disk_full"
    assert result["is_error"] is True and result["exit_code"] == 5
    assert result["disk_full"] == degraded["reason"]
    errors = [line for line in first.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {degraded['reason']} — the team is paused; free space and run `teamctl resume`"
    ]
    # probes at 1, 3, 8, … failed; the grace (30 s) gave up while the disk was still full
    assert timer.delays.count(30.0) == 1
    assert [d for d in timer.delays if d != 30.0][:4] == [1.0, 2.0, 5.0, 5.0]
    assert disk.refused >= 2

    # Space returns. Nothing acknowledged was lost, nobody holds a lease, no empty file is left,
    # and w1 still holds task_1 at its epoch: nothing was released, nobody was stopped.
    disk.full = False
    assert_nothing_lost(root, check_processes=False)
    assert FlockLiveness(root / ".team" / "members").alive() == []
    empty = [
        p
        for p in (root / ".team").rglob("*")
        if p.is_file() and p.stat().st_size == 0 and p.suffix != ".lock"
    ]
    assert empty == []
    journal = [json.loads(line) for line in (root / ".team" / "journal.jsonl").open()]
    types = [e["type"] for e in journal]
    assert "task.released" not in types and "member.stopped" not in types
    claims = [e for e in journal if e["type"] == "task.claimed"]
    assert [(c["data"]["task_id"], c["data"]["owner"]) for c in claims] == [("task_1", "w1")]

    # A message for w1 arrives (another process); teamctl resume brings w1 back on task_1 with
    # its mail, and it completes the task.
    Maildir(root / ".team" / "mailboxes").deliver(
        "lead",
        MessageDraft.model_validate({"to": "w1", "type": "message", "body": {"text": "go ahead"}}),
    )
    script = _write_json(tmp_path / "resume.json", RESUME)
    second = run(["resume", *HEADLESS, str(script), "--timeout", "120"])
    assert second.exit_code == 0, (second.stdout, second.stderr, second.exception)
    events = _lines(second.stdout)
    [resumed] = [e for e in events if e["type"] == "resumed"]
    back = {m["name"]: (m["task_id"], m["unread"]) for m in resumed["members"]}
    assert back == {"lead": (None, 0), "w1": ("task_1", 1)}
    assert events[-1]["subtype"] == "success" and events[-1]["tasks"] == {"completed": 1}
    journal = [json.loads(line) for line in (root / ".team" / "journal.jsonl").open()]
    claims = [e for e in journal if e["type"] == "task.claimed"]
    done = [e for e in journal if e["type"] == "task.completed"]
    assert len(claims) == 1 and len(done) == 1
    assert done[0]["data"]["summary"] == "done after the disk"
    assert_nothing_lost(root, check_processes=False)


def test_the_grace_expires_only_while_still_full_and_only_for_its_own_episode() -> None:
    from actors.runtime.supervision import DiskWatch

    timer, seen, full = VirtualTimer(), [], [True]

    def probe() -> None:
        if full[0]:
            raise OSError(28, "No space left on device")

    watch = DiskWatch(
        probe=probe,
        timer=timer,
        on_enter=lambda r: seen.append(f"enter {r}"),
        on_recover=lambda: seen.append("recover"),
        grace_s=30.0,
        on_expire=lambda r: seen.append(f"expire {r}"),
    )
    assert watch.enter("first")
    timer.advance(10.0)
    full[0] = False
    timer.advance(5.0)  # the probe at 13 s finds space: the first grace must not fire
    assert seen == ["enter first", "recover"]
    full[0] = True
    assert watch.enter("second")  # at 15 s: its own grace ends at 45 s
    timer.advance(29.0)
    assert seen == ["enter first", "recover", "enter second"]
    timer.advance(1.0)
    assert seen == ["enter first", "recover", "enter second", "expire second"]
    watch.close()
    timer.advance(60.0)
    assert seen[-1] == "expire second"
