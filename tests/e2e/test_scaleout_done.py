"""Issue 16's "Done when", end to end (docs/SCALE-OUT.md): two separate clones of one repository
connected to one team on a real ``nats-server`` from the wheel, on loopback, driven only through
the real ``teamctl`` in subprocesses.

1. Eight racing CLI workers, four in each clone, each a loop of ``teamctl tasks --json`` /
   ``task claim`` / ``task complete``, drain a board of 12 tasks: every task is claimed by one
   owner and completed once, ``replay --verify`` is clean in both clones, and after the server
   restarts on the same store every task is still completed in both.
2. A headless team run in clone one with a teammate joined from clone two (``teamctl join``):
   the team completes its tasks, and clone one's main after ``teamctl worktree merge`` holds the
   commit made in clone two (its branch travelled through the shared bare remote). w2 holds its
   task until all clone one hosts is at rest, so the run must wait for a teammate hosted
   elsewhere; the last test checks that rule of ``TeamRuntime.is_idle`` without timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.actors.runtime.runtime_support import stop_actors
from tests.e2e.team_support import model_env, teamctl, write_script
from tests.support.nats_server import NatsServer, running_server

__all__ = ["stop_actors"]

TASKS = 12
WORKERS_PER_CLONE = 4
CALL_TIMEOUT = 120.0
"""Bound on one ``teamctl`` call (a hung call fails the test instead of hanging it)."""
RACE_TIMEOUT = 240.0
"""Bound on the whole race (every worker has finished by then, or the test fails)."""
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _shared_remote(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(bare remote, clone one, clone two): ``main`` with one commit on the remote, each clone
    its own checkout of it (as on two hosts)."""
    bare = tmp_path / "shared.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    clones = []
    for name in ("host_one", "host_two"):
        path = tmp_path / name
        subprocess.run(["git", "clone", "-q", str(bare), str(path)], check=True)
        _git(path, "config", "user.name", "Test")
        _git(path, "config", "user.email", "test@example.com")
        if not clones:
            (path / "README.md").write_text("hello\n")
            _git(path, "add", "README.md")
            _git(path, "commit", "-q", "-m", "initial")
            _git(path, "push", "-q", "-u", "origin", "main")
        clones.append(path.resolve())
    return bare, clones[0], clones[1]


