"""The live view's renderer: what a person sees, rendered to text."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from actors.live.snapshot import MemberRow, TaskRow
from actors.live.view import LiveSource, Snapshot, render
from tests.actors.live.live_support import new_team, populate


def _text(snap: Snapshot, **kwargs: int) -> str:
    console = Console(record=True, width=120, color_system=None, file=io.StringIO())
    console.print(render(snap, **kwargs))
    return console.export_text()


def test_busy_team_shows_members_tasks_inboxes_jobs_crons_worktrees(tmp_path: Path) -> None:
    from actors.jobs.scheduler import schedule_cron
    from teamctl_base.clock import UuidIds

    team = new_team(tmp_path)
    try:
        populate(team)
        cron_id = schedule_cron(team.journal, UuidIds(), cron="0 9 * * *", prompt="standup")
        text = _text(LiveSource(team).load())
        seq = team.journal.last_seq()
    finally:
        team.close()
    lines = text.splitlines()
    assert lines[0].startswith(f"team demo  journal seq {seq}")
    assert "in progress 2, ready 1, blocked 1, completed 1" in lines[0]

    def line_of(*words: str) -> str:
        found = [line for line in lines if all(w in line for w in words)]
        assert len(found) == 1, (words, text)
        return found[0]

    assert "wt-api" in line_of("alice", "working", "task_2 api")
    assert "(no process)" in line_of("bob", "waiting_permission")
    assert "(human)" in line_of("carol", "active", "task_3 docs")
    line_of("dave", "crashed")
    assert "task_2" in line_of("blocked", "task_4", "cleanup")
    line_of("ready", "task_5", "release notes")
    line_of("completed", "task_1", "schema", "alice")
    assert "carol (human)" in line_of("in progress", "task_3")
    assert "lead 2" in line_of("inboxes (unread):") and "alice 1" in line_of("inboxes (unread):")
    assert "running" in line_of("job_run", "pytest -q")
    assert "exited" in line_of("job_old", "make")
    assert "standup" in line_of(cron_id, "0 9 * * *")
    assert "no" in line_of("wt-api", "wt/wt-api", "task_2 (in_progress, alice)")
    assert "yes abcdef01" in line_of("wt-old", "wt/wt-old")
    line_of("permission", "perm-1", "bob", "bash")


def _task(n: int) -> TaskRow:
    return TaskRow(
        id=f"task_{n}",
        subject=f"subject {n}",
        status="completed",
        column="completed",
        owner="ann",
        human=False,
        blocked_by=(),
        waiting_on=(),
        blocks=(),
        worktree=None,
        plan="none",
        epoch=1,
    )


def test_empty_sections_say_so_and_long_completed_lists_are_cut() -> None:
    assert "members: none yet" in _text(Snapshot(team="t", seq=1))
    assert "tasks: none yet" in _text(Snapshot(team="t", seq=1))
    text = _text(
        Snapshot(team="t", seq=3, tasks=tuple(_task(n) for n in range(1, 8))), max_completed=2
    )
    assert "task_7" in text and "task_6" in text and "task_5 " not in text
    assert "and 5 earlier" in text
    ready = tuple(replace(_task(n), status="pending", column="ready") for n in range(1, 30))
    text = _text(Snapshot(team="t", seq=3, tasks=ready), max_rows=3)
    assert "task_3 " in text and "task_4 " not in text and "and 26 more" in text
    for empty in ("jobs: none", "cron: none", "worktrees: none", "inboxes (unread): none"):
        assert empty in text


def test_a_dead_teammate_stands_out() -> None:
    ghost = MemberRow("ghost", "agent", "dev", "idle", "", False, None, None, None, 0)
    gone = MemberRow("gone", "agent", "dev", "stopped", "shutdown", False, None, None, None, 0)
    text = _text(Snapshot(team="t", seq=1, members=(ghost, gone)))
    assert "idle (no process)" in text
    assert "stopped: shutdown" in text and "stopped (no process)" not in text
