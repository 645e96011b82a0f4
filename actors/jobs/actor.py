"""The Jobs actor: background commands and the harness ``JobRunner`` adapter
(docs/ARCHITECTURE.md, "Jobs and cron").

Life of a job: spawn (own session and process group, stdin ``/dev/null``, output appended to
``.team/jobs/<job_id>.log``) → journal ``job.started`` (pid and its start time) → one waiter
thread blocks on the job's pidfd (no polling) until it exits or its timeout (TERM the group,
grace, KILL) → whatever is left of the job is killed → the waiter tells the actor, which journals
``job.finished`` (op_id ``job:<id>:finished``) THEN delivers a ``task_notification`` to the owner
(status, exit code, head and tail of the log, the log path) under an id derived from the job id.

Sandbox: given a ``harness.shell.sandbox.Sandbox`` (the runtime passes
``Sandbox(settings.bash_sandbox)``, the policy of the foreground ``bash``), a job runs under bubblewrap with the agent's root writable:
the checkout, or the worktree under ``<root>/.worktrees/<name>`` its cwd is in. ``bwrap`` is
spawned from the actor's own thread (``--die-with-parent`` follows the spawning thread), so a
sandboxed job dies when the actor stops or the process dies; it is then reported ``lost`` on the
next start instead of being re-attached.

Environment: the ``command_env`` given (the runtime passes the settings' ``env`` and
``command_env``), as the foreground ``bash`` has it: no model credentials unless passed on.

Start-up recovery: a job with ``job.started`` but no ``job.finished`` is re-attached if its pid
is alive with the same start time (waited for through a pidfd; its exit code is then unknown),
else reported ``lost``. Notifications of jobs finished within ``redeliver_window_s`` are
delivered again under the same id (a crash between journal and delivery loses nothing; the
Maildir drops the duplicate).
Given ``adopt(owner)``, start-up recovery takes only the jobs of the owners it accepts: several
processes each run a Jobs actor (the runtime, ``teamctl join``), and none re-attaches, reports
or kills the jobs of a member another live process hosts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pykka

from actors.jobs import proc as jobs_proc
from actors.jobs.scheduler import KeyedDeliver, message_id
from actors.jobs.table import (
    JobRecord,
    JobStatus,
    JobTable,
    JobView,
    fold_jobs,
    job_views,
    notification,
)
from actors.messages import JobExited, ListJobs, StartJob, StopAllJobs, StopJobsOf
from harness.shell.environment import CommandEnv
from harness.shell.sandbox import Sandbox
from mailboxes.errors import UnknownRecipient
from mailboxes.events import Event, EventDraft, JobFinished, JobStarted, draft
from mailboxes.ports import Clock, EventStore, IdSource

log = logging.getLogger(__name__)

SENDER = "jobs"


@dataclass
class _Running:
    """A live job; ``outcome`` is written by its waiter thread before ``done`` is set."""

    job_id: str
    pid: int
    proc: subprocess.Popen[bytes] | None  # None when re-attached (not our child)
    fd: int | None
    timeout_s: float | None
    stopping: bool = False
    outcome: JobExited | None = None
    done: threading.Event = field(default_factory=threading.Event)


class Jobs(pykka.ThreadingActor):
    """Runs background commands for agents. Replies: see ``actors.messages``."""

    def __init__(
        self,
        store: EventStore,
        deliver: KeyedDeliver,
        *,
        jobs_dir: Path,
        clock: Clock,
        ids: IdSource,
        default_timeout_s: float = 3600.0,
        kill_grace_s: float = 2.0,
        shell: str = "/bin/bash",
        redeliver_window_s: float = 86_400.0,
        sandbox: Sandbox | None = None,
        root: Path | None = None,
        adopt: Callable[[str], bool] | None = None,
        command_env: CommandEnv | None = None,
    ) -> None:
        super().__init__()
        self._adopt = adopt
        self._command_env = command_env
        self._store = store
        self._deliver = deliver
        self._dir = Path(jobs_dir)
        self._clock = clock
        self._ids = ids
        self._default_timeout_s = default_timeout_s
        self._grace = kill_grace_s
        self._shell = shell
        self._window = redeliver_window_s
        self._sandbox = sandbox
        self._root = root
        self._table: JobTable = MappingProxyType({})
        self._seq = 0
        self._running: dict[str, _Running] = {}

    # --- hooks ---------------------------------------------------------------------------------

    def on_start(self) -> None:
        self._catch_up()
        horizon = self._clock.now() - self._window
        for rec in list(self._table.values()):
            if self._adopt is not None and not self._adopt(rec.owner):
                continue  # another live process runs its owner, and its jobs
            if rec.status == "running":
                self._reattach_or_lose(rec)
            elif (rec.finished_at or 0.0) >= horizon:
                self._notify(rec)

    def on_stop(self) -> None:
        self._stop_all(None)

    def on_failure(self, *_: object) -> None:
        self._stop_all(None)

    def on_receive(self, message: Any) -> Any:
        match message:
            case StartJob():
                return self._start(message)
            case JobExited():
                run = self._running.pop(message.job_id, None)
                if run is not None:
                    self._finish(message)
                return None
            case ListJobs():
                self._catch_up()
                return job_views(self._table, self._dir)
            case StopAllJobs(grace_s=grace):
                return self._stop_all(grace)
            case StopJobsOf(owner=owner, grace_s=grace):
                return self._kill_jobs(self._owned_by(owner), grace)
            case _:
                raise TypeError(f"Jobs cannot handle {message!r}")

    # --- start and finish ----------------------------------------------------------------------

    def _start(self, msg: StartJob) -> JobView:
        job_id = f"job_{self._ids.new_id()[:8]}"
        log_path = self._dir / f"{job_id}.log"
        cwd = Path(msg.cwd)
        wrapper: list[str] = []
        if self._sandbox is not None:  # SandboxUnavailable (required, cannot run) goes back
            wrapper, notice = self._sandbox.prefix(root=self._root_of(cwd), cwd=cwd)
            if notice:
                log.warning("job %s: %s", job_id, notice)
        # Spawned here, on the actor's thread: it lives as long as the job may (see above).
        proc = jobs_proc.spawn(
            msg.command,
            cwd=cwd,
            log_path=log_path,
            mark=self._mark(job_id),
            shell=self._shell,
            wrapper=wrapper,
            command_env=self._command_env,
        )
        run = _Running(
            job_id,
            proc.pid,
            proc,
            jobs_proc.pidfd(proc.pid),
            msg.timeout_s if msg.timeout_s is not None else self._default_timeout_s,
        )
        body = JobStarted(
            job_id=job_id,
            owner=msg.owner,
            command=msg.command,
            cwd=msg.cwd,
            pid=proc.pid,
            start_time=jobs_proc.start_time(proc.pid),
        )
        try:
            self._append([draft(body.TYPE, msg.owner, body, op_id=f"job:{job_id}:started")])
        except BaseException:
            jobs_proc.signal_job(proc.pid, self._mark(job_id), signal.SIGKILL)
            proc.wait()
            if run.fd is not None:
                os.close(run.fd)
            raise
        self._watch(run)
        return job_views(MappingProxyType({job_id: self._table[job_id]}), self._dir)[0]

    def _root_of(self, cwd: Path) -> Path:
        """The writable root of a job run in ``cwd``: its worktree, else the team's root."""
        real = Path(os.path.realpath(cwd))
        if self._root is None:
            return real
        root = Path(os.path.realpath(self._root))
        if not real.is_relative_to(root):
            return real
        parts = real.relative_to(root).parts
        if len(parts) >= 2 and parts[0] == ".worktrees":
            return root / parts[0] / parts[1]
        return root

    def _mark(self, job_id: str) -> str:
        return jobs_proc.marker(job_id, self._dir)

    def _watch(self, run: _Running) -> None:
        self._running[run.job_id] = run
        name = f"job-waiter-{run.job_id}"
        threading.Thread(target=self._wait, args=(run,), name=name, daemon=True).start()

    def _wait(self, run: _Running) -> None:
        """Waiter thread: block until the job ends or times out; never touches actor state."""
        timed_out = False
        code: int | None = None
        try:
            if not self._wait_exit(run, run.timeout_s):
                timed_out = True
                jobs_proc.signal_job(run.pid, self._mark(run.job_id), signal.SIGTERM)
                self._wait_exit(run, self._grace)
            # Nothing the job started outlives it (like the foreground bash tool).
            jobs_proc.signal_job(run.pid, self._mark(run.job_id), signal.SIGKILL)
            if run.proc is not None:
                code = run.proc.wait()
        except Exception:
            log.exception("waiting for job %s failed", run.job_id)
        finally:
            if run.fd is not None:
                os.close(run.fd)
            run.outcome = JobExited(
                job_id=run.job_id, returncode=code, timed_out=timed_out, stopped=run.stopping
            )
            run.done.set()
        with contextlib.suppress(pykka.ActorDeadError):
            self.actor_ref.tell(run.outcome)

    @staticmethod
    def _wait_exit(run: _Running, timeout_s: float | None) -> bool:
        if run.fd is not None:
            return jobs_proc.wait_fd(run.fd, timeout_s)
        if run.proc is None:
            return False
        try:
            run.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _finish(self, outcome: JobExited, status: JobStatus | None = None) -> None:
        """Journal ``job.finished``, then notify the owner (failures are logged: recovery on the
        next start delivers again)."""
        code = outcome.returncode
        if status is None:
            if outcome.timed_out:
                status = "timeout"
            elif outcome.stopped or (code is not None and code < 0):
                status = "killed"
            else:
                status = "exited"
        body = JobFinished(job_id=outcome.job_id, status=status, exit_code=code)
        try:
            self._append([draft(body.TYPE, SENDER, body, op_id=f"job:{outcome.job_id}:finished")])
            self._notify(self._table[outcome.job_id])
        except Exception:
            log.exception("recording the end of job %s failed", outcome.job_id)

    def _notify(self, rec: JobRecord) -> None:
        log_path = self._dir / f"{rec.job_id}.log"
        draft_ = notification(rec, log_path, *jobs_proc.head_tail(log_path))
        try:
            self._deliver(SENDER, draft_, message_id("job", rec.job_id, "finished"))
        except UnknownRecipient:
            log.warning(
                "job %s: owner %r has no inbox; notification dropped", rec.job_id, rec.owner
            )
        except Exception:
            log.exception(
                "job %s: notification failed; it is retried on the next start", rec.job_id
            )

    def _reattach_or_lose(self, rec: JobRecord) -> None:
        fd = jobs_proc.pidfd(rec.pid) if rec.pid is not None else None
        if (
            rec.pid is not None
            and fd is not None
            and jobs_proc.same_process(rec.pid, rec.start_time)
        ):
            self._watch(_Running(rec.job_id, rec.pid, None, fd, None))
            return
        if fd is not None:
            os.close(fd)
        self._finish(JobExited(job_id=rec.job_id, returncode=None), status="lost")

    # --- stop ----------------------------------------------------------------------------------

    def _stop_all(self, grace_s: float | None) -> tuple[str, ...]:
        """TERM every job, wait ``grace``, KILL the rest, wait for each, record them."""
        return self._kill_jobs(list(self._running.values()), grace_s)

    def _owned_by(self, owner: str) -> list[_Running]:
        self._catch_up()
        return [
            run
            for run in self._running.values()
            if (rec := self._table.get(run.job_id)) is not None and rec.owner == owner
        ]

    def _kill_jobs(self, runs: list[_Running], grace_s: float | None) -> tuple[str, ...]:
        grace = self._grace if grace_s is None else grace_s
        for run in runs:
            run.stopping = True
            jobs_proc.signal_job(run.pid, self._mark(run.job_id), signal.SIGTERM)
        deadline = self._clock.monotonic() + grace
        for run in runs:
            run.done.wait(max(0.0, deadline - self._clock.monotonic()))
        for run in runs:
            if not run.done.is_set():
                jobs_proc.signal_job(run.pid, self._mark(run.job_id), signal.SIGKILL)
        for run in runs:
            if not run.done.wait(grace + 10.0):
                log.error("job %s did not end after SIGKILL", run.job_id)
                continue
            self._running.pop(run.job_id, None)
            assert run.outcome is not None
            self._finish(run.outcome)
        return tuple(run.job_id for run in runs)

    # --- journal -------------------------------------------------------------------------------

    def _append(self, drafts: Sequence[EventDraft]) -> None:
        result = self._store.append(lambda _seen: drafts, after=self._seq)
        self._absorb([*result.seen, *result.appended])

    def _catch_up(self) -> None:
        self._absorb(self._store.read_from(self._seq + 1))

    def _absorb(self, events: Iterable[Event]) -> None:
        fresh = sorted((e for e in events if e.seq > self._seq), key=lambda e: e.seq)
        if fresh:
            self._table = fold_jobs(self._table, fresh)
            self._seq = fresh[-1].seq


