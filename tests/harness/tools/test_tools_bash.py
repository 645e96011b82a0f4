"""The bash tool: real subprocesses, timeouts, bounded output, leftover children, background."""

from __future__ import annotations

import hashlib
import os
import re
import select
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from harness.ports import ToolResultBlock, ToolUseBlock
from harness.tools.base import ToolContext
from harness.tools.bash import BashInput, BashTool
from harness.tools.executor import ToolExecutor
from harness.tools.registry import ToolRegistry
from tests.support.fakes import AllowAll


class FakeJobRunner:
    def __init__(self) -> None:
        self.started: list[tuple[str, Path, str, float | None]] = []

    def start(self, command: str, *, cwd: Path, agent: str, timeout_s: float | None) -> str:
        self.started.append((command, cwd, agent, timeout_s))
        return "started job j1"


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "repo"
    root.mkdir()
    return ToolContext(agent="ann", root=root, cwd=root, outputs_dir=tmp_path / "outputs")


def bash(ctx: ToolContext, tool: BashTool | None = None, **input: Any) -> ToolResultBlock:
    ex = ToolExecutor(ToolRegistry([tool or BashTool()]), AllowAll())
    [result] = ex.run_batch([ToolUseBlock(id="b", name="bash", input=input)], ctx)
    return result


