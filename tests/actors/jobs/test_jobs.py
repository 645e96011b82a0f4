"""The Jobs actor with real processes, a real journal and real Maildir inboxes.

Nothing here sleeps: tests wait on the inbox through the actor's replies, on pidfds, or on
``os.waitpid``; background commands that must wait block on a FIFO the test controls.
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pykka
import pytest

from actors.jobs.actor import JobsHandle, JobsRunner
from actors.jobs.proc import same_process, start_time
from actors.jobs.scheduler import MaildirDelivery, message_id
from harness.ports import ToolUseBlock
from harness.tools.base import (
    ToolContext,
)
from harness.tools.bash import BashTool
from harness.tools.executor import ToolExecutor
from harness.tools.registry import ToolRegistry
from mailboxes.events import Event, EventDraft, JobStarted, draft
from mailboxes.journal.store import FileJournal
from mailboxes.maildir import Maildir
from mailboxes.messages import Envelope, MessageDraft
from tests.actors.jobs.cron_support import SeqIds, stop_actors
from tests.support.fakes import AllowAll

__all__ = ["stop_actors"]


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.team = root / ".team"
        self.team.mkdir()
        self.journal = FileJournal(self.team)
        self.maildir = Maildir(self.team / "mailboxes")
        self.maildir.ensure_inbox("lead")
        self.maildir.ensure_inbox("alice")
        self.ids = SeqIds()
        self.jobs_dir = self.team / "jobs"
        self.delivered = threading.Condition()
        self.sent: list[str] = []

    def start(self, **kwargs: object) -> JobsHandle:
        from teamctl_base.clock import SystemClock

        return JobsHandle.start(
            self.journal,
            SignallingDelivery(self.team / "mailboxes", self),
            jobs_dir=self.jobs_dir,
            clock=SystemClock(),
            ids=self.ids,
            kill_grace_s=kwargs.pop("kill_grace_s", 0.5),
            **kwargs,
        )

    def events(self, type_: str) -> list[Event]:
        return [e for e in self.journal.read_from(1) if e.type == type_]

    def wait_for_message(self, agent: str, count: int = 1) -> list[Envelope]:
        """Wait until ``count`` deliveries reached ``agent``; returns its pending messages."""
        with self.delivered:
            ok = self.delivered.wait_for(lambda: self.sent.count(agent) >= count, timeout=20)
        assert ok, f"no message for {agent}"
        return self.maildir.pending(agent)


class SignallingDelivery(MaildirDelivery):
    """Real Maildir delivery that also tells waiting tests who got a message."""

    def __init__(self, root: Path, env: Env) -> None:
        super().__init__(root)
        self.env = env

    def __call__(self, sender: str, draft: MessageDraft, message_id: str) -> None:
        super().__call__(sender, draft, message_id)
        with self.env.delivered:
            self.env.sent.append(draft.to)
            self.env.delivered.notify_all()


def read_line(fifo: Path, timeout_s: float = 20.0) -> str:
    """The first line written to ``fifo`` (waits on select, never sleeps)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    data = b""
    try:
        while b"\n" not in data:
            assert select.select([fd], [], [], timeout_s)[0], f"nothing written to {fifo}"
            data += os.read(fd, 100)
    finally:
        os.close(fd)
    return data.decode().strip()


