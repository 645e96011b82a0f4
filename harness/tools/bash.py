"""``bash``: run a shell command in its own process group, bounded in time and in memory.

The command runs as ``/bin/bash -c COMMAND`` in ``ctx.cwd`` with stdin ``/dev/null``, stdout and
stderr merged into one pipe, no controlling terminal (new session) and a non-interactive
environment: the agent's command environment (``ctx.command_env()``, see
``harness.shell.environment``: no model credentials, the settings' ``env``) plus ``SHELL_ENV``. Output is read as it streams into a ``BoundedCapture`` (head + tail in memory, the
whole stream spilled to a content-addressed file when it is large).

End of a call: when the main process exits we wait at most ``pipe_grace_s`` for the pipe to close
(a background child may hold it open forever); on timeout the group gets SIGTERM, then SIGKILL
after ``kill_grace_s``. Either way the whole group is SIGKILLed before returning, so nothing the
command started in its group outlives the call (long-running work belongs in
``run_in_background``).

Sandbox: with a ``harness.shell.sandbox.Sandbox`` (given to the tool, or put in ``ctx.extra`` under
``SANDBOX_KEY`` by the runtime) the shell runs under bubblewrap, in its own PID namespace.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from harness.shell.environment import child_environment
from harness.shell.sandbox import SANDBOX_KEY, Sandbox
from harness.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolOutput
from harness.tools.outputs import (
    DEFAULT_HEAD_BYTES,
    DEFAULT_TAIL_BYTES,
    BoundedCapture,
    CapturedOutput,
)
from harness.tools.paths import resolve_in_root
from teamctl_base.models import Frozen

SHELL_ENV = {"GIT_TERMINAL_PROMPT": "0", "PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb"}
READ_CHUNK = 65536


@dataclass(frozen=True)
class CommandResult:
    """How a foreground command ended."""

    output: CapturedOutput
    exit_code: int | None
    timed_out: bool
    pipe_held: bool  # the main process exited but something kept the output pipe open

    def render(self, timeout_s: float) -> str:
        text = self.output.render().rstrip("\n") or "(no output)"
        if self.timed_out:
            status = f"[timed out after {timeout_s:g} s; the process group was killed]"
        elif self.exit_code is not None and self.exit_code < 0:
            status = f"[killed by signal {-self.exit_code}]"
        else:
            status = f"[exit code {self.exit_code}]"
        if self.pipe_held:
            status += (
                "\n[background processes still holding the output were killed; "
                "use run_in_background=true for long-running commands]"
            )
        return f"{text}\n{status}"


def run_command(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    outputs_dir: Path | None,
    shell: str = "/bin/bash",
    kill_grace_s: float = 2.0,
    pipe_grace_s: float = 0.25,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
    use_pidfd: bool = True,
    wrapper: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run ``command`` to completion or timeout; never leaves a member of its group alive.

    ``use_pidfd=False`` forces the portable fallback (poll every 50 ms for the exit).
    ``wrapper`` is put before the shell (the sandbox's ``bwrap ... --``). ``env``: the
    environment (default: ``child_environment()``, this one without the model credentials), to
    which ``SHELL_ENV`` is added.
    """
    capture = BoundedCapture(outputs_dir, head_bytes=head_bytes, tail_bytes=tail_bytes)
    proc = subprocess.Popen(
        [*wrapper, shell, "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**(child_environment() if env is None else env), **SHELL_ENV},
        start_new_session=True,
        close_fds=True,
    )
    assert proc.stdout is not None
    pipe = proc.stdout.fileno()
    pidfd = _pidfd_open(proc.pid) if use_pidfd else None
    deadline = time.monotonic() + timeout_s
    try:
        exited, eof = _pump(proc, pipe, pidfd, capture, deadline, pipe_grace_s)
        pipe_held = exited and not eof
        if not exited:
            # the loop ended on the deadline, or on EOF with the process still running
            remaining = deadline - time.monotonic() if eof else 0.0
            exited = _wait_exit(proc, pidfd, max(0.0, remaining))
        timed_out = not exited
        if timed_out:
            _signal_group(proc.pid, signal.SIGTERM)
            _wait_exit(proc, pidfd, kill_grace_s)
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        _drain(pipe, capture)
        result = capture.close()
    except BaseException:
        capture.discard()
        raise
    finally:
        _signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=kill_grace_s)
        proc.stdout.close()
        if pidfd is not None:
            os.close(pidfd)
    code = None if timed_out else proc.returncode
    return CommandResult(result, code, timed_out, pipe_held=pipe_held)


