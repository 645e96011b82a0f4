"""The host's commit service (actors/runtime/commit_service.py, commit_wire.py): runtime
processes of one host send their claims, completions and status changes to the process serving
the team, and get back what a local commit would have answered; without a service, or after
losing it mid-request, they commit themselves and never do a write twice. Real processes, a real
Unix socket, a real journal."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from actors.board.board import Board
from actors.board.projections import Projections
from actors.runtime.commit_service import (
    COMMIT_SERVICE_LOG,
    MAX_RESTARTS,
    AnswerLost,
    CommitClient,
    CommitServer,
    ServiceHandOff,
    ServiceUnavailable,
    service_address,
)
from actors.runtime.commit_wire import claim_spec, complete_spec, task_from_wire, task_to_wire
from actors.runtime.commits import SharedCommits
from mailboxes.events import Event, MemberStatusChanged
from mailboxes.journal.store import FileJournal

DEADLINE_S = 60.0
SPAWN = multiprocessing.get_context("spawn")


def _board(root: Path, actor: str = "runtime") -> Board:
    return Board(FileJournal(root / ".team"), projections=Projections(root), actor=actor)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / ".team").mkdir()
    lead = _board(tmp_path, "lead")
    for n in range(1, 13):
        # task_<n> for n = 4, 8, 12 waits for the task before it
        lead.create(f"task {n}", blocked_by=[f"task_{n - 1}"] if n % 4 == 0 else [])
    return tmp_path


@pytest.fixture
def served(root: Path) -> Iterator[CommitServer]:
    server = CommitServer(
        service_address(root / ".team" / "journal.jsonl"), SharedCommits(_board(root)).serve
    )
    assert server.start()
    yield server
    server.stop()


def _events(root: Path, kind: str) -> list[Event]:
    return [e for e in FileJournal(root / ".team").read_from(1) if e.type == kind]


# --- the wire ---------------------------------------------------------------------------------


def test_a_task_reads_back_from_the_wire_equal_and_of_the_same_types(root: Path) -> None:
    board = _board(root, "lead")
    board.update("task_4", metadata={"workflow": {"tools": ["read_file"]}, "n": 1.5})
    got = board.claim_next("ann")
    done = board.complete(got.unwrap().id, "ann", got.epoch, "ok")
    for task in (*board.list(), done.task):
        back = task_from_wire(json.loads(json.dumps(task_to_wire(task))))
        assert back == task
        assert [type(v) for v in back] == [type(v) for v in task]
        assert type(back.plan) is type(task.plan)


def test_an_answer_that_is_not_a_whole_task_is_refused_not_filled_in(root: Path) -> None:
    """A task of the wrong length (another version's, or damaged) is a bad answer: the client
    closes and decides the write itself, rather than fill the missing fields with defaults."""
    board = _board(root, "lead")
    fields = task_to_wire(board.list()[0])
    for bad in (fields[:-1], [*fields, 0], {"id": "task_1"}, None):
        with pytest.raises(ValueError, match="not a task"):
            task_from_wire(bad)


# --- through the service ----------------------------------------------------------------------


def _worker(root: str, name: str, address: bytes, barrier: Barrier, out: Any) -> None:
    board = _board(Path(root), name)
    commits = SharedCommits(board, remote=CommitClient(address))
    barrier.wait(DEADLINE_S)
    done = []
    working = MemberStatusChanged(name=name, status="working")
    while (task := commits.claim_next(name, also=(working,))) is not None:
        completion = commits.complete(task.id, name, task.epoch, f"done by {name}")
        assert completion.task.status == "completed" and completion.task.owner == name
        done.append((task.id, list(completion.unblocked)))
    commits.set_status(name, "idle")
    out.put((name, done))


def test_processes_claim_and_complete_through_the_service_each_task_once(
    root: Path, served: CommitServer
) -> None:
    names = [f"w{i}" for i in range(4)]
    barrier, out = SPAWN.Barrier(len(names)), SPAWN.Queue()
    children = [
        SPAWN.Process(target=_worker, args=(str(root), n, served.address, barrier, out))
        for n in names
    ]
    for child in children:
        child.start()
    reports = dict(out.get(timeout=DEADLINE_S) for _ in names)
    for child in children:
        child.join(DEADLINE_S)
        assert child.exitcode == 0

    done = [tid for tasks in reports.values() for tid, _ in tasks]
    assert sorted(done) == sorted(f"task_{n}" for n in range(1, 13))  # each once
    claims = _events(root, "task.claimed")
    assert len(claims) == 12 and sorted(e.data["task_id"] for e in claims) == sorted(done)
    for name, tasks in reports.items():
        assert [e.data["task_id"] for e in claims if e.data["owner"] == name] == [
            tid for tid, _ in tasks
        ]
    # What each completion answered is what it journaled (unblocked, summary)
    for event in _events(root, "task.completed"):
        owner = event.data["owner"]
        assert event.data["summary"] == f"done by {owner}"
        assert [event.data["task_id"], event.data["unblocked"]] in [list(t) for t in reports[owner]]
    unblocked = {t for tasks in reports.values() for _, ids in tasks for t in ids}
    assert unblocked == {"task_4", "task_8", "task_12"}
    # The claim's ``also`` went in its commit; the final status change went through too.
    statuses = _events(root, "member.status_changed")
    assert sorted(e.data["status"] for e in statuses) == ["idle"] * 4 + ["working"] * 12
    # Every write went to the service: 13 claims (the last finds nothing) + 12 completions +
    # 4 status changes, none committed by a worker itself.
    assert served.requests == 12 + len(names) + 12 + len(names)
    state = _board(root).refresh()
    assert all(t.status == "completed" for t in state.tasks.values())
    # The projections were written by the serving process.
    assert json.loads((root / ".tasks" / "task_12.json").read_text())["status"] == "completed"


def test_writes_served_together_share_one_commit_and_never_take_the_same_task(
    root: Path,
) -> None:
    commits = SharedCommits(_board(root))
    answer = commits.serve(
        [
            claim_spec("ann", role=None),
            claim_spec("bob", role=None, exclude=["task_2"]),
            claim_spec("ann", role=None),  # ann holds one after the first
            {"op": "claim_next", "owner": 7},  # a bad spec fails alone
            complete_spec("task_9", "cy", 0, "no"),  # not claimed: refused, alone
        ]
    )
    first, second, third, bad, refused = answer["answers"]
    assert task_from_wire(first["ok"]).id == "task_1"
    assert task_from_wire(second["ok"]).id == "task_3"
    assert third == {"ok": None}
    assert "bad write" in bad["error"]
    assert "cy does not hold task task_9" in refused["error"]
    claims = _events(root, "task.claimed")
    assert [(e.data["owner"], e.data["task_id"]) for e in claims] == [
        ("ann", "task_1"),
        ("bob", "task_3"),
    ]
    assert claims[0].ts == claims[1].ts  # one commit
    assert answer["seq"] == claims[1].seq


def test_a_refusal_from_the_service_is_raised_as_the_local_command_raises_it(
    root: Path, served: CommitServer
) -> None:
    from actors.errors import NotOwner

    commits = SharedCommits(_board(root, "ann"), remote=CommitClient(served.address))
    with pytest.raises(NotOwner, match="ann does not hold task task_2"):
        commits.complete("task_2", "ann", 0, "not mine")
    assert served.requests == 1
    assert _events(root, "task.completed") == []


def test_without_a_service_a_process_commits_itself(root: Path) -> None:
    address = service_address(root / ".team" / "journal.jsonl")
    commits = SharedCommits(_board(root, "ann"), remote=CommitClient(address))
    with pytest.raises(ServiceUnavailable):
        CommitClient(address).call([])
    task = commits.claim_next("ann")
    assert task is not None and task.id == "task_1" and task.owner == "ann"
    assert commits.complete("task_1", "ann", task.epoch, "ok").task.status == "completed"


def test_when_the_service_stops_its_clients_carry_on_by_themselves(
    root: Path, served: CommitServer
) -> None:
    board = _board(root, "ann")
    commits = SharedCommits(board, remote=CommitClient(served.address))
    task = commits.claim_next("ann")
    assert task is not None and served.requests == 1
    served.stop()
    assert commits.complete(task.id, "ann", task.epoch, "ok").task.status == "completed"
    assert board.state.task(task.id).status == "completed"
    assert len(_events(root, "task.completed")) == 1


def test_a_board_reads_what_the_service_committed_for_it(root: Path, served: CommitServer) -> None:
    board = _board(root, "ann")
    seen = board.refresh().seq
    commits = SharedCommits(board, remote=CommitClient(served.address))
    task = commits.claim_next("ann")
    assert task is not None
    # Nothing folded here yet; the first read catches up with the service's commit.
    assert board.state.seq > seen
    assert board.get(task.id).owner == "ann"
    assert board.state.holding("ann") == board.get(task.id)


# --- a lost answer ----------------------------------------------------------------------------


def _dying_server(root: str, ready: Any, commits_before_dying: int) -> None:
    """Serves the team; after ``commits_before_dying`` commits, the next one is made and the
    process is killed before it answers."""
    commits = SharedCommits(_board(Path(root)))
    made = [0]

    def serve(specs: Any) -> Any:
        answer = commits.serve(specs)
        made[0] += 1
        if made[0] > commits_before_dying:
            os.kill(os.getpid(), signal.SIGKILL)
        return answer

    server = CommitServer(service_address(Path(root) / ".team" / "journal.jsonl"), serve)
    assert server.start()
    ready.set()
    signal.pause()


def _start_dying_server(root: Path, commits_before_dying: int) -> Any:
    ready = SPAWN.Event()
    proc = SPAWN.Process(target=_dying_server, args=(str(root), ready, commits_before_dying))
    proc.start()
    assert ready.wait(DEADLINE_S)
    return proc


def test_a_claim_committed_before_its_answer_was_lost_is_taken_once(root: Path) -> None:
    server = _start_dying_server(root, 0)
    board = _board(root, "ann")
    commits = SharedCommits(
        board, remote=CommitClient(service_address(root / ".team" / "journal.jsonl"))
    )
    task = commits.claim_next("ann")
    server.join(DEADLINE_S)
    assert server.exitcode == -signal.SIGKILL
    assert task is not None and task.id == "task_1" and task.owner == "ann"
    assert [e.data["task_id"] for e in _events(root, "task.claimed")] == ["task_1"]


def test_a_completion_committed_before_its_answer_was_lost_is_made_once(root: Path) -> None:
    server = _start_dying_server(root, 3)  # claims task_1, task_2, task_3; dies on completing
    board = _board(root, "ann")
    commits = SharedCommits(
        board, remote=CommitClient(service_address(root / ".team" / "journal.jsonl"))
    )
    for tid in ("task_1", "task_2"):
        done = commits.claim_next("ann")
        assert done is not None and done.id == tid
        commits.complete(tid, "ann", done.epoch, "ok")
    held = commits.claim_next("ann")
    assert held is not None and held.id == "task_3"
    completion = commits.complete("task_3", "ann", held.epoch, "ok")
    server.join(DEADLINE_S)
    assert server.exitcode == -signal.SIGKILL
    assert completion.task.status == "completed" and completion.unblocked == ("task_4",)
    completed = [e.data["task_id"] for e in _events(root, "task.completed")]
    assert completed == ["task_1", "task_2", "task_3"]


def test_a_stopped_service_is_waited_for_a_while_then_left_and_does_not_redo_it(
    root: Path,
) -> None:
    server = _start_dying_server(root, 10**6)
    address = service_address(root / ".team" / "journal.jsonl")
    try:
        os.kill(server.pid, signal.SIGSTOP)  # Ctrl-Z in the serving terminal, say
        commits = SharedCommits(_board(root, "ann"), remote=CommitClient(address, timeout_s=0.5))
        assert commits.set_status("ann", "working")  # waited, then made here
        assert commits.set_status("ann", "idle")
        os.kill(server.pid, signal.SIGCONT)
        # The service is back, and answers again, after the two requests it skipped.
        assert SharedCommits(_board(root, "bob"), remote=CommitClient(address)).set_status(
            "bob", "idle"
        )
    finally:
        server.kill()
        server.join(DEADLINE_S)
    statuses = [(e.data["name"], e.data["status"]) for e in _events(root, "member.status_changed")]
    assert statuses == [("ann", "working"), ("ann", "idle"), ("bob", "idle")]


# --- whose service ----------------------------------------------------------------------------


def _as_nobody() -> None:
    os.setgid(65534)
    os.setuid(65534)


def _connect_as_nobody(address: bytes, out: Any) -> None:
    _as_nobody()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address)
    try:
        sock.sendall(b'\x00\x00\x00\x0d{"writes":[]}')
        out.put(sock.recv(100))  # b"": closed without an answer
    except OSError:
        out.put(b"")  # closed before the request was sent


def _serve_as_nobody(address: bytes, ready: Any) -> None:
    _as_nobody()
    server = CommitServer(address, lambda specs: {"seq": 0, "answers": []})
    assert server.start()
    ready.set()
    signal.pause()


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as another user")


@needs_root
def test_the_service_does_not_serve_another_user(root: Path, served: CommitServer) -> None:
    out = SPAWN.Queue()
    proc = SPAWN.Process(target=_connect_as_nobody, args=(served.address, out))
    proc.start()
    assert out.get(timeout=DEADLINE_S) == b""  # closed without an answer
    proc.join(DEADLINE_S)
    assert served.requests == 0


@needs_root
def test_a_client_does_not_use_a_service_another_user_runs(root: Path) -> None:
    address = service_address(root / ".team" / "journal.jsonl")
    ready = SPAWN.Event()
    proc = SPAWN.Process(target=_serve_as_nobody, args=(address, ready))
    proc.start()
    try:
        assert ready.wait(DEADLINE_S)
        with pytest.raises(ServiceUnavailable, match="another user"):
            CommitClient(address).call([])
        commits = SharedCommits(_board(root, "ann"), remote=CommitClient(address))
        task = commits.claim_next("ann")  # committed here instead
        assert task is not None and [e.data["owner"] for e in _events(root, "task.claimed")] == [
            "ann"
        ]
    finally:
        proc.kill()
        proc.join(DEADLINE_S)


def test_a_team_made_again_at_the_same_path_has_another_address(root: Path) -> None:
    before = service_address(root / ".team" / "journal.jsonl")
    journal = root / ".team" / "journal.jsonl"
    copy = journal.with_name("journal.copy")
    copy.write_bytes(journal.read_bytes())  # a new file (inode) while the old one still exists
    os.replace(copy, journal)
    assert service_address(root / ".team" / "journal.jsonl") != before


# --- the service in a process of its own ------------------------------------------------------

HOST = [sys.executable, "-m", "actors.runtime.commit_host"]


@pytest.fixture
def team_root(tmp_path: Path) -> Path:
    """A git repository with ``teamctl init`` done and three tasks."""
    from actors.factory import init_team, open_team

    root = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    with open_team(root, actor="lead") as team:
        for n in range(1, 4):
            team.board.create(f"task {n}")
    return root


def _hand_off(root: Path, command: list[str] | None = None) -> ServiceHandOff:
    address = service_address(root / ".team" / "journal.jsonl")
    serve = SharedCommits(_board(root)).serve
    if command is None:  # as a runtime makes it
        service = ServiceHandOff.for_team(address, root, fallback=serve)
    else:
        service = ServiceHandOff(
            address, command, log_path=root / ".team" / COMMIT_SERVICE_LOG, fallback=serve
        )
    assert service.start()
    return service


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie nobody reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_the_service_process_starts_when_a_client_comes_and_stops_when_asked(
    team_root: Path,
) -> None:
    service = _hand_off(team_root)
    address = service_address(team_root / ".team" / "journal.jsonl")
    try:
        assert service.child is None  # nobody connected yet: nothing started
        commits = SharedCommits(_board(team_root, "ann"), remote=CommitClient(address))
        task = commits.claim_next("ann")
        assert task is not None and task.owner == "ann"
        assert commits.remote is not None and commits.remote.answered == 1
        child = service.child
        assert child is not None and service.in_process is None
        assert child.pid != os.getpid() and child.poll() is None  # the parent's copy is closed
        # Its stderr log is private, like the MCP servers' and the jobs' logs.
        assert (team_root / ".team" / COMMIT_SERVICE_LOG).stat().st_mode & 0o777 == 0o600
        # A Ctrl-C at the terminal is not for it: it is in a session of its own, and ignores it.
        assert os.getsid(child.pid) == child.pid != os.getsid(0)
        os.kill(child.pid, signal.SIGINT)
        assert commits.complete(task.id, "ann", task.epoch, "done").task.status == "completed"
        assert commits.remote.answered == 2
    finally:
        service.stop()
    assert child.returncode == 0  # asked to stop (its input closed), not killed
    with pytest.raises(ServiceUnavailable):
        CommitClient(address).call([])
    second = _hand_off(team_root)  # the address is free again
    second.stop()
    assert second.child is None


def test_the_service_process_ends_when_its_runtime_is_killed(team_root: Path) -> None:
    """The runtime holding the service is SIGKILLed: the service process sees its input close
    and exits, and the address is free for the next runtime."""
    holder = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from tests.actors.runtime.test_commit_service import _hand_off
        service = _hand_off(Path(sys.argv[1]))
        print("held", flush=True)
        sys.stdin.readline()  # the test's client has been answered
        print(service.child.pid, flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder, str(team_root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        address = service_address(team_root / ".team" / "journal.jsonl")
        client = CommitClient(address)
        assert client.call([])["answers"] == []
        assert proc.stdin is not None
        proc.stdin.write(b"answered\n")
        proc.stdin.flush()
        serving = int(proc.stdout.readline())
        assert serving not in (proc.pid, os.getpid())
        proc.kill()
        proc.wait()
        _until(lambda: _gone(serving), "the service process outlived its runtime")
        client.close()
        with pytest.raises(ServiceUnavailable):
            CommitClient(address).call([])
    finally:
        proc.kill()
        proc.wait()


def test_a_service_process_that_died_is_started_again_at_the_next_connection(
    team_root: Path,
) -> None:
    """The runtime keeps no copy of the socket it handed over, so a client that comes while the
    service process is gone is refused at once and commits itself, instead of waiting in a
    queue nobody accepts from; the runtime takes the address back and the next client gets a
    new service process."""
    service = _hand_off(team_root)
    address = service_address(team_root / ".team" / "journal.jsonl")
    try:
        assert CommitClient(address).call([])["answers"] == []
        first = service.child
        assert first is not None and service.starts == 1
        first.kill()
        commits = SharedCommits(
            _board(team_root, "ann"), remote=CommitClient(address, timeout_s=DEADLINE_S)
        )
        started = time.monotonic()
        task = commits.claim_next("ann")  # through a new process, or by itself: never stuck
        assert task is not None and task.owner == "ann"
        assert time.monotonic() - started < DEADLINE_S / 2

        def answered() -> bool:
            try:
                return CommitClient(address, timeout_s=DEADLINE_S).call([])["answers"] == []
            except (ServiceUnavailable, AnswerLost):
                return False

        _until(answered, "no service process was started again")
        again = service.child
        assert again is not None and again.pid != first.pid and again.poll() is None
        assert service.starts == 2
    finally:
        service.stop()
    assert again.returncode == 0


def test_a_service_process_that_keeps_exiting_is_given_up_on(team_root: Path) -> None:
    """A service process that exits at once (a broken install, say) is started again at most
    ``MAX_RESTARTS`` times; then nobody serves and every client commits itself."""
    service = _hand_off(team_root, [sys.executable, "-c", "raise SystemExit(1)"])
    address = service_address(team_root / ".team" / "journal.jsonl")
    try:

        def given_up() -> bool:
            try:
                CommitClient(address, timeout_s=DEADLINE_S).call([])
            except ServiceUnavailable:
                return service.starts == MAX_RESTARTS + 1
            except AnswerLost:
                pass  # connected, and the process exited without answering
            return False

        _until(given_up, "the runtime kept starting a service process that exits at once")
        time.sleep(0.2)
        assert service.starts == MAX_RESTARTS + 1
        assert service.child is not None and service.child.returncode == 1
    finally:
        service.stop()


def test_a_service_process_that_cannot_start_is_served_from_this_process(
    team_root: Path,
) -> None:
    service = _hand_off(team_root, [str(team_root / "no-such-program")])
    try:
        client = CommitClient(service_address(team_root / ".team" / "journal.jsonl"))
        commits = SharedCommits(_board(team_root, "ann"), remote=client)
        task = commits.claim_next("ann")
        assert task is not None and client.answered == 1
        assert service.child is None and service.in_process is not None
    finally:
        service.stop()


def test_a_service_process_that_does_not_stop_is_killed(team_root: Path) -> None:
    stubborn = [sys.executable, "-c", "import signal, time; time.sleep(120)"]
    service = _hand_off(team_root, stubborn)
    try:
        with pytest.raises((ServiceUnavailable, AnswerLost)):
            CommitClient(
                service_address(team_root / ".team" / "journal.jsonl"), timeout_s=0.2
            ).call([])
        _until(lambda: service.child is not None, "no process was started for the client")
    finally:
        service.stop(timeout_s=0.5)
    assert service.child is not None and service.child.returncode == -signal.SIGKILL


def test_the_service_process_refuses_bad_arguments_and_a_folder_without_a_team(
    tmp_path: Path,
) -> None:
    for args in ([str(tmp_path)], [str(tmp_path), "three"]):
        usage = subprocess.run([*HOST, *args], capture_output=True, text=True, timeout=60)
        assert usage.returncode == 2 and usage.stderr.startswith("usage:"), args
        assert len(usage.stderr.splitlines()) == 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(b"\0teamctl-test-" + os.urandom(8).hex().encode())
    listener.listen(1)
    with listener:
        fd = listener.fileno()
        bad = subprocess.run(
            [*HOST, str(tmp_path), str(fd)],
            capture_output=True,
            text=True,
            timeout=60,
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
        )
    assert bad.returncode == 1
    assert bad.stderr.startswith("commit service: cannot open the team:")
    assert len(bad.stderr.strip().splitlines()) == 1


# --- the runtime ------------------------------------------------------------------------------


def test_the_first_runtime_serves_and_a_joined_one_claims_through_it(tmp_path: Path) -> None:
    """The first runtime holds the service; the first process that connects makes it start a
    process of its own, which commits the joined runtime's claim and stops with the runtime."""
    from actors.runtime.runtime import TeamRuntime
    from tests.actors.team_support import Held, real_team

    team = real_team(tmp_path / "repo")
    model = Held()
    joined = None
    try:
        service = team.rt.commit_service
        assert service is not None and team.rt.commits.remote is None
        assert service.child is None  # nobody has connected: no process started
        joined = TeamRuntime(
            team.root, model=model, join="bob", jobs=False, worktrees=False, fsync_transcripts=False
        ).start()
        assert joined.commit_service is None and joined.commits.remote is not None
        team.board.create("for bob")
        assert model.wait_called("bob"), "bob never started on its task"
        claims = [e for e in team.events("task.claimed") if e.data["owner"] == "bob"]
        assert [e.data["task_id"] for e in claims] == ["task_1"]
        assert joined.commits.remote.answered > 0  # committed by the service, not by bob's process
        child = service.child
        assert child is not None and child.poll() is None and child.pid != os.getpid()
        assert service.in_process is None
        assert joined.board.state.task("task_1").owner == "bob"
    finally:
        model.release.set()
        if joined is not None:
            joined.stop()
        team.close()
    assert child.returncode == 0  # stopped with the runtime, asked and not killed


def test_a_team_set_not_to_share_commits_has_no_service(tmp_path: Path) -> None:
    from tests.actors.team_support import real_team

    team = real_team(tmp_path / "repo", {"team": {"commit_service": False}})
    try:
        assert team.rt.commit_service is None and team.rt.commits.remote is None
        with pytest.raises(ServiceUnavailable):
            CommitClient(service_address(team.root / ".team" / "journal.jsonl")).call([])
    finally:
        team.close()