def _call(root: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``teamctl ARGS`` in ``root`` as a subprocess (no backend in the environment: each clone's
    ``.team/settings.json`` names it, as ``init --backend`` recorded it)."""
    proc = teamctl(root, *args, stdin=subprocess.PIPE if stdin is not None else None)
    try:
        out, err = proc.communicate(stdin, timeout=CALL_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _ok(root: Path, *args: str, stdin: str | None = None) -> str:
    done = _call(root, *args, stdin=stdin)
    assert done.returncode == 0, f"teamctl {' '.join(args)} in {root.name}:\n{done.stderr}"
    return done.stdout


def _tasks(root: Path) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = json.loads(_ok(root, "tasks", "--json"))
    return listed


def _events(server: NatsServer, team: str) -> list[Any]:
    from mailboxes.journal.nats import NatsEventStore

    store = NatsEventStore(server.url, team)
    try:
        return list(store.read_from(1))
    finally:
        store.close()


def _start_worker(root: Path, name: str, seed: int) -> subprocess.Popen[str]:
    """A racing CLI worker process in ``root`` (tests/e2e/scaleout_worker.py): teamctl's own
    commands, ``tasks`` / ``task claim`` / ``task complete``, in a loop until none is ready."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.scaleout_worker", name, str(seed)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_clones_drain_twelve_tasks_with_eight_racing_cli_processes(
    tmp_path: Path, server: NatsServer
) -> None:
    _, one, two = _shared_remote(tmp_path)
    backend = f"{server.url}/race"
    assert "initialised team 'race'" in _ok(one, "init", "--backend", backend)
    assert "connected to existing team race" in _ok(two, "init", "--backend", backend)
    lines = "".join(json.dumps({"subject": f"task {i}"}) + "\n" for i in range(1, TASKS + 1))
    _ok(one, "task", "import", "-", stdin=lines)
    ids = sorted(t["id"] for t in _tasks(two))
    assert len(ids) == TASKS

    workers = {
        f"{root.name}_w{i}": (root, i) for root in (one, two) for i in range(WORKERS_PER_CLONE)
    }
    procs = {name: _start_worker(root, name, seed=i) for name, (root, i) in workers.items()}
    reports: dict[str, dict[str, list[str]]] = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=RACE_TIMEOUT)
            assert proc.returncode == 0, f"{name}:\n{err}"
            reports[name] = json.loads(out.splitlines()[-1])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    # Each task completed exactly once, by the one worker whose claim won.
    assert sorted(t for r in reports.values() for t in r["completed"]) == ids
    events = _events(server, "race")
    claimed = [(e.data["task_id"], e.data["owner"]) for e in events if e.type == "task.claimed"]
    completed = [(e.data["task_id"], e.data["owner"]) for e in events if e.type == "task.completed"]
    assert sorted(t for t, _ in completed) == ids
    assert sorted(t for t, _ in claimed) == ids  # no claim was released or taken twice
    assert dict(claimed) == dict(completed)  # completed by the owner that claimed it
    won = {task_id: name for name, report in reports.items() for task_id in report["completed"]}
    assert dict(completed) == won
    assert not [e for e in events if e.type == "task.released"]
    for root in (one, two):
        assert {t["id"]: t["status"] for t in _tasks(root)} == dict.fromkeys(ids, "completed")
        _ok(root, "replay", "--verify")

    # The server restarts on the same store: every task is still completed, in both clones.
    server.restart()
    for root in (one, two):
        tasks = _tasks(root)
        assert {t["id"]: (t["status"], t["owner"]) for t in tasks} == {
            task_id: ("completed", owner) for task_id, owner in completed
        }
        _ok(root, "replay", "--verify")
    assert len(_events(server, "race")) == len(events)


# --- 2. a headless run in clone one, a teammate joined from clone two ---------------------------


GATE = "gate"
"""The FIFO w2 waits on, in its task's worktree (the bash sandbox confines it there)."""
GATE_WAIT = f"while [ ! -p {GATE} ]; do sleep 0.05; done; cat {GATE}; rm {GATE}"


def _worker_rules(name: str, *, gated: bool = False) -> list[dict[str, Any]]:
    """Teammate ``name`` (w1 in clone one, w2 in clone two): each task is a file written in the
    task's worktree, then ``complete_task`` (which commits it and pushes the branch to the
    shared remote). ``gated``, it first waits, in a ``bash`` call, until the test writes
    ``released TASK`` into the FIFO ``GATE`` of its worktree."""
    work = [
        {"name": "write_file", "input": {"path": "{id}.txt", "content": f"{{id}} by {name}\n"}},
        {"name": "complete_task", "input": {"task_id": "{id}", "summary": "wrote {id}.txt"}},
    ]
    claimed = r"You now hold task (?P<id>task_\d+) \(claim"
    if not gated:
        rules: list[dict[str, Any]] = [{"match": claimed, "tool_uses": work}]
    else:
        rules = [
            {
                "match": claimed,
                "tool_uses": [{"name": "bash", "input": {"command": GATE_WAIT}}],
            },
            {"match": r"released (?P<id>task_\d+)", "tool_uses": work},
        ]
    return [
        *rules,
        {"match": "(?s).", "text": "OK.", "priority": -1},
        {"match": "^$", "text": "OK.", "priority": -2},
    ]