def _pump(
    proc: subprocess.Popen[bytes],
    pipe: int,
    pidfd: int | None,
    capture: BoundedCapture,
    deadline: float,
    pipe_grace_s: float,
) -> tuple[bool, bool]:
    """Read the pipe until EOF, the deadline, or ``pipe_grace_s`` after the process exited.

    Returns ``(exited, eof)``. Waits on the pipe and a pidfd together, so it wakes exactly when
    output arrives or the process ends (a 50 ms poll is the fallback without pidfds).
    """
    os.set_blocking(pipe, False)
    exited = eof = False
    with selectors.DefaultSelector() as sel:
        sel.register(pipe, selectors.EVENT_READ, "out")
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        while not eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            wait = remaining if pidfd is not None or exited else min(remaining, 0.05)
            for key, _ in sel.select(wait):
                if key.data == "out":
                    eof = _read_some(pipe, capture)
                    if eof:
                        sel.unregister(pipe)
                elif not exited:
                    sel.unregister(key.fd)
                    exited = True
                    deadline = min(deadline, time.monotonic() + pipe_grace_s)
            if pidfd is None and not exited and proc.poll() is not None:
                exited = True
                deadline = min(deadline, time.monotonic() + pipe_grace_s)
    return exited, eof


def _read_some(pipe: int, capture: BoundedCapture) -> bool:
    """Read what is available; returns True at EOF."""
    try:
        chunk = os.read(pipe, READ_CHUNK)
    except BlockingIOError:
        return False
    if not chunk:
        return True
    capture.feed(chunk)
    return False


def _drain(pipe: int, capture: BoundedCapture) -> None:
    """Take whatever is still buffered in the pipe, without blocking."""
    with contextlib.suppress(OSError):
        while chunk := os.read(pipe, READ_CHUNK):
            capture.feed(chunk)


def _pidfd_open(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _wait_exit(proc: subprocess.Popen[bytes], pidfd: int | None, timeout: float) -> bool:
    """Wait up to ``timeout`` for the process to exit, without reaping it when a pidfd exists.

    Not reaping keeps the group id reserved until we have SIGKILLed the whole group.
    """
    if pidfd is None:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    with selectors.DefaultSelector() as sel:
        sel.register(pidfd, selectors.EVENT_READ)
        return bool(sel.select(timeout))


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class BashInput(Frozen):
    command: str = Field(min_length=1, description="The shell command (run with /bin/bash -c).")
    timeout_s: float = Field(120, gt=0, le=600, description="Seconds before it is killed.")
    run_in_background: bool = Field(
        False, description="Start it as a background job; you are notified when it finishes."
    )
    description: str | None = Field(None, description="A few words on what it does.")


class BashTool(Tool[BashInput]):
    name = "bash"
    description = (
        "Run a shell command with /bin/bash -c in the working directory. stdin is /dev/null and "
        "there is no terminal, so interactive commands fail. stdout and stderr are merged; long "
        "output is truncated to head and tail with the full text saved to a file. Processes left "
        "running when the command ends are killed: use run_in_background=true for servers, "
        "watchers and long builds."
    )
    input_model = BashInput

    def __init__(
        self,
        *,
        shell: str = "/bin/bash",
        kill_grace_s: float = 2.0,
        pipe_grace_s: float = 0.25,
        head_bytes: int = DEFAULT_HEAD_BYTES,
        tail_bytes: int = DEFAULT_TAIL_BYTES,
        use_pidfd: bool = True,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.shell = shell
        self.use_pidfd = use_pidfd
        self.kill_grace_s = kill_grace_s
        self.pipe_grace_s = pipe_grace_s
        self.head_bytes = head_bytes
        self.tail_bytes = tail_bytes

    def permission_request(self, args: BashInput, ctx: ToolContext) -> PermissionRequest:
        return PermissionRequest(tool=self.name, kind="shell", target=args.command)

    def run(self, args: BashInput, ctx: ToolContext) -> ToolOutput:
        cwd = resolve_in_root(str(ctx.cwd), ctx)
        if not cwd.is_dir():
            raise ToolError(f"working directory {ctx.cwd} does not exist")
        if args.run_in_background:
            return self._start_job(args, ctx, cwd)
        sandbox = self.sandbox or ctx.extra.get(SANDBOX_KEY)
        wrapper: list[str] = []
        notice = None
        if isinstance(sandbox, Sandbox):
            wrapper, notice = sandbox.prefix(root=ctx.root, cwd=cwd)
        result = run_command(
            args.command,
            cwd=cwd,
            timeout_s=args.timeout_s,
            outputs_dir=ctx.outputs_dir,
            shell=self.shell,
            kill_grace_s=self.kill_grace_s,
            pipe_grace_s=self.pipe_grace_s,
            head_bytes=self.head_bytes,
            tail_bytes=self.tail_bytes,
            use_pidfd=self.use_pidfd,
            wrapper=wrapper,
            env=ctx.command_env().environment(),
        )
        failed = result.timed_out or result.exit_code != 0
        text = result.render(args.timeout_s)
        return ToolOutput(f"{notice}\n{text}" if notice else text, is_error=failed)

    def _start_job(self, args: BashInput, ctx: ToolContext, cwd: Path) -> ToolOutput:
        if ctx.job_runner is None:
            raise ToolError(
                "run_in_background is not available here (no background job runner is "
                "configured). Run the command in the foreground with a timeout instead."
            )
        timeout = args.timeout_s if "timeout_s" in args.model_fields_set else None
        text = ctx.job_runner.start(args.command, cwd=cwd, agent=ctx.agent, timeout_s=timeout)
        return ToolOutput(text)
