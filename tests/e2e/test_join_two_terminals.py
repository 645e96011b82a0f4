"""``teamctl join`` is first-class (issue 12 items 11 and 13): two terminals on one team.

Terminal 1 is the team's runtime (in-process here, with its Scheduler on a fake clock); terminal 2
is a real ``teamctl join w2 --role builder --worktree-per-task`` subprocess with a scripted model.
The joined teammate is created by ``join``, works each task inside ``.worktrees/<task>`` (commits on
``wt/<task>``, nothing in the main checkout), runs background jobs that finish, gets the firing of
a cron job it owns, shows in ``teamctl status``; SIGINT pauses it holding its claim, and a second
``join w2`` continues that claim to the end. Every wait reads the join's own output or the
journal, never a timer.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from actors.factory import open_team
from actors.worktrees.actor import WorktreesHandle
from harness.model.scripted import ScriptedModel
from mailboxes.events import JobStarted, MemberSpawned, draft
from tests.actors.jobs.cron_support import FakeTimers
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo
from tests.e2e.team_support import oracle, teamctl, write_script
from tests.support.fakes import FakeClock

__all__ = ["stop_actors"]

_GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def _work(fifo: Path | None) -> dict[str, Any]:
    """w2's script: each task is a file written where it works, a background job, then
    ``complete_task``. With ``fifo``, task_3's first step is a ``bash`` that blocks on it (the
    moment terminal 2 is interrupted)."""
    rules: list[dict[str, Any]] = []
    if fifo is not None:
        rules.append(
            {
                "match": r"You now hold task task_3 \(claim",
                "priority": 1,
                "tool_uses": [{"name": "bash", "input": {"command": f"cat {fifo}"}}],
            }
        )
    rules += [
        {
            "match": r"You now hold task (?P<id>task_\d+) \(claim",
            "tool_uses": [
                {"name": "write_file", "input": {"path": "work_{id}.txt", "content": "{id}\n"}},
                {
                    "name": "bash",
                    "input": {"command": "echo bg-{id}", "run_in_background": True},
                },
            ],
        },
        {
            "match": r"(?s)work_(?P<id>task_\d+)\.txt.*Started background job",
            "tool_uses": [
                {"name": "complete_task", "input": {"task_id": "{id}", "summary": "did {id}"}}
            ],
        },
        # complete_task ends the turn without a closing call: its result leads the next input,
        # so no rule may match it (it would answer the job notification that follows).
        {"match": r"(?s)cron_fired.*tidy up", "text": "Cron handled."},
        {"match": r"bg-(?P<id>task_\d+)", "text": "Job for {id} done."},
        {"match": "(?s).", "text": "OK.", "priority": -1},
        {"match": "^$", "text": "OK.", "priority": -2},
    ]
    return {"agents": {"w2": {"rules": rules}}}


class _Lines:
    """The lines a subprocess writes to one pipe, read by a thread; ``wait`` blocks until a
    line satisfies a predicate (woken by each new line, never by a timer)."""

    def __init__(self, pipe: IO[str]) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[str]) -> None:
        for line in pipe:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait(self, predicate: Callable[[str], bool], timeout: float = 60) -> bool:
        with self._cond:
            return self._cond.wait_for(
                lambda: self._closed or any(predicate(line) for line in self.lines), timeout
            ) and any(predicate(line) for line in self.lines)

    def join(self) -> list[str]:
        self._thread.join(60)
        return self.lines


def _events(line: str) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def _join(root: Path, script: Path) -> tuple[subprocess.Popen[str], _Lines, _Lines]:
    proc = teamctl(
        root,
        "join",
        "w2",
        "--role",
        "builder",
        "--worktree-per-task",
        "--permission-mode",
        "bypassPermissions",
        "--output-format",
        "stream-json",
        script=script,
    )
    assert proc.stdout is not None and proc.stderr is not None
    return proc, _Lines(proc.stdout), _Lines(proc.stderr)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run([*_GIT, *args], cwd=root, check=True, capture_output=True, text=True)
    return done.stdout


def test_a_teammate_joined_from_a_second_terminal_works_in_worktrees_and_pauses(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    (root / "README.md").write_text("base\n")
    _git(root, "add", "README.md")
    _git(root, "commit", "-qm", "base")
    settings_path = root / ".team" / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["sandbox"] = {"enabled": False}  # the blocking step reads a FIFO under /tmp
    settings_path.write_text(json.dumps(settings))
    fifo = tmp_path / "go.fifo"
    os.mkfifo(fifo)

    clock = FakeClock(time.time())
    lead = {"agents": {"lead": {"rules": [{"match": "(?s).", "text": "Noted."}]}}}
    rt = runtime(
        root,
        ScriptedModel(lead),
        scheduler=True,
        cron_clock=clock,
        cron_timer=FakeTimers(),
        worktrees=True,
        jobs=True,
    )
    stop_actors.append(rt)
    rt.start()
    rt.board.create("one")
    rt.board.create("two")

    # terminal 2: w2 is not on the team yet; join creates it
    proc, out, err = _join(root, write_script(tmp_path / "first.yaml", _work(fifo)))
    try:
        assert rt.wait_until(
            lambda: all(t.status == "completed" for t in rt.board.refresh().tasks.values()), 60
        ), err.lines
        # both background jobs finished and w2 was told (its model answered the notifications)
        for tid in ("task_1", "task_2"):
            assert out.wait(lambda line, t=tid: _events(line).get("text") == f"Job for {t} done.")

        status = subprocess.run(
            ["teamctl", "status", "--json"], cwd=root, capture_output=True, text=True, check=True
        )
        members = {m["name"]: m for m in json.loads(status.stdout)["members"]}
        assert members["w2"]["role"] == "builder"
        assert rt.team.liveness.is_alive("w2")

        # a cron job w2 owns, fired by terminal 1's Scheduler, reaches w2 in terminal 2
        rt.services.schedule_cron("*/5 * * * *", "tidy up", recurring=True, tz="UTC", owner="w2")
        clock.advance(6 * 60)
        assert rt.background.scheduler is not None and rt.background.scheduler.fire_due()
        assert out.wait(lambda line: _events(line).get("text") == "Cron handled.")

        # Ctrl-C in terminal 2 while w2 is in the middle of task_3
        rt.board.create("three")
        assert out.wait(lambda line: _events(line).get("task_id") == "task_3")
        with open(fifo, "w") as go:  # opens once w2's step reads the FIFO: it is mid-task
            proc.send_signal(signal.SIGINT)
            assert err.wait(lambda line: line.startswith("pausing w2"))
            go.write("released\n")  # the blocked step ends; w2 is paused after it
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err.join()
    state = rt.board.refresh()
    assert state.members["w2"].status == "paused"
    task = state.tasks["task_3"]
    assert (task.status, task.owner, task.epoch) == ("in_progress", "w2", 1)

    # terminal 2 again: the same w2 continues its claim and its conversation
    proc, out, err = _join(root, write_script(tmp_path / "again.yaml", _work(None)))
    try:
        assert rt.wait_until(lambda: rt.board.refresh().tasks["task_3"].status == "completed", 60)
        assert out.wait(lambda line: _events(line).get("text") == "Job for task_3 done.")
        rt.services.request_shutdown("w2", by="lead")
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.join()
    rt.stop()

    events = list(open_team(root).journal.read_from(1))
    spawned = [e for e in events if e.type == "member.spawned" and e.data["name"] == "w2"]
    assert [(e.actor, e.data["role"]) for e in spawned] == [("cli", "builder")]
    claims = [e.data["task_id"] for e in events if e.type == "task.claimed"]
    assert sorted(claims) == ["task_1", "task_2", "task_3"]  # task_3 claimed once
    state = open_team(root).state()
    for tid in ("task_1", "task_2", "task_3"):
        task = state.tasks[tid]
        assert (task.status, task.owner, task.worktree) == ("completed", "w2", tid)
        assert _git(root, "show", f"wt/{tid}:work_{tid}.txt") == f"{tid}\n"
        assert _git(root, "log", "--format=%s", f"HEAD..wt/{tid}").strip()
        assert not (root / f"work_{tid}.txt").exists()
    assert _git(root, "status", "--porcelain") == ""
    started = [e for e in events if e.type == "job.started"]
    assert {e.data["owner"] for e in started} == {"w2"} and len(started) == 3
    finished = {e.data["job_id"]: e.data["status"] for e in events if e.type == "job.finished"}
    assert finished == {e.data["job_id"]: "exited" for e in started}
    paused = [e for e in events if e.type == "member.status_changed" and e.data["name"] == "w2"]
    assert any(e.data["status"] == "paused" and e.data["reason"] == "interrupted" for e in paused)
    oracle(root)


def test_every_worktrees_actor_holds_the_team_lock_for_its_git_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes each run a Worktrees actor (the runtime and ``join``): a git write holds
    ``.team/worktrees.lock``, so another process's actor waits for it."""
    from tests.actors.worktrees.worktree_support import make_repo

    root = make_repo(tmp_path, monkeypatch)
    lock_path = root / ".team" / "worktrees.lock"
    held: list[bool] = []

    def probe(point: str) -> None:  # between the git step and the journal step of a create
        fd = os.open(lock_path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)

    with open_team(root, actor="runtime") as team:
        team.board.create("one")
        handle = WorktreesHandle.start(root, team.board, fault=probe, lock_path=lock_path)
        try:
            handle.create_for_task("task_1")
        finally:
            handle.stop()
    assert held == [True]


