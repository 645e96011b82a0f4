"""A small scripted team for the crash suites, run through the real ``teamctl`` in subprocesses.

``seed_team`` prepares a repository whose every input is durable before any process starts:
the lead's prompt waits in its inbox (so ``teamctl resume --headless`` runs the whole team, and a
crash can never lose an unacknowledged prompt), and a one-shot cron job is already due (its
``cron.scheduled`` is back-dated), so the scheduler fires it at start. The lead files a backlog of
five tasks with dependencies, binds a worktree to one, and spawns two teammates that claim and
complete tasks. Every named crash point is on that path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from actors.factory import init_team, open_team
from actors.jobs.scheduler import schedule_cron
from mailboxes.events import Event
from mailboxes.journal.store import FileJournal
from mailboxes.messages import MessageDraft
from teamctl_base.clock import SystemClock, UuidIds
from tests.support.oracle import check_repository, journal_events

TEAMCTL = str(Path(sys.executable).parent / "teamctl")
PROMPT = "Build the backlog"
SUBJECTS = ("one", "two", "three", "four", "five")
REMINDER = "Write the status note"


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "input": args}


UNKNOWN = "its outcome is unknown"  # the result a resumed agent gets for a call cut short
_BACKLOG = [
    {"name": "create_task", "input": {"subject": "one"}},
    {"name": "create_task", "input": {"subject": "two"}},
    {"name": "create_task", "input": {"subject": "three"}},
    {"name": "create_task", "input": {"subject": "four", "blocked_by": ["task_1"]}},
    {"name": "create_task", "input": {"subject": "five", "blocked_by": ["task_2", "task_4"]}},
    {"name": "create_worktree", "input": {"name": "wt1", "task_id": "task_3"}},
]
_SPAWN = [
    {"name": "spawn_teammate", "input": {"name": name, "prompt": "Work."}} for name in ("w1", "w2")
]


def _recovery_rules() -> list[dict[str, Any]]:
    """After a crash cut the lead's batch short, it lists the board and the team: these rules
    redo what is missing (the batch runs in order, so what exists is a prefix of it)."""
    has = '(?=.*"subject": "{}")'.format
    lacks = '(?!.*"subject": "{}")'.format
    rules = []
    for k, subject in enumerate(SUBJECTS):
        match = "(?s)^" + has(SUBJECTS[k - 1]) + lacks(subject) if k else "No tasks\\."
        rest = _BACKLOG[k : len(SUBJECTS)]
        rules.append(
            {"match": match, "priority": 2, "text": "Redoing.", "tool_uses": rest + _SPAWN}
        )
    rules.append({"match": "No teammates yet\\.", "priority": 1, "tool_uses": _SPAWN})
    alone = '(?s)^(?=.*"name": "w1")(?!.*"name": "w2")'
    rules.append({"match": alone, "priority": 1, "tool_uses": _SPAWN[1:]})
    return rules


_LEAD: dict[str, Any] = {
    "rules": [
        {"match": PROMPT, "priority": 3, "text": "Splitting.", "tool_uses": _BACKLOG + _SPAWN},
        # After a crash a real model would verify; this one checks the board and the team.
        {
            "match": UNKNOWN,
            "priority": 3,
            "tool_uses": [_call("list_tasks", status="all"), _call("list_teammates")],
        },
        *_recovery_rules(),
        {"match": REMINDER, "text": "Reminder noted."},
        {"match": "(?s).", "text": "Noted.", "priority": -1},
        {"match": "^$", "text": "Noted.", "priority": -2},
    ]
}


def _teammate(name: str) -> dict[str, Any]:
    complete = [{"name": "complete_task", "input": {"task_id": "{id}", "summary": "did {id}"}}]
    mine = rf'"id": "(?P<id>task_\d+)",\s+"subject": "[^"]*",\s+"status": "in_progress",\s+"owner": "{name}"'
    return {
        "rules": [
            {
                "match": r"You now hold task (?P<id>task_\d+) \(claim",
                "priority": 2,
                "tool_uses": complete,
            },
            {"match": mine, "priority": 1, "tool_uses": complete},
            {
                "match": UNKNOWN,
                "priority": 1,
                "tool_uses": [_call("list_tasks", status="in_progress")],
            },
            {"match": r"Completed (?P<id>task_\d+)", "text": "Finished {id}."},
            {"match": "(?s).", "text": "OK.", "priority": -1},
            {"match": "^$", "text": "OK.", "priority": -2},
        ]
    }


SCRIPT: dict[str, Any] = {"agents": {"lead": _LEAD, "w1": _teammate("w1"), "w2": _teammate("w2")}}


class _Earlier(SystemClock):
    """The real clock with its wall time ``offset_s`` behind (to back-date a
    ``cron.scheduled``)."""

    def __init__(self, offset_s: float) -> None:
        self.offset_s = offset_s

    def now(self) -> float:
        return super().now() - self.offset_s


def seed_team(tmp_path: Path, script: dict[str, Any] = SCRIPT) -> tuple[Path, Path]:
    """A git repository with a team, a due one-shot cron job and the prompt in the lead's
    inbox; returns ``(root, script file)``."""
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README.md").write_text("base\n")
    subprocess.run([*git, "add", "README.md"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=root, check=True)
    init_team(root)
    journal = FileJournal(root / ".team", _Earlier(180.0))
    try:
        schedule_cron(journal, UuidIds(), cron="* * * * *", prompt=REMINDER, recurring=False)
    finally:
        journal.close()
    with open_team(root) as team:
        team.mailbox.ensure_inbox("lead")
        team.mailbox.deliver("user", MessageDraft(to="lead", type="message", body={"text": PROMPT}))
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(script), encoding="utf-8")
    return root, path


def start(root: Path, script: Path, *, crash_at: str | None = None) -> subprocess.Popen[str]:
    """``teamctl resume --headless`` in ``root`` with the scripted model (and a crash point)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}
    env["TEAMCTL_SCRIPT"] = str(script)
    if crash_at is not None:
        env["TEAMCTL_CRASH_AT"] = crash_at
    return subprocess.Popen(
        [TEAMCTL, "resume", "--headless", "--timeout", "120"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@contextmanager
def running(root: Path, script: Path, *, crash_at: str | None = None) -> Iterator[Any]:
    """``start`` whose process is killed and reaped however the block ends."""
    proc = start(root, script, crash_at=crash_at)
    try:
        yield proc
    finally:
        _kill_group(proc.pid)
        proc.communicate(timeout=60)
        _kill_group(proc.pid)


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid`` (the run and anything it forked: a ``git`` child
    outlives its killed parent for a moment) and wait until none of it runs."""
    done = threading.Event()
    for _ in range(500):
        members = _group(pgid)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        done.wait(0.01)
    raise AssertionError(f"process group {pgid} does not die: {_group(pgid)}")


def _group(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def run_to_completion(root: Path, script: Path) -> str:
    """Resume until the team is idle; returns stdout (fails with stderr otherwise)."""
    with running(root, script) as proc:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"resume exited {proc.returncode}:\n{err[-4000:]}"
    assert "team idle" in out, out
    return str(out)


def events(root: Path) -> list[Event]:
    return journal_events(root / ".team" / "journal.jsonl")[0]


def after_crash(root: Path, pids: list[int]) -> list[str]:
    """The oracle right after a SIGKILL: a torn journal tail and stale projections are
    allowed (both are repaired at the next open); the rest must already hold."""
    return check_repository(root, pids=pids, projections=False, allow_torn_tail=True)


def final_violations(root: Path, pids: list[int]) -> list[str]:
    """The full oracle plus the board: every task completed exactly once, nothing twice."""
    out = check_repository(root, pids=pids, require_live_owners=True)
    evs = events(root)
    created = [str(e.data["subject"]) for e in evs if e.type == "task.created"]
    if sorted(created) != sorted(SUBJECTS):
        out.append(f"board: tasks created {created}, expected {list(SUBJECTS)} once each")
    done = [str(e.data["task_id"]) for e in evs if e.type == "task.completed"]
    if sorted(done) != sorted(set(done)) or len(done) != len(SUBJECTS):
        out.append(f"board: completions {done}")
    fired = [e for e in evs if e.type == "cron.fired"]
    if len(fired) != 1:
        out.append(f"cron: fired {len(fired)} times")
    with open_team(root) as team:
        state = team.state()
        if any(t.status != "completed" for t in state.tasks.values()):
            out.append(f"board: {[(t.id, t.status, t.owner) for t in state.tasks.values()]}")
        for agent in team.mailbox.agents():
            if team.mailbox.counts(agent)[0]:
                out.append(f"mail: {agent} has unread messages after the run")
    cur = root / ".team" / "mailboxes" / "lead" / "cur"
    reminders = {n.rsplit(".", 1)[-1] for n in os.listdir(cur) if REMINDER in (cur / n).read_text()}
    if len(reminders) != 1:  # redelivered copies share the id: one message
        out.append(f"cron: {len(reminders)} reminder messages reached the lead")
    return out