def pids_in(text: str) -> list[int]:
    return [int(p) for p in re.findall(r"^PID (\d+)$", text, re.MULTILINE)]


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` has exited (a pidfd becomes readable); waits, never polls."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "poll"])
def test_output_and_exit_codes(ctx: ToolContext, use_pidfd: bool) -> None:
    tool = BashTool(use_pidfd=use_pidfd)
    ok = bash(ctx, tool, command="echo out; echo err >&2")
    assert not ok.is_error and ok.content == "out\nerr\n[exit code 0]"
    failed = bash(ctx, tool, command="echo nope; exit 7")
    assert failed.is_error and failed.content == "nope\n[exit code 7]"
    silent = bash(ctx, tool, command="true")
    assert silent.content == "(no output)\n[exit code 0]"
    signalled = bash(ctx, tool, command="kill -KILL $$")
    assert signalled.is_error and "[killed by signal 9]" in signalled.content


def test_environment_is_non_interactive(ctx: ToolContext) -> None:
    (ctx.root / "sub").mkdir()
    ctx.cwd = ctx.root / "sub"
    r = bash(
        ctx,
        command=(
            'echo "$GIT_TERMINAL_PROMPT|$PAGER|$GIT_PAGER"; pwd; readlink /proc/self/fd/0; '
            "cat; [ -t 1 ] || echo no-tty; "
            'read -r -a f < /proc/$$/stat; [ "${f[4]}" = "$$" ] && echo own-group'
        ),
    )
    lines = r.content.splitlines()
    assert lines[0] == "0|cat|cat"
    assert lines[1] == str(ctx.root / "sub")
    assert lines[2] == "/dev/null"
    assert lines[3:5] == ["no-tty", "own-group"]


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "poll"])
def test_a_hanging_command_times_out_and_its_group_is_killed(
    ctx: ToolContext, use_pidfd: bool
) -> None:
    tool = BashTool(kill_grace_s=0.5, use_pidfd=use_pidfd)
    r = bash(ctx, tool, command="echo PID $$; sleep 1000 & echo PID $!; wait", timeout_s=0.5)
    assert r.is_error and "[timed out after 0.5 s; the process group was killed]" in r.content
    pids = pids_in(r.content)
    assert len(pids) == 2
    assert all(wait_gone(pid) for pid in pids)


def test_a_command_ignoring_sigterm_is_killed(ctx: ToolContext) -> None:
    tool = BashTool(kill_grace_s=0.2)
    r = bash(ctx, tool, command="trap '' TERM; echo PID $$; while :; do :; done", timeout_s=0.3)
    assert "timed out" in r.content
    [pid] = pids_in(r.content)
    assert wait_gone(pid)


def test_closing_stdout_does_not_escape_the_timeout(ctx: ToolContext) -> None:
    r = bash(ctx, command="echo PID $$; exec >/dev/null 2>&1; sleep 1000", timeout_s=0.3)
    assert "timed out" in r.content
    [pid] = pids_in(r.content)
    assert wait_gone(pid)


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "poll"])
def test_a_background_child_holding_the_pipe_does_not_hang_the_call(
    ctx: ToolContext, use_pidfd: bool
) -> None:
    # timeout_s is long: returning without "timed out" proves the pipe grace path ended it
    tool = BashTool(use_pidfd=use_pidfd)
    r = bash(ctx, tool, command="sleep 1000 & echo PID $!", timeout_s=120)
    assert not r.is_error, r.content
    assert "timed out" not in r.content
    assert "[exit code 0]" in r.content and "background processes" in r.content
    [child] = pids_in(r.content)
    assert wait_gone(child)


def test_a_detached_leftover_child_is_killed_too(ctx: ToolContext) -> None:
    r = bash(ctx, command="sleep 1000 >/dev/null 2>&1 & echo PID $!")
    assert r.content.endswith("[exit code 0]")
    [child] = pids_in(r.content)
    assert wait_gone(child)


def test_50_mb_of_output_is_bounded_in_memory_and_spilled_whole(ctx: ToolContext) -> None:
    size = 50 * 1024 * 1024
    tracemalloc.start()
    try:
        r = bash(
            ctx, command=f"echo START; head -c {size} /dev/zero | tr '\\0' 'x'; echo; echo END"
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024
    assert len(r.content) < 40_000
    assert r.content.startswith("START\nxxx")
    assert r.content.endswith("END\n[exit code 0]")
    match = re.search(r"full output saved to (\S+) \.\.\.", r.content)
    assert match is not None
    spill = Path(match.group(1))
    assert spill.parent == ctx.outputs_dir
    assert spill.stat().st_size == size + len("START\n\nEND\n")
    digest = hashlib.sha256()
    with spill.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    assert spill.name == digest.hexdigest()
    assert [p.name for p in spill.parent.iterdir()] == [spill.name]  # no temp file left


def test_long_output_keeps_head_and_tail(ctx: ToolContext) -> None:
    tool = BashTool(head_bytes=100, tail_bytes=100)
    r = bash(ctx, tool, command="seq 1 100000")
    assert r.content.startswith("1\n2\n3\n")
    assert r.content.endswith("99999\n100000\n[exit code 0]")
    assert "bytes omitted" in r.content


def test_background_without_a_job_runner_is_refused(ctx: ToolContext) -> None:
    r = bash(ctx, command="sleep 1", run_in_background=True)
    assert r.is_error and "no background job runner" in r.content


def test_background_with_a_job_runner_starts_a_job(ctx: ToolContext) -> None:
    runner = FakeJobRunner()
    ctx.job_runner = runner
    assert bash(ctx, command="make", run_in_background=True).content == "started job j1"
    bash(ctx, command="make test", run_in_background=True, timeout_s=30)
    assert runner.started == [
        ("make", ctx.root, "ann", None),
        ("make test", ctx.root, "ann", 30.0),
    ]


def test_permission_request_and_limits(ctx: ToolContext) -> None:
    req = BashTool().permission_request(BashInput(command="git status"), ctx)
    assert (req.tool, req.kind, req.target, req.read_only) == ("bash", "shell", "git status", False)
    too_long = bash(ctx, command="true", timeout_s=601)
    assert too_long.is_error and "timeout_s" in too_long.content


def test_cwd_outside_the_root_is_refused(ctx: ToolContext, tmp_path: Path) -> None:
    ctx.cwd = tmp_path
    r = bash(ctx, command="pwd")
    assert r.is_error and "outside the working root" in r.content
