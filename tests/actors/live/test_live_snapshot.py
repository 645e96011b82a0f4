"""The live view's snapshot: built from a real team folder, and as a pure function."""

from __future__ import annotations

import io
import json
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from actors.board.fold import fold_all
from actors.board.state import EMPTY
from actors.factory import Team
from actors.jobs.cron import CronView
from actors.jobs.scheduler import schedule_cron
from actors.jobs.table import JobView
from actors.live.snapshot import RECENT_JOBS
from actors.live.view import (
    LiveSource,
    Snapshot,
    build_snapshot,
    fold_permissions,
    load_snapshot,
    render,
)
from mailboxes.events import Event, JobStarted, MemberStatusChanged
from mailboxes.messages import MessageDraft
from teamctl_base.clock import UuidIds
from tests.actors.live.live_support import journal, new_team, populate


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    team = new_team(tmp_path)
    try:
        yield team
    finally:
        team.close()


def _snapshot(team: Team) -> Snapshot:
    return LiveSource(team, now=lambda: 1234.5).load()


def test_snapshot_of_a_fresh_team(team: Team) -> None:
    snap = _snapshot(team)
    assert (snap.team, snap.seq, snap.members, snap.tasks) == ("demo", 1, (), ())
    assert [(r.agent, r.unread, r.read) for r in snap.inboxes] == [("lead", 0, 0)]
    assert (snap.jobs, snap.crons, snap.worktrees, snap.approvals) == ((), (), (), ())
    assert snap.taken_at == 1234.5


def test_snapshot_of_a_busy_team(team: Team) -> None:
    populate(team)
    daily = schedule_cron(team.journal, UuidIds(), cron="0 9 * * *", prompt="standup", tz="UTC")
    once = schedule_cron(
        team.journal, UuidIds(), cron="0 0 1 1 *", prompt="new year", recurring=False, tz="UTC"
    )
    with team.liveness.hold("alice"):
        snap = _snapshot(team)

    assert snap.seq == team.journal.last_seq()
    members = {m.name: m for m in snap.members}
    assert list(members) == ["alice", "bob", "dave", "carol"]
    alice = members["alice"]
    assert (alice.status, alice.alive, alice.task_id, alice.task_subject) == (
        "working",
        True,
        "task_2",
        "api",
    )
    assert (alice.worktree, alice.unread, alice.orphaned) == ("wt-api", 1, False)
    # bob says he waits for a permission, but no process holds his lease.
    assert (members["bob"].status, members["bob"].alive, members["bob"].orphaned) == (
        "waiting_permission",
        False,
        True,
    )
    assert (members["dave"].status, members["dave"].orphaned) == ("crashed", False)
    carol = members["carol"]
    assert (carol.kind, carol.alive, carol.task_id, carol.orphaned) == (
        "human",
        None,
        "task_3",
        False,
    )

    columns = {t.id: t.column for t in snap.tasks}
    assert columns == {
        "task_1": "completed",
        "task_2": "in_progress",
        "task_3": "in_progress",
        "task_4": "blocked",
        "task_5": "ready",
    }
    tasks = {t.id: t for t in snap.tasks}
    assert (tasks["task_2"].owner, tasks["task_2"].worktree) == ("alice", "wt-api")
    assert (tasks["task_2"].blocked_by, tasks["task_2"].waiting_on) == (("task_1",), ())
    assert (tasks["task_4"].blocked_by, tasks["task_4"].waiting_on) == (("task_2",), ("task_2",))
    assert tasks["task_1"].blocks == ("task_2",)
    assert (tasks["task_3"].owner, tasks["task_3"].human) == ("carol", True)
    assert snap.task_counts() == {
        "in_progress": 2,
        "ready": 1,
        "blocked": 1,
        "completed": 1,
        "deleted": 0,
    }

    assert {r.agent: (r.unread, r.read) for r in snap.inboxes} == {
        "alice": (1, 0),
        "bob": (0, 0),
        "carol": (0, 0),
        "dave": (0, 0),
        "lead": (2, 0),
    }
    assert [(j.job_id, j.status, j.exit_code) for j in snap.jobs] == [
        ("job_run", "running", None),
        ("job_old", "exited", 0),
    ]
    assert [c.cron_id for c in snap.crons] == [daily, once]  # soonest first
    assert snap.crons[0].next_fire is not None and snap.crons[0].next_fire.endswith(
        "09:00:00+00:00"
    )
    assert {w.name: (w.task_id, w.task_status, w.task_owner, w.merged) for w in snap.worktrees} == {
        "wt-api": ("task_2", "in_progress", "alice", False),
        "wt-old": (None, None, None, True),
    }
    assert [(a.kind, a.request_id, a.agent, a.about) for a in snap.approvals] == [
        ("permission", "perm-1", "bob", "bash")
    ]


def test_json_document(team: Team) -> None:
    populate(team)
    doc = json.loads(json.dumps(_snapshot(team).as_json()))
    assert doc["team"] == "demo" and doc["seq"] == team.journal.last_seq()
    assert doc["unread"] == {"alice": 1, "bob": 0, "carol": 0, "dave": 0, "lead": 2}
    assert doc["task_counts"]["in_progress"] == 2
    bob = next(m for m in doc["members"] if m["name"] == "bob")
    assert (bob["status"], bob["alive"], bob["orphaned"]) == ("waiting_permission", False, True)
    assert next(t for t in doc["tasks"] if t["id"] == "task_4")["waiting_on"] == ["task_2"]