class JobsHandle:
    """Typed calls to a running ``Jobs`` actor (each waits for the reply)."""

    def __init__(self, ref: pykka.ActorRef[Jobs], *, timeout_s: float = 60.0) -> None:
        self.ref = ref
        self.timeout_s = timeout_s

    @classmethod
    def start(cls, store: EventStore, deliver: KeyedDeliver, **kwargs: Any) -> JobsHandle:
        """Start a ``Jobs`` actor; returns once its start-up recovery is done."""
        handle = cls(Jobs.start(store, deliver, **kwargs))
        handle.list()
        return handle

    def start_job(
        self, command: str, *, cwd: Path, owner: str, timeout_s: float | None = None
    ) -> JobView:
        msg = StartJob(command=command, cwd=str(cwd), owner=owner, timeout_s=timeout_s)
        view: JobView = self._ask(msg)
        return view

    def list(self) -> tuple[JobView, ...]:
        return tuple(self._ask(ListJobs()))

    def stop_all(self, grace_s: float | None = None) -> tuple[str, ...]:
        return tuple(self._ask(StopAllJobs(grace_s=grace_s)))

    def stop_jobs_of(self, owner: str, grace_s: float | None = None) -> tuple[str, ...]:
        """Kill ``owner``'s running jobs (a member stopped by force); returns their ids."""
        return tuple(self._ask(StopJobsOf(owner=owner, grace_s=grace_s)))

    def _ask(self, message: object) -> Any:
        return self.ref.ask(message, timeout=self.timeout_s)

    def stop(self) -> None:
        with contextlib.suppress(pykka.ActorDeadError):
            self.ref.stop(timeout=self.timeout_s)


class JobsRunner:
    """The harness ``JobRunner`` over a ``Jobs`` actor: what ``bash`` with
    ``run_in_background=true`` calls (sandboxed when the actor was given a ``Sandbox``)."""

    def __init__(self, jobs: JobsHandle) -> None:
        self.jobs = jobs

    def start(self, command: str, *, cwd: Path, agent: str, timeout_s: float | None) -> str:
        view = self.jobs.start_job(command, cwd=cwd, owner=agent, timeout_s=timeout_s)
        return (
            f"Started background job {view.job_id} (pid {view.pid}); output is written to "
            f"{view.log_path}. You will get a task_notification message when it finishes, "
            "with its exit code and the head and tail of its output; do not poll for it."
        )