def test_a_jobs_actor_takes_over_only_the_jobs_of_the_members_it_hosts(tmp_path: Path) -> None:
    """``join`` runs a Jobs actor of its own: at start it neither reports nor re-attaches (nor,
    on stop, kills) the jobs of members another process hosts."""
    from actors.jobs.actor import JobsHandle
    from actors.jobs.scheduler import MaildirDelivery
    from teamctl_base.clock import SystemClock, UuidIds

    root = team_repo(tmp_path)
    with open_team(root, actor="runtime") as team:
        for owner in ("w1", "w2"):
            body = JobStarted(
                job_id=f"job_{owner}", owner=owner, command="true", cwd=str(root), pid=2**22 + 1
            )
            team.journal.append(lambda _seen, b=body: [draft(b.TYPE, b.owner, b)], after=0)
        team_dir = root / ".team"
        handle = JobsHandle.start(
            team.journal,
            MaildirDelivery(team_dir / "mailboxes"),
            jobs_dir=team_dir / "jobs",
            clock=SystemClock(),
            ids=UuidIds(),
            adopt=lambda owner: owner == "w2",
        )
        handle.stop()
        finished = [e.data for e in team.journal.read_from(1) if e.type == "job.finished"]
    assert [(d["job_id"], d["status"]) for d in finished] == [("job_w2", "lost")]


def test_join_creates_a_teammate_only_under_the_name_rules(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    with open_team(root, actor="runtime") as team:
        body = MemberSpawned(name="w1", role="general")
        team.board.execute(lambda _st: [draft(body.TYPE, "lead", body)])
    script = write_script(tmp_path / "script.yaml", _work(None))
    for args, message in (
        (("W1",), "W1"),  # the same name as w1 ignoring case
        (("user",), "reserved"),
        (("w1", "--role", "tester"), "role 'general', not 'tester'"),
    ):
        proc = teamctl(root, "join", *args, script=script)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1 and message in err, err
    with open_team(root) as team:
        assert set(team.state().members) == {"w1"}