def test_loads_are_incremental_and_unchanged_teams_compare_equal(team: Team) -> None:
    source = LiveSource(team)
    first = source.load()
    assert source.load() == first  # nothing happened; taken_at is not compared
    populate(team)
    after = source.load()
    assert after != first
    # Folding only the new lines gives what a fresh reader folding everything gives.
    assert after == LiveSource(team).load()
    team.mailbox.deliver("alice", MessageDraft.text("lead", "three"))
    assert source.load() != after  # an inbox change alone is a change
    journal(team, MemberStatusChanged(name="alice", status="idle"))
    assert {m.name: m.status for m in source.load().members}["alice"] == "idle"


def test_load_snapshot_opens_and_closes_the_team(team: Team) -> None:
    assert load_snapshot(team.repo.root).seq == team.journal.last_seq()


def test_reading_takes_no_lock_and_writes_nothing(team: Team) -> None:
    populate(team)
    before = {p: p.stat().st_mtime_ns for p in team.repo.root.rglob("*") if p.is_file()}
    # A held journal lock (a runtime mid-append) does not stop the viewer.
    import fcntl
    import os

    fd = os.open(team.journal.lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        snap = LiveSource(team).load()
    finally:
        os.close(fd)
    assert snap.seq == team.journal.last_seq()
    after = {p: p.stat().st_mtime_ns for p in team.repo.root.rglob("*") if p.is_file()}
    assert after == before


# --- pure ------------------------------------------------------------------------------------


def _event(seq: int, type_: str, **data: object) -> Event:
    return Event(seq=seq, ts=float(seq), type=type_, actor="x", data=data)


def test_fold_permissions_keeps_only_open_requests() -> None:
    events = [
        _event(1, "permission.requested", request_id="p1", agent="bob", tool="bash", input={}),
        _event(2, "permission.requested", request_id="p2", agent="amy", tool="edit", input={}),
        _event(3, "permission.decided", request_id="p1", decision="allow", by="lead"),
        _event(4, "task.created", task_id="task_1", subject="s"),
    ]
    table = fold_permissions({}, events)
    assert list(table) == ["p2"] and table["p2"].tool == "edit"
    assert fold_permissions(table, events[3:]) is table


def _job(
    job_id: str, status: str, code: int | None, started: float, finished: float | None
) -> JobView:
    return JobView(job_id, "ann", "cmd", ".", None, status, code, started, finished, "/l")


def test_build_snapshot_over_plain_data() -> None:
    state = fold_all(
        EMPTY,
        [
            _event(1, "team.created", name="t"),
            _event(2, "member.spawned", name="ann", role="dev"),
            _event(3, "task.created", task_id="task_1", subject="a"),
            _event(4, "task.created", task_id="task_2", subject="b", blocked_by=["task_1"]),
            _event(5, "task.claimed", task_id="task_1", owner="ann", epoch=1),
        ],
    )
    jobs = [_job(f"j{i}", "exited", 0, float(i), float(i) + 1) for i in range(RECENT_JOBS + 2)]
    jobs.append(_job("live", "running", None, 0.0, None))
    later = datetime(2030, 1, 1, tzinfo=UTC).isoformat()
    sooner = datetime(2029, 1, 1, tzinfo=UTC).isoformat()
    crons = [
        CronView("c_late", "0 0 1 1 *", "p", True, "UTC", "lead", "active", later, None, 0),
        CronView("c_soon", "0 0 1 1 *", "p", True, "UTC", "lead", "active", sooner, None, 0),
        CronView("c_off", "0 0 1 1 *", "p", True, "UTC", "lead", "cancelled", None, None, 0),
    ]
    snap = build_snapshot(
        state, inboxes={"ann": (3, 4)}, jobs=jobs, crons=crons, alive={"ann"}, taken_at=9.0
    )
    assert [(m.name, m.alive, m.task_id, m.unread) for m in snap.members] == [
        ("ann", True, "task_1", 3)
    ]
    assert [(t.id, t.column, t.waiting_on) for t in snap.tasks] == [
        ("task_1", "in_progress", ()),
        ("task_2", "blocked", ("task_1",)),
    ]
    # Running first, then the most recently finished ones only.
    assert [j.job_id for j in snap.jobs] == ["live", "j4", "j3", "j2"]
    assert [c.cron_id for c in snap.crons] == ["c_soon", "c_late"]
    assert snap == build_snapshot(
        state, inboxes={"ann": (3, 4)}, jobs=jobs, crons=crons, alive={"ann"}, taken_at=10.0
    )
    assert snap != build_snapshot(state, inboxes={"ann": (3, 4)}, jobs=jobs, crons=crons)


def test_running_jobs_whose_process_is_gone_are_flagged(team: Team) -> None:
    from actors.jobs.proc import start_time

    child = subprocess.Popen(["true"])
    child.wait()
    me = os.getpid()
    for job_id, pid, started in (("j_live", me, start_time(me)), ("j_dead", child.pid, 1.0)):
        body = JobStarted(
            job_id=job_id, owner="a", command="x", cwd=".", pid=pid, start_time=started
        )
        journal(team, body)
    jobs = {j.job_id: (j.status, j.gone) for j in _snapshot(team).jobs}
    assert jobs == {"j_live": ("running", False), "j_dead": ("running", True)}
    text = io.StringIO()
    Console(file=text, width=120, color_system=None).print(render(_snapshot(team)))
    assert "running (process gone)" in text.getvalue()
