"""Races between processes and threads, each ended with the nothing-lost oracle.

- claims: up to 32 processes (and 32 threads) race for one task and then drain a backlog;
- large lines: processes append 256 KiB events at once; ``flock`` serialises them (``PIPE_BUF``
  atomicity is a pipe rule and says nothing about regular files), so no line is interleaved;
- duplicated deliveries: two processes deliver the same message ids; the reader processes
  each id once, also when both processes are forced onto the same Maildir file names (each
  collision in ``tmp/`` or ``new/`` is retried under a fresh name, never a crash or an overwrite);
- a zombie teammate: liveness is process *death*, not responsiveness. A SIGSTOPped holder keeps
  its lease and its claim; once killed its claim is reaped and re-claimed, and a late completion
  with the old epoch (from a worker of that teammate coming back) is refused by fencing.
"""

from __future__ import annotations

import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from actors.board.board import Board
from actors.board.projections import Projections
from mailboxes.journal.store import FileJournal
from mailboxes.liveness import FlockLiveness
from mailboxes.maildir import Maildir
from tests.support.oracle import assert_nothing_lost, journal_events
from tests.support.procs import children

BACKLOG = 40

CLAIMER = r"""
import json, sys
from pathlib import Path
from actors.board.board import Board
from actors.board.projections import Projections
from mailboxes.journal.store import FileJournal
root, name = Path(sys.argv[1]), sys.argv[2]
board = Board(FileJournal(root / ".team"), projections=Projections(root), actor=name)
print("ready", flush=True)
sys.stdin.readline()
out = {"attempted": [], "acked": [], "first": None, "drained": []}
got = board.claim("task_1", name, op_id=f"{name}-race")
out["attempted"].append(f"{name}-race")
if got.ok:
    out["acked"].append(f"{name}-race")
    out["first"] = got.epoch
    board.complete("task_1", name, got.epoch, op_id=f"{name}-race-done")
    out["attempted"].append(f"{name}-race-done")
    out["acked"].append(f"{name}-race-done")
n = 0
while True:
    n += 1
    op = f"{name}-claim-{n}"
    out["attempted"].append(op)
    got = board.claim_next(name, op_id=op)
    if not got.ok:
        break
    out["acked"].append(op)
    out["attempted"].append(op + "-done")
    board.complete(got.unwrap().id, name, got.epoch, op_id=op + "-done")
    out["acked"].append(op + "-done")
    out["drained"].append(got.unwrap().id)
print(json.dumps(out))
"""


def seed(root: Path, tasks: int) -> None:
    (root / ".team").mkdir(parents=True, exist_ok=True)
    board = Board(FileJournal(root / ".team"), projections=Projections(root), actor="lead")
    board.create("contended", op_id="seed-0")
    for n in range(1, tasks):
        deps = [f"task_{n}"] if n % 5 == 0 else []  # chains: completions unblock work mid-race
        board.create(f"backlog {n}", blocked_by=deps, op_id=f"seed-{n}")


def check_claim_race(root: Path, results: list[dict[str, Any]], tasks: int, **kw: Any) -> None:
    winners = [r["first"] for r in results if r["first"] is not None]
    assert winners == [1], "exactly one process wins the contended task, at epoch 1"
    drained = sorted(t for r in results for t in r["drained"])
    assert drained == sorted(f"task_{n}" for n in range(2, tasks + 1)), "each task once"
    seeds = {f"seed-{n}" for n in range(tasks)}
    attempted = seeds | {op for r in results for op in r["attempted"]}
    acked = seeds | {op for r in results for op in r["acked"]}
    assert_nothing_lost(root, attempted=attempted, acked=acked, **kw)
    state_events, _ = journal_events(root / ".team" / "journal.jsonl")
    assert sum(e.type == "task.completed" for e in state_events) == tasks


@pytest.mark.parametrize("processes", [32])
def test_32_processes_race_for_one_task_then_drain_a_backlog(
    tmp_path: Path, processes: int
) -> None:
    seed(tmp_path, BACKLOG)
    argv = [(str(tmp_path), f"w{i}") for i in range(processes)]
    with children(CLAIMER, argv) as group:
        group.ready()
        group.go()
        results = group.results()
    check_claim_race(tmp_path, results, BACKLOG, pids=group.pids)


