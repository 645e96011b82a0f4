"""The process plumbing of background jobs: spawn, identify, wait for, kill, and read the log.

The job table folded from the journal and its views are in ``actors.jobs.table``; the actor that
ties both together is ``actors.jobs.actor``.

A job runs as ``/bin/bash -c COMMAND`` in a new session (so its own process group, pgid = pid),
stdin ``/dev/null``, stdout and stderr appended straight to its log file by the kernel (no pump
thread; the log is created with mode 0600), and the environment of the ``bash`` tool (no model
credentials, the settings' ``env``: ``harness.shell.environment``) plus
``TEAMCTL_JOB_ID=<job_id>``.

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
from collections.abc import Sequence
from pathlib import Path

from harness.shell.environment import CommandEnv
from harness.tools.bash import SHELL_ENV

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
    command_env: CommandEnv | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own session with output appended to ``log_path`` (mode 0600)
    and ``MARKER=mark`` in its environment, which ``command_env`` builds (default: without the
    model credentials). ``wrapper`` goes before the shell (the sandbox's ``bwrap ... --``); with
    ``--die-with-parent`` in it, the job dies when the calling *thread* ends, so call this from
    a thread that lives as long as the job."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    env = (command_env or CommandEnv()).environment(extra={**SHELL_ENV, MARKER: mark})
    try:
        os.fchmod(fd, 0o600)  # a log left by an older version may be readable by others
        return subprocess.Popen(
            [*wrapper, shell, "-c", command],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=env,
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