def _shop_script() -> dict[str, Any]:
    return {
        "agents": {
            "lead": {
                "rules": [
                    {
                        "match": "^Build the shop",
                        "text": "Splitting the work.",
                        "tool_uses": [
                            {
                                "name": "create_task",
                                "input": {"subject": "cart", "role": "general"},
                            },
                            {"name": "create_task", "input": {"subject": "till", "role": "remote"}},
                            {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "Work."}},
                        ],
                    },
                    {"match": "(?s).", "text": "Noted.", "priority": -1},
                    {"match": "^$", "text": "Noted.", "priority": -2},
                ]
            },
            "w1": {"rules": _worker_rules("w1")},
            # w2 (clone two) holds its task until all that clone one hosts is idle: the run
            # must wait for a teammate hosted elsewhere that holds a task.
            "w2": {"rules": _worker_rules("w2", gated=True)},
        }
    }


class _Lines:
    """The lines a subprocess writes to one pipe, read by a thread; ``wait`` blocks (bounded)
    until a line satisfies a predicate, woken by each new line."""

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

    def wait(self, predicate: Callable[[str], bool], timeout: float) -> bool:
        with self._cond:
            self._cond.wait_for(
                lambda: self._closed or any(predicate(line) for line in self.lines), timeout
            )
            return any(predicate(line) for line in self.lines)

    def text(self) -> str:
        self._thread.join(30)
        return "\n".join(self.lines)


def _release_when_clone_one_rests(server: NatsServer, gate: Path) -> None:
    """Once w1 (clone one) has completed task_1 and both it and the lead are idle, everything
    clone one hosts is at rest: write ``released task_2`` into ``gate`` for w2 (clone two).
    Polls the team's stream (bounded) for that moment."""
    from mailboxes.journal.nats import NatsEventStore

    deadline = time.monotonic() + 120
    store = NatsEventStore(server.url, "shop")
    try:
        events: list[Any] = []
        while time.monotonic() < deadline:
            try:
                events += store.read_from(len(events) + 1)
            except TimeoutError:  # a request slower than its timeout on a loaded machine
                continue
            status = {
                e.data["name"]: e.data["status"]
                for e in events
                if e.type == "member.status_changed"
            }
            done = any(e.type == "task.completed" and e.data["task_id"] == "task_1" for e in events)
            if done and status.get("w1") == status.get("lead") == "idle":
                break
            time.sleep(0.05)  # polling interval of a bounded wait on the stream
        else:
            return
    finally:
        store.close()
    os.mkfifo(gate)  # w2 holds task_2, so its worktree exists
    with gate.open("w") as fifo:  # blocks until w2's ``cat`` reads (or ``_open_gate``)
        fifo.write("released task_2\n")


def _open_gate(gate: Path) -> None:
    """Unblock both ends of ``gate``: a writer waiting for a reader, a reader waiting for a
    writer."""
    for flags in (os.O_RDONLY, os.O_WRONLY):
        with contextlib.suppress(OSError):  # no one at the other end
            os.close(os.open(gate, flags | os.O_NONBLOCK))