@pytest.mark.deep
@pytest.mark.parametrize("round_no", range(5))
def test_32_processes_race_over_a_long_backlog_deep(tmp_path: Path, round_no: int) -> None:
    seed(tmp_path, 400)
    argv = [(str(tmp_path), f"w{i}") for i in range(32)]
    with children(CLAIMER, argv) as group:
        group.ready()
        group.go()
        results = group.results(timeout=600)
    check_claim_race(tmp_path, results, 400, pids=group.pids)


def test_32_threads_with_their_own_journal_handles_race(tmp_path: Path) -> None:
    seed(tmp_path, BACKLOG)
    start = threading.Barrier(32)

    def worker(name: str) -> dict[str, Any]:
        board = Board(
            FileJournal(tmp_path / ".team"), projections=Projections(tmp_path), actor=name
        )
        out: dict[str, Any] = {"attempted": [], "acked": [], "first": None, "drained": []}
        start.wait(timeout=60)
        got = board.claim("task_1", name, op_id=f"{name}-race")
        out["attempted"].append(f"{name}-race")
        if got.ok:
            out["first"] = got.epoch
            out["acked"].append(f"{name}-race")
            board.complete("task_1", name, got.epoch)
        while True:
            op = f"{name}-{len(out['attempted'])}"
            out["attempted"].append(op)
            got = board.claim_next(name, op_id=op)
            if not got.ok:
                return out
            out["acked"].append(op)
            board.complete(got.unwrap().id, name, got.epoch)
            out["drained"].append(got.unwrap().id)

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(worker, [f"t{i}" for i in range(32)]))
    check_claim_race(tmp_path, results, BACKLOG)


APPENDER = r"""
import json, sys
from pathlib import Path
from actors.board.board import Board
from mailboxes.journal.store import FileJournal
root, name, count, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
board = Board(FileJournal(root / ".team"), actor=name)
print("ready", flush=True)
sys.stdin.readline()
made = []
for n in range(count):
    token = f"<{name}:{n}>"
    text = (token * (size // len(token) + 1))[:size]
    made.append(board.create(f"{name} {n}", text, op_id=f"{name}-{n}").id)
print(json.dumps(made))
"""