def wait_gone(pid: int, timeout_s: float = 20.0) -> None:
    """Wait (on a pidfd) until ``pid`` has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        assert select.select([fd], [], [], timeout_s)[0], f"pid {pid} still running"
    finally:
        os.close(fd)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.fixture
def env(tmp_path: Path, stop_actors: None) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    pykka.ActorRegistry.stop_all()
    e.journal.close()


def test_notification_reaches_the_owner_with_head_and_tail(env: Env) -> None:
    jobs = env.start()
    command = "for i in $(seq 1 2000); do echo line-$i; done; echo oops >&2; exit 3"
    view = jobs.start_job(command, cwd=env.root, owner="alice")
    assert view.status == "running"
    [msg] = env.wait_for_message("alice")
    assert msg.type == "task_notification"
    assert msg.id == message_id("job", view.job_id, "finished")
    body = msg.body
    assert (body["job_id"], body["status"], body["exit_code"]) == (view.job_id, "exited", 3)
    assert body["head"].startswith("line-1\nline-2\n")
    assert body["tail"].endswith("line-2000\noops\n")
    assert body["log_path"] == str(env.jobs_dir / f"{view.job_id}.log")
    assert Path(body["log_path"]).read_text().count("\n") == 2001
    [started] = env.events("job.started")
    assert started.data["pid"] == view.pid
    assert started.data["start_time"] is not None
    [finished] = env.events("job.finished")
    assert finished.op_id == f"job:{view.job_id}:finished"
    assert [(v.job_id, v.status, v.exit_code) for v in jobs.list()] == [(view.job_id, "exited", 3)]


def test_timeout_kills_the_group(env: Env, tmp_path: Path) -> None:
    jobs = env.start()
    pidfile = tmp_path / "child.pid"
    # The child never ends on its own; bash waits for it. $! is known right after the fork, so
    # the pid file is written long before the timeout.
    view = jobs.start_job(
        f"sleep 300 & echo $! > {pidfile}; wait", cwd=env.root, owner="lead", timeout_s=1.0
    )
    [msg] = env.wait_for_message("lead")
    assert msg.body["status"] == "timeout"
    child = int(pidfile.read_text())
    wait_gone(child)
    assert not alive(child)
    assert not alive(view.pid or 0)


def test_stop_all_kills_every_group_including_detached_children(env: Env, tmp_path: Path) -> None:
    jobs = env.start()
    fifo = tmp_path / "never"
    os.mkfifo(fifo)
    pids = []
    for n in range(3):
        pid_fifo = tmp_path / f"detached{n}.pid"
        os.mkfifo(pid_fifo)
        # A setsid child leaves the process group; the job marker still finds it.
        command = f"setsid sh -c 'echo $$ > {pid_fifo}; exec sleep 300' & cat {fifo}"
        view = jobs.start_job(command, cwd=env.root, owner="lead")
        pids.append(view.pid or 0)
        pids.append(int(read_line(pid_fifo)))
    assert all(alive(p) for p in pids)
    stopped = jobs.stop_all(grace_s=0.5)
    assert len(stopped) == 3
    for pid in pids:
        wait_gone(pid)
        assert not alive(pid)
    assert sorted(e.data["status"] for e in env.events("job.finished")) == ["killed"] * 3
    assert len(env.maildir.pending("lead")) == 3
    assert all(v.status == "killed" for v in jobs.list())


def test_a_job_that_ignores_term_is_killed(env: Env, tmp_path: Path) -> None:
    jobs = env.start()
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    view = jobs.start_job(f"trap '' TERM; cat {fifo}", cwd=env.root, owner="lead")
    jobs.stop_all(grace_s=0.2)
    wait_gone(view.pid or 0)
    [finished] = env.events("job.finished")
    assert finished.data["status"] == "killed"


def test_lost_and_reattached_jobs_after_a_crash(env: Env, tmp_path: Path) -> None:
    # A crashed runtime left two job.started without job.finished: one process is gone,
    # the other is still running.
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        for job_id, pid, started in [
            ("job_dead", dead.pid, 12345.0),
            ("job_live", live.pid, start_time(live.pid)),
        ]:
            body = JobStarted(
                job_id=job_id,
                owner="lead",
                command="x",
                cwd=str(env.root),
                pid=pid,
                start_time=started,
            )
            drafts = [draft(body.TYPE, "lead", body)]

            def decide(_seen: Sequence[Event], d: list[EventDraft] = drafts) -> list[EventDraft]:
                return d

            env.journal.append(decide, after=0)
        assert same_process(live.pid, start_time(live.pid))
        jobs = env.start()
        [lost] = env.events("job.finished")
        assert (lost.data["job_id"], lost.data["status"]) == ("job_dead", "lost")
        [note] = env.maildir.pending("lead")
        assert note.body["status"] == "lost"
        assert {v.job_id: v.status for v in jobs.list()}["job_live"] == "running"
        live.terminate()  # the re-attached job ends: it is reported, exit code unknown
        live.wait()
        env.wait_for_message("lead", 2)
        finished = {e.data["job_id"]: e.data for e in env.events("job.finished")}
        assert finished["job_live"]["status"] == "exited"
        assert finished["job_live"]["exit_code"] is None
    finally:
        live.kill()
        live.wait()


def test_crash_between_finish_and_notification_is_redelivered(env: Env) -> None:
    jobs = env.start()
    view = jobs.start_job("echo hi", cwd=env.root, owner="lead")
    [first] = env.wait_for_message("lead")
    jobs.stop()
    env.maildir.ack("lead", [first.id])
    env.start()  # delivers the recent notification again under the same id: dropped
    assert env.sent == ["lead", "lead"]
    assert env.maildir.pending("lead") == []
    assert first.id == message_id("job", view.job_id, "finished")


def test_bash_run_in_background_goes_through_the_job_runner(env: Env) -> None:
    jobs = env.start()
    ctx = ToolContext(agent="alice", root=env.root, cwd=env.root, job_runner=JobsRunner(jobs))
    executor = ToolExecutor(ToolRegistry([BashTool()]), AllowAll())
    call = ToolUseBlock(
        id="toolu_1", name="bash", input={"command": "echo from-bg", "run_in_background": True}
    )
    [result] = executor.run_batch([call], ctx)
    assert not result.is_error
    [view] = jobs.list()
    assert view.job_id in str(result.content)
    [msg] = env.wait_for_message("alice")
    assert msg.body["head"] == "from-bg\n"
    assert msg.body["status"] == "exited"
