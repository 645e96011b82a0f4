"""Background jobs outside the actor: the job table folded from the journal, its views and
notifications, and the process plumbing (spawn, identify, wait, kill, read the log).

A job runs as ``/bin/bash -c COMMAND`` in a new session (so its own process group, pgid = pid),
stdin ``/dev/null``, stdout and stderr appended straight to its log file by the kernel (no pump
thread), and the environment of the ``bash`` tool plus ``TEAMCTL_JOB_ID=<job_id>``.

Killing: the process group, plus every process of ours whose environment still carries the job's
marker — that catches children that left the group with ``setsid``/``setpgid``. Without the
sandbox, a descendant that both leaves the group and clears its environment escapes. Under the
sandbox (``wrapper``: bubblewrap with its own PID namespace and ``--die-with-parent``) the whole
tree dies with ``bwrap``, which is the group leader, so nothing escapes.

Identity across restarts: ``(pid, start_time)`` where ``start_time`` is field 22 of
``/proc/<pid>/stat`` (clock ticks since boot), so a recycled pid is never mistaken for the job.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from harness.tools.bash import SHELL_ENV
from mailboxes.events import Event, JobFinished, JobStarted, payload
from mailboxes.messages import MessageDraft

MARKER = "TEAMCTL_JOB_ID"
"""Environment variable naming the job a process belongs to."""


def marker(job_id: str, jobs_dir: Path) -> str:
    """The value of ``MARKER`` for a job: its id and its team's jobs folder, so two teams (or
    two test runs) with the same job id never mark each other's processes."""
    return f"{job_id}@{jobs_dir.resolve()}"


def spawn(
    command: str,
    *,
    cwd: Path,
    log_path: Path,
    mark: str,
    shell: str = "/bin/bash",
    wrapper: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own session with output appended to ``log_path`` and
    ``MARKER=mark`` in its environment. ``wrapper`` goes before the shell (the sandbox's
    ``bwrap ... --``); with ``--die-with-parent`` in it, the job dies when the calling *thread*
    ends, so call this from a thread that lives as long as the job."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        return subprocess.Popen(
            [*wrapper, shell, "-c", command],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env={**os.environ, **SHELL_ENV, MARKER: mark},
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)


def start_time(pid: int) -> float | None:
    """Field 22 of ``/proc/<pid>/stat`` (start time in clock ticks since boot), or None if the
    process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(b")") + 2 :].split()
    return float(fields[19])


def same_process(pid: int, started: float | None) -> bool:
    """True if ``pid`` is alive (not a zombie) and started at ``started``."""
    if started is None:
        return False
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    fields = raw[raw.rindex(b")") + 2 :].split()
    return fields[0] != b"Z" and float(fields[19]) == started


def pidfd(pid: int) -> int | None:
    """A pidfd for ``pid`` (readable once it exits), or None if it is gone or unsupported."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def wait_fd(fd: int, timeout_s: float | None) -> bool:
    """Wait until ``fd`` is readable (a pidfd: the process exited); False on timeout."""
    readable, _, _ = select.select([fd], [], [], timeout_s)
    return bool(readable)


def marked_pids(mark: str) -> list[int]:
    """Live processes (other than this one) whose environment carries ``MARKER=mark``."""
    needle = f"{MARKER}={mark}".encode()
    me = os.getpid()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            env = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry.name))
    return found


def signal_job(pgid: int, mark: str, sig: signal.Signals) -> None:
    """Send ``sig`` to the job's process group and to every process still marked ``mark``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in marked_pids(mark):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def head_tail(path: Path, head_bytes: int = 1500, tail_bytes: int = 3000) -> tuple[str, str, int]:
    """``(head, tail, size)`` of the log; ``tail`` is empty when the head holds it all."""
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(head_bytes)
            tail = b""
            if size > head_bytes:
                fh.seek(max(head_bytes, size - tail_bytes))
                tail = fh.read()
    except FileNotFoundError:
        return "", "", 0
    return head.decode("utf-8", "replace"), tail.decode("utf-8", "replace"), size


# --- the job table ----------------------------------------------------------------------------

JobStatus = Literal["running", "exited", "killed", "timeout", "lost"]


class JobRecord(NamedTuple):
    """One job as folded from the journal."""

    job_id: str
    owner: str
    command: str
    cwd: str
    pid: int | None
    start_time: float | None
    started_at: float
    status: JobStatus = "running"
    exit_code: int | None = None
    finished_at: float | None = None


JobTable = Mapping[str, JobRecord]


def fold_jobs(table: JobTable, events: Iterable[Event]) -> JobTable:
    """``table`` with the job events among ``events`` applied (others ignored); pure."""
    out: dict[str, JobRecord] | None = None
    for event in events:
        if not event.type.startswith("job."):
            continue
        out = dict(table) if out is None else out
        body = payload(event)
        if isinstance(body, JobStarted):
            out[body.job_id] = JobRecord(
                body.job_id, body.owner, body.command, body.cwd, body.pid, body.start_time, event.ts
            )
        elif isinstance(body, JobFinished) and body.job_id in out:
            status: Any = body.status
            out[body.job_id] = out[body.job_id]._replace(
                status=status, exit_code=body.exit_code, finished_at=event.ts
            )
    return table if out is None else MappingProxyType(out)


@dataclass(frozen=True)
class JobView:
    """One job as ``teamctl jobs`` shows it."""

    job_id: str
    owner: str
    command: str
    cwd: str
    pid: int | None
    status: str
    exit_code: int | None
    started_at: float
    finished_at: float | None
    log_path: str

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def job_views(table: JobTable, jobs_dir: Path, *, limit: int = 50) -> tuple[JobView, ...]:
    """Running jobs first, then the most recently finished, at most ``limit``."""
    records = sorted(
        table.values(), key=lambda r: (r.status != "running", -(r.finished_at or r.started_at))
    )
    return tuple(
        JobView(
            r.job_id,
            r.owner,
            r.command,
            r.cwd,
            r.pid,
            r.status,
            r.exit_code,
            r.started_at,
            r.finished_at,
            str(jobs_dir / f"{r.job_id}.log"),
        )
        for r in records[:limit]
    )


def notification(record: JobRecord, log_path: Path) -> MessageDraft:
    """The ``task_notification`` for a finished job."""
    head, tail, size = head_tail(log_path)
    text = (
        f"Background job {record.job_id} {record.status} (exit code {record.exit_code}): "
        f"{record.command}\nFull output ({size} bytes): {log_path}\n--- head ---\n{head}"
    )
    if tail:
        text += f"\n--- tail ---\n{tail}"
    body = {
        "job_id": record.job_id,
        "status": record.status,
        "exit_code": record.exit_code,
        "command": record.command,
        "log_path": str(log_path),
        "head": head,
        "tail": tail,
        "size": size,
        "text": text,
    }
    return MessageDraft(to=record.owner, type="task_notification", body=body)