def test_concurrent_appenders_of_256_kib_lines_never_interleave(tmp_path: Path) -> None:
    (tmp_path / ".team").mkdir()
    size, count, writers = 256 * 1024, 4, 4
    argv = [(str(tmp_path), f"p{i}", str(count), str(size)) for i in range(writers)]
    with children(APPENDER, argv) as group:
        group.ready()
        group.go()
        made = group.results()
    events, problems = journal_events(tmp_path / ".team" / "journal.jsonl")
    assert problems == [] and len(events) == writers * count
    for event in events:
        name, n = event.data["subject"].split()
        assert event.op_id == f"{name}-{n}"
        token = f"<{name}:{n}>"
        assert event.data["description"] == (token * (size // len(token) + 1))[:size]
        assert len(event.data["description"]) == size
    assert sorted(t for ids in made for t in ids) == sorted(e.data["task_id"] for e in events)
    ops = {f"p{i}-{n}" for i in range(writers) for n in range(count)}
    assert_nothing_lost(tmp_path, attempted=ops, acked=ops, projections=False, pids=group.pids)


DUPLICATOR = r"""
import json, sys
from pathlib import Path
from mailboxes.maildir import Maildir, MessageDraft

class Replayed:
    # An id source that hands out the same ids in every process: a resent message.
    def __init__(self, ids): self.ids = iter(ids)
    def new_id(self): return next(self.ids)

root, ids = Path(sys.argv[1]), sys.argv[2].split(",")
box = Maildir(root, ids=Replayed(ids))
print("ready", flush=True)
sys.stdin.readline()
sent = [box.deliver("lead", MessageDraft.text("ann", f"job {i}"))[0].id for i in ids]
print(json.dumps(sent))
"""


def test_a_message_delivered_twice_by_two_processes_is_processed_once(tmp_path: Path) -> None:
    root = tmp_path / ".team" / "mailboxes"
    box = Maildir(root)
    for agent in ("lead", "ann"):
        box.ensure_inbox(agent)
    ids = [f"m{n:03d}" for n in range(30)]
    with children(DUPLICATOR, [(str(root), ",".join(ids))] * 2) as group:
        group.ready()
        group.go()
        sent = group.results()
    assert sent == [ids, ids]
    assert box.counts("ann") == (60, 0)  # both copies landed: delivery is at-least-once
    processed: list[str] = []
    while batch := box.pending("ann", max_messages=7):
        processed += [m.id for m in batch]
        box.ack("ann", [m.id for m in batch])
    assert processed == ids, "each id processed once, oldest first"
    # A copy arriving after its id was acked is dropped on the next read, not processed.
    late = Maildir(root, ids=_Fixed("m007"))
    late.deliver("lead", _text("ann", "job m007 again"))
    assert box.pending("ann") == [] and box.counts("ann") == (0, 61)
    assert_nothing_lost(tmp_path, sent=ids, delivered=ids, projections=False, pids=group.pids)


COLLIDER = r"""
import json, sys
from pathlib import Path
from mailboxes.maildir import Maildir, MessageDraft, UniqueNames

class Replayed:
    def __init__(self, ids): self.ids = iter(ids)
    def new_id(self): return next(self.ids)

class SameFirstName:
    # Every process proposes one fixed name per message first; fresh ones only after a collision.
    def __init__(self): self.tried, self.fresh = set(), UniqueNames(host="same-host")
    def __call__(self, ns, msg_id):
        if msg_id in self.tried:
            return self.fresh(ns, msg_id)
        self.tried.add(msg_id)
        return f"{1:020d}.0-0-same-host.{msg_id}"

root, ids = Path(sys.argv[1]), sys.argv[2].split(",")
box = Maildir(root, ids=Replayed(ids), names=SameFirstName())
print("ready", flush=True)
sys.stdin.readline()
sent = [box.deliver("lead", MessageDraft.text("ann", f"job {i}"))[0].id for i in ids]
print(json.dumps(sent))
"""


def test_two_processes_forced_onto_the_same_file_names_both_deliver(tmp_path: Path) -> None:
    root = tmp_path / ".team" / "mailboxes"
    box = Maildir(root)
    for agent in ("lead", "ann"):
        box.ensure_inbox(agent)
    ids = [f"m{n:03d}" for n in range(30)]
    with children(COLLIDER, [(str(root), ",".join(ids))] * 2) as group:
        group.ready()
        group.go()
        sent = group.results()
    assert sent == [ids, ids], "no delivery crashed on a taken name"
    # Whichever process came second for an id found the name taken (in tmp/ or new/) and
    # retried: both copies are there, none replaced the other.
    names = sorted((root / "ann" / "new").iterdir())
    assert len(names) == 60 and list((root / "ann" / "tmp").iterdir()) == []
    assert sum(n.name.startswith(f"{1:020d}.0-0-same-host.") for n in names) == 30
    processed: list[str] = []
    while batch := box.pending("ann", max_messages=7):
        processed += [m.id for m in batch]
        box.ack("ann", [m.id for m in batch])
    assert sorted(processed) == ids, "each id processed once"
    assert box.counts("ann") == (0, 60)
    assert_nothing_lost(tmp_path, sent=ids, delivered=ids, projections=False, pids=group.pids)


def test_a_name_left_in_tmp_by_a_dead_sender_is_skipped_not_fatal(tmp_path: Path) -> None:
    root = tmp_path / "mailboxes"
    fixed = f"{1:020d}.0-0-h.m1"
    box = Maildir(root, ids=_Fixed("m1"), names=lambda ns, msg_id: fixed)
    box.ensure_inbox("ann")
    (root / "ann" / "tmp" / fixed).write_bytes(b"half a message")
    with pytest.raises(OSError, match="file names in a row were taken"):
        box.deliver("lead", _text("ann", "hello"))  # a name source that never changes: bounded
    assert box.counts("ann") == (0, 0)
    assert (root / "ann" / "tmp" / fixed).read_bytes() == b"half a message"
    tries = iter([fixed, f"{2:020d}.0-1-h.m1"])
    retrying = Maildir(root, ids=_Fixed("m1"), names=lambda ns, msg_id: next(tries))
    [sent] = retrying.deliver("lead", _text("ann", "hello"))
    assert [m.body for m in box.pending("ann")] == [sent.body]
    assert sorted(p.name for p in (root / "ann" / "new").iterdir()) == [f"{2:020d}.0-1-h.m1"]
    assert (root / "ann" / "tmp" / fixed).read_bytes() == b"half a message"


def test_default_names_carry_integer_nanoseconds_pid_and_host(tmp_path: Path) -> None:
    import os
    import socket

    box = Maildir(tmp_path)
    box.ensure_inbox("ann")
    first, second = (box.deliver("lead", _text("ann", "hi"))[0].id for _ in range(2))
    names = sorted(p.name for p in (tmp_path / "ann" / "new").iterdir())
    host = "".join(c if c.isalnum() or c == "-" else "-" for c in socket.gethostname())[:40]
    for name, msg_id in zip(names, (first, second), strict=True):
        ns, middle, tail = name.split(".")
        pid, seq, host_part = middle.split("-", 2)
        assert len(ns) == 20 and pid == str(os.getpid()) and seq.isdigit()
        assert host_part == host and tail == msg_id
    assert names[0].split(".")[0] < names[1].split(".")[0], "time orders one sender's names"


class _Fixed:
    def __init__(self, msg_id: str) -> None:
        self.msg_id = msg_id

    def new_id(self) -> str:
        return self.msg_id


def _text(to: str, text: str) -> Any:
    from mailboxes.maildir import MessageDraft

    return MessageDraft.text(to, text)


HOLDER = r"""
import sys
from pathlib import Path
from actors.board.board import Board
from mailboxes.journal.store import FileJournal
from mailboxes.liveness import FlockLiveness
root = Path(sys.argv[1])
live = FlockLiveness(root / ".team" / "members")
with live.hold("w1"):
    board = Board(FileJournal(root / ".team"), liveness=live, actor="w1")
    got = board.claim_next("w1", op_id="w1-claim")
    print("ready", flush=True)
    print(got.unwrap().id, got.epoch, flush=True)
    sys.stdin.read()
"""

LATE_WORKER = r"""
import json, sys
from pathlib import Path
from actors.board.board import Board
from actors.errors import TeamError
from mailboxes.journal.store import FileJournal
root, epoch = Path(sys.argv[1]), int(sys.argv[2])
board = Board(FileJournal(root / ".team"), actor="w1")
print("ready", flush=True)
sys.stdin.readline()
out = {}
for verb in ("complete", "release"):
    try:
        getattr(board, verb)("task_1", "w1", epoch, op_id=f"w1-late-{verb}")
        out[verb] = "accepted"
    except TeamError as exc:
        out[verb] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def test_a_stopped_teammate_keeps_its_claim_and_a_late_completion_is_fenced(tmp_path: Path) -> None:
    (tmp_path / ".team").mkdir()
    runtime = Board(
        FileJournal(tmp_path / ".team"),
        projections=Projections(tmp_path),
        liveness=FlockLiveness(tmp_path / ".team" / "members"),
        actor="runtime",
    )
    runtime.create("the work", op_id="create")
    with (
        children(HOLDER, [(str(tmp_path),)]) as holder,
        children(LATE_WORKER, [(str(tmp_path), "1")]) as late,
    ):
        holder.ready()
        late.ready()  # a worker of w1 that saved epoch 1 and will report back much later
        proc = holder.procs[0]
        assert proc.stdout is not None and proc.stdout.readline().split() == ["task_1", "1"]

        proc.send_signal(signal.SIGSTOP)  # unresponsive, but alive: the kernel keeps its flock
        assert runtime.reap_dead_owners() == []
        assert runtime.refresh().task("task_1").owner == "w1"
        assert runtime.claim_next("w2", op_id="w2-early").ok is False

        proc.kill()  # death frees the lease at once, even while stopped
        proc.wait(timeout=30)
        assert [t.id for t in runtime.reap_dead_owners()] == ["task_1"]
        got = runtime.claim_next("w2", op_id="w2-claim")
        assert got.ok and got.epoch == 2

        late.go()
        (verdict,) = late.results()
        assert verdict == {
            "complete": "StaleEpoch: stale claim on task task_1: epoch 1 was superseded by epoch 2",
            "release": "StaleEpoch: stale claim on task task_1: epoch 1 was superseded by epoch 2",
        }
        task = runtime.refresh().task("task_1")
        assert (task.status, task.owner, task.epoch) == ("in_progress", "w2", 2)
        runtime.complete("task_1", "w2", 2, op_id="w2-done")
    assert_nothing_lost(
        tmp_path,
        attempted={"create", "w1-claim", "w2-early", "w2-claim", "w1-late-complete", "w2-done"},
        acked={"create", "w1-claim", "w2-claim", "w2-done"},
        pids=[*holder.pids, *late.pids],
    )
