"""Background jobs under the bubblewrap sandbox: real bwrap, real processes, real journal.

Skipped only when ``Sandbox`` reports that bubblewrap cannot run on this machine.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from actors.jobs.actor import JobsHandle, JobsRunner
from harness.settings import SandboxSettings
from harness.shell.sandbox import Sandbox
from tests.actors.jobs.cron_support import stop_actors
from tests.actors.jobs.test_jobs import Env, alive, read_line, wait_gone

__all__ = ["stop_actors"]

pytestmark = pytest.mark.sandbox


@pytest.fixture
def env(tmp_path: Path, stop_actors: None) -> Iterator[Env]:
    root = tmp_path / "repo"
    root.mkdir()
    e = Env(root)
    yield e
    pykka.ActorRegistry.stop_all()
    e.journal.close()


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the root and outside /tmp (the sandbox's /tmp is private)."""
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    d = Path(tempfile.mkdtemp(prefix="jobs-outside-", dir=base))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start(env: Env, *, enabled: bool | None = None) -> JobsHandle:
    settings = SandboxSettings() if enabled is None else SandboxSettings(enabled=enabled)
    return env.start(sandbox=Sandbox(settings), root=env.root)


def pids_with(token: str, unless: str) -> list[int]:
    """Live processes whose command line contains ``token`` but not ``unless`` (seen from the
    host's PID namespace)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if (
                token.encode() in cmdline
                and unless.encode() not in cmdline
                and alive(int(entry.name))
            ):
                found.append(int(entry.name))
    return found


def test_a_sandboxed_job_cannot_write_outside_its_root(env: Env, outside: Path) -> None:
    jobs = start(env)
    target = outside / "f"
    command = (
        f"echo x > {target}; echo outside=$?; echo in > inside.txt; "
        "for i in $(seq 1 2000); do echo line-$i; done; exit 4"
    )
    view = jobs.start_job(command, cwd=env.root, owner="alice")
    [msg] = env.wait_for_message("alice")
    body = msg.body
    assert (body["job_id"], body["status"], body["exit_code"]) == (view.job_id, "exited", 4)
    assert "Read-only file system" in body["head"]
    assert "outside=1" in body["head"]
    assert body["tail"].endswith("line-2000\n")
    assert not target.exists()
    assert (env.root / "inside.txt").read_text() == "in\n"


def test_a_job_outlives_the_thread_that_asked_for_it(env: Env) -> None:
    # --die-with-parent follows the spawning thread: the job is spawned on the actor's thread,
    # so a caller thread that has ended does not take the job with it.
    runner = JobsRunner(start(env))
    fifo = env.root / "go"
    os.mkfifo(fifo)
    texts: list[str] = []

    def ask() -> None:
        command = f"read line < {fifo}; echo got-$line"
        texts.append(runner.start(command, cwd=env.root, agent="lead", timeout_s=None))

    caller = threading.Thread(target=ask)
    caller.start()
    caller.join()
    assert texts and "Started background job" in texts[0]
    with open(fifo, "w") as fh:  # blocks until the job (still alive) opens it
        fh.write("go\n")
    [msg] = env.wait_for_message("lead")
    assert (msg.body["status"], msg.body["exit_code"]) == ("exited", 0)
    assert msg.body["head"] == "got-go\n"


def detached_job(env: Env, jobs: JobsHandle, owner: str) -> tuple[int, int]:
    """Start a job whose grandchild leaves the group AND clears its environment (so only the
    PID namespace can take it down); returns (job pid, grandchild pid)."""
    token = f"{secrets.randbelow(10**8):08d}"  # sleep takes only a number
    ready = env.root / f"ready-{token}"
    os.mkfifo(ready)
    command = (
        f"setsid env -i sh -c 'echo up > {ready}; exec sleep 300.{token}' </dev/null & sleep 300"
    )
    view = jobs.start_job(command, cwd=env.root, owner=owner)
    assert read_line(ready) == "up"
    # the grandchild (sh, then sleep: same pid), not the job's bwrap and bash that name it too
    [grandchild] = pids_with(f"300.{token}", unless="setsid")
    return view.pid or 0, grandchild


def test_stopping_a_job_kills_its_detached_grandchild(env: Env) -> None:
    jobs = start(env)
    pid, grandchild = detached_job(env, jobs, "alice")
    assert alive(grandchild)
    assert jobs.stop_jobs_of("alice", grace_s=0.5)
    wait_gone(pid)
    wait_gone(grandchild)
    assert not alive(grandchild)
    [msg] = env.wait_for_message("alice")
    assert msg.body["status"] == "killed"


def test_stopping_the_actor_kills_the_sandboxed_tree(env: Env) -> None:
    jobs = start(env)
    pid, grandchild = detached_job(env, jobs, "lead")
    jobs.stop()
    wait_gone(pid)
    wait_gone(grandchild)
    assert not alive(pid) and not alive(grandchild)


def test_a_job_in_a_worktree_is_rooted_there(env: Env) -> None:
    worktree = env.root / ".worktrees" / "w1"
    (worktree / "sub").mkdir(parents=True)
    jobs = start(env)
    # (under /tmp the checkout around the worktree is bwrap's scratch tmpfs: the write may
    # "succeed" there, but it never reaches the checkout)
    command = "echo a > ../../../main.txt; echo b > here.txt"
    jobs.start_job(command, cwd=worktree / "sub", owner="alice")
    env.wait_for_message("alice")
    assert not (env.root / "main.txt").exists()
    assert (worktree / "sub" / "here.txt").read_text() == "b\n"


def test_with_the_sandbox_disabled_a_job_writes_where_it_is_allowed_to(
    env: Env, outside: Path
) -> None:
    jobs = start(env, enabled=False)
    jobs.start_job(f"echo x > {outside / 'f'}", cwd=env.root, owner="alice")
    [msg] = env.wait_for_message("alice")
    assert (msg.body["status"], msg.body["exit_code"]) == ("exited", 0)
    assert (outside / "f").read_text() == "x\n"