def test_a_headless_run_with_a_teammate_joined_from_another_clone_merges_its_commit(
    tmp_path: Path, server: NatsServer
) -> None:
    bare, one, two = _shared_remote(tmp_path)
    backend = f"{server.url}/shop"
    (one / ".team").mkdir()
    (one / ".team" / "settings.json").write_text(json.dumps({"team": {"worktree_per_task": True}}))
    _ok(one, "init", "--backend", backend)
    _ok(two, "init", "--backend", backend)
    gate = two / ".worktrees" / "task_2" / GATE
    script = write_script(tmp_path / "script.yaml", _shop_script())
    release = threading.Thread(target=_release_when_clone_one_rests, args=(server, gate))
    with model_env(script, via_api=True) as model:
        join = teamctl(
            two,
            *("join", "w2", "--role", "remote", "--worktree-per-task"),
            *("--permission-mode", "bypassPermissions", "--output-format", "stream-json"),
            env_extra=model.env,
        )
        assert join.stdout is not None and join.stderr is not None
        join_out, join_err = _Lines(join.stdout), _Lines(join.stderr)
        try:
            assert join_err.wait(lambda line: "w2 joined the team" in line, 60), join_err.text()
            run = teamctl(
                one,
                *("run", "--headless", "--output-format", "stream-json", "--timeout", "120"),
                *("--permission-mode", "bypassPermissions", "Build the shop"),
                env_extra=model.env,
            )
            release.start()
            out, err = run.communicate(timeout=180)
            assert run.returncode == 0, err
            result = json.loads(out.splitlines()[-1])
            assert result["subtype"] == "success" and result["tasks"] == {"completed": 2}, result
            # the run is over: retire the joined teammate (from either clone) and see it leave
            _ok(one, "stop", "w2")
            join.wait(60)
        finally:
            _open_gate(gate)  # whatever happened, nobody stays blocked on the FIFO
            if join.poll() is None:
                join.kill()
            join.wait(30)
            release.join(30)
        assert join.returncode == 0, join_err.text()
        assert any('"complete_task"' in line for line in join_out.text().splitlines())

    completed = {
        e.data["task_id"]: e.data for e in _events(server, "shop") if e.type == "task.completed"
    }
    assert {t: c["owner"] for t, c in completed.items()} == {"task_1": "w1", "task_2": "w2"}
    remote_tip = completed["task_2"]["commit"]
    assert completed["task_2"]["remote"] == "origin"
    assert _git(bare, "rev-parse", "refs/heads/wt/task_2") == remote_tip
    assert not (one / ".worktrees" / "task_2").exists()  # made and worked in clone two only
    assert (two / ".worktrees" / "task_2" / "task_2.txt").read_text() == "task_2 by w2\n"

    merged = _ok(one, "worktree", "merge", "--all")
    assert "fetched from origin" in merged, merged
    assert (one / "task_1.txt").read_text() == "task_1 by w1\n"
    assert (one / "task_2.txt").read_text() == "task_2 by w2\n"
    # clone two's commit itself (not a copy of its work) is in clone one's main
    subprocess.run(["git", "merge-base", "--is-ancestor", remote_tip, "HEAD"], cwd=one, check=True)
    for root in (one, two):
        _ok(root, "replay", "--verify")


def test_a_run_is_not_idle_while_a_teammate_hosted_elsewhere_has_work(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    """The rule the headless run above relies on, without timing: a teammate that another live
    process hosts (its lease held, here by the test) and that holds a task, or could take a ready
    one of its role, keeps the runtime from being idle; once its lease is gone, it does not."""
    from actors.board.state import TeamState
    from harness.model.scripted import ScriptedModel
    from mailboxes.events import EventDraft, MemberSpawned, draft
    from tests.actors.runtime.runtime_support import runtime, team_repo

    root = team_repo(tmp_path)
    lead = {"agents": {"lead": {"rules": [{"match": "(?s).", "text": "Noted."}]}}}
    rt = runtime(root, ScriptedModel(lead))
    stop_actors.append(rt)
    rt.start()

    def spawned(state: TeamState) -> list[EventDraft]:
        body = MemberSpawned(name="w2", role="remote", prompt="Work.")
        return [draft(body.TYPE, "lead", body)]

    rt.board.execute(spawned)  # on the team, hosted by no process of this runtime
    rt.board.create("for another role", role="other")
    assert rt.wait_idle(timeout=30)
    with rt.team.liveness.hold("w2"):  # as `teamctl join w2` on another host holds it
        assert rt.wait_idle(timeout=30)  # nothing w2 could take
        rt.board.create("till", role="remote")
        assert not rt.is_idle()  # a ready task w2 could take
        rt.board.claim("task_2", "w2")
        assert not rt.is_idle()  # w2 holds it
    assert rt.wait_idle(timeout=30)  # w2's host is gone: its claim is not work going on
