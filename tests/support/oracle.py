"""The nothing-lost oracle as one reusable check over a repository folder
(docs/RELIABILITY.md, "How the evidence is produced").

Every fault test ends with ``assert_nothing_lost(root, ...)``. The check is read-only (it never
opens a ``FileJournal``, which would repair a torn tail) and returns every violation it finds,
not only the first, as one line each:

- the journal parses with dense seqs and good CRCs (a ``journal.tail_repaired`` event is fine; a
  torn last line still on disk is a violation unless ``allow_torn_tail``);
- acked ⊆ journal ⊆ attempted, by ``op_id``, and no ``op_id`` is stored twice;
- ``replay --verify``: a fresh fold of the whole journal renders exactly the projections on disk;
- the claim history is fenced: every ``task.claimed`` took a free task at the next epoch by an
  owner holding nothing; every release or completion names the current owner and epoch;
- every task is in one state with at most one owner, and no owner holds two tasks; with
  ``require_live_owners`` every agent-held claim's owner holds its liveness lease (reaped);
- every message id found in an inbox is in exactly one place (one inbox, ``new`` or ``cur``),
  every delivered (acknowledged) id is found, every id found was sent (attempted);
- no child process is left running: the ``pids`` given, or else every child of this process
  (multiprocessing's helpers and ``ignore_pids`` excepted), and any process whose working
  folder is inside ``root``.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from actors.board.fold import fold_all
from actors.board.projections import verify
from actors.board.state import EMPTY, TeamState
from mailboxes.events import Event
from mailboxes.journal.frame import BadLine, decode_event, iter_lines
from mailboxes.liveness import FlockLiveness

__all__ = ["Ledger", "assert_nothing_lost", "check_repository", "child_pids", "journal_events"]

_MP_HELPERS = ("resource_tracker", "forkserver", "semaphore_tracker")


@dataclass
class Ledger:
    """What a workload attempted and what was acknowledged, recorded from many threads.

    Record ``attempt`` *before* the call and ``ack`` only after it returned.
    """

    attempted: set[str] = field(default_factory=set)
    acked: set[str] = field(default_factory=set)
    sent: set[str] = field(default_factory=set)
    delivered: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def attempt(self, op_id: str) -> None:
        with self._lock:
            self.attempted.add(op_id)

    def ack(self, op_id: str) -> None:
        with self._lock:
            self.acked.add(op_id)

    def new_id(self) -> str:
        """An ``IdSource`` for ``Maildir``: every id it hands out counts as sent (attempted)."""
        msg_id = uuid.uuid4().hex
        with self._lock:
            self.sent.add(msg_id)
        return msg_id

    def deliver(self, message_ids: Iterable[str]) -> None:
        """Message ids whose delivery was acknowledged (they were sent, too)."""
        with self._lock:
            ids = set(message_ids)
            self.sent |= ids
            self.delivered |= ids

    def frozen(self) -> dict[str, frozenset[str]]:
        """Consistent copies, for ``check_repository(root, **ledger.frozen())``."""
        with self._lock:
            return {
                "attempted": frozenset(self.attempted),
                "acked": frozenset(self.acked),
                "sent": frozenset(self.sent),
                "delivered": frozenset(self.delivered),
            }


def journal_events(journal: Path) -> tuple[list[Event], list[str]]:
    """Every event of ``journal`` that parses, in order, and the problems found (read-only)."""
    problems: list[str] = []
    events: list[Event] = []
    if not journal.exists():
        return events, problems
    fd = os.open(journal, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        for offset, raw, complete in iter_lines(fd, 0, size):
            line_no = len(events) + 1
            last = offset + len(raw) + (1 if complete else 0) >= size
            try:
                if not complete:
                    raise BadLine("last line has no newline (torn write)", torn=True)
                events.append(decode_event(raw, line_no))
            except BadLine as exc:
                kind = "torn tail" if last and exc.torn else "corrupt line"
                problems.append(f"journal: {kind} at line {line_no}: {exc.reason}")
                break
    finally:
        os.close(fd)
    return events, problems


def check_repository(
    root: Path,
    *,
    attempted: Iterable[str] | None = None,
    acked: Iterable[str] = (),
    sent: Iterable[str] | None = None,
    delivered: Iterable[str] = (),
    pids: Iterable[int] | None = None,
    ignore_pids: Iterable[int] = (),
    projections: bool = True,
    require_live_owners: bool = False,
    allow_torn_tail: bool = False,
    check_processes: bool = True,
) -> list[str]:
    """Every nothing-lost violation in the repository at ``root`` (empty = nothing lost)."""
    team = Path(root) / ".team"
    violations: list[str] = []
    events, problems = journal_events(team / "journal.jsonl")
    for problem in problems:
        if not (allow_torn_tail and problem.startswith("journal: torn tail")):
            violations.append(problem)
    violations += _check_ops(events, attempted, acked)
    violations += _check_claims(events)
    state: TeamState | None = None
    try:
        state = fold_all(EMPTY, events)
    except Exception as exc:  # any failure to fold is itself the finding
        violations.append(f"fold: the journal does not fold: {exc!r}")
    if state is not None:
        violations += _check_tasks(state)
        if projections:
            violations += [f"replay --verify: {drift}" for drift in verify(state, Path(root))]
        if require_live_owners:
            violations += _check_owners_live(state, team / "members")
    violations += _check_messages(team / "mailboxes", sent, delivered)
    if check_processes:
        violations += _check_processes(Path(root), pids, set(ignore_pids))
    return violations


def assert_nothing_lost(root: Path, **expect: object) -> None:
    """``check_repository`` that fails the test with every violation, one per line."""
    violations = check_repository(root, **expect)  # type: ignore[arg-type]
    assert not violations, "nothing-lost oracle:\n  " + "\n  ".join(violations)


def _check_ops(
    events: list[Event], attempted: Iterable[str] | None, acked: Iterable[str]
) -> list[str]:
    out: list[str] = []
    stored: dict[str, int] = {}
    for event in events:
        if event.op_id is None:
            continue
        if event.op_id in stored:
            out.append(
                f"ops: op_id {event.op_id} stored twice (seq {stored[event.op_id]}, {event.seq})"
            )
        stored.setdefault(event.op_id, event.seq)
    lost = sorted(set(acked) - stored.keys())
    if lost:
        out.append(f"ops: {len(lost)} acknowledged op(s) missing from the journal: {lost[:10]}")
    if attempted is not None:
        extra = sorted(stored.keys() - set(attempted))
        if extra:
            out.append(f"ops: {len(extra)} op(s) in the journal never attempted: {extra[:10]}")
    return out


def _check_claims(events: list[Event]) -> list[str]:
    """Replay the claim protocol from raw events, independently of ``actors.board.state``."""
    out: list[str] = []
    owner: dict[str, str | None] = {}
    epoch: dict[str, int] = {}
    status: dict[str, str] = {}
    holding: dict[str, str] = {}
    for event in events:
        data = event.data
        tid = str(data.get("task_id", ""))
        where = f"claims: seq {event.seq} {event.type} {tid}"
        if event.type == "task.created":
            owner[tid], epoch[tid], status[tid] = None, 0, "pending"
        elif event.type == "task.claimed":
            who, new_epoch = str(data["owner"]), int(data["epoch"])
            if status.get(tid) != "pending" or owner.get(tid) is not None:
                out.append(f"{where}: double claim (task is {status.get(tid)} of {owner.get(tid)})")
            if new_epoch != epoch.get(tid, 0) + 1:
                out.append(f"{where}: epoch {new_epoch} after {epoch.get(tid, 0)}")
            if who in holding:
                out.append(f"{where}: {who} already holds {holding[who]}")
            holding[who] = tid
            owner[tid], epoch[tid], status[tid] = who, new_epoch, "in_progress"
        elif event.type in ("task.released", "task.completed"):
            who, at = str(data["owner"]), int(data["epoch"])
            if owner.get(tid) != who or epoch.get(tid) != at or status.get(tid) != "in_progress":
                out.append(
                    f"{where}: unfenced ({who}@{at}, task held by {owner.get(tid)}@{epoch.get(tid)})"
                )
            holding.pop(who, None)
            owner[tid] = None
            status[tid] = "pending" if event.type == "task.released" else "completed"
        elif event.type == "task.deleted":
            held_by = owner.get(tid)
            if held_by is not None and holding.get(held_by) == tid:
                del holding[held_by]
            owner[tid], status[tid] = None, "deleted"
    return out


def _check_tasks(state: TeamState) -> list[str]:
    out: list[str] = []
    owners: dict[str, list[str]] = {}
    for task in state.tasks.values():
        if task.status == "in_progress":
            if task.owner is None:
                out.append(f"tasks: {task.id} is in progress without an owner")
            else:
                owners.setdefault(task.owner, []).append(task.id)
        elif task.status in ("pending", "deleted") and task.owner is not None:
            out.append(f"tasks: {task.id} is {task.status} but owned by {task.owner}")
    for who, held in owners.items():
        if len(held) > 1:
            out.append(f"tasks: {who} holds {len(held)} tasks: {held}")
        if state.holdings.get(who) != held[0]:
            out.append(f"tasks: holdings say {who} holds {state.holdings.get(who)}, not {held}")
    stray = sorted(set(state.holdings) - owners.keys())
    if stray:
        out.append(f"tasks: holdings name owners of no task in progress: {stray}")
    return out


def _check_owners_live(state: TeamState, members: Path) -> list[str]:
    liveness = FlockLiveness(members)
    return [
        f"owners: {task.id} is held by {task.owner}, whose lease is free (not reaped)"
        for task in state.tasks.values()
        if task.status == "in_progress"
        and not task.human
        and task.owner is not None
        and not liveness.is_alive(task.owner)
    ]


def _check_messages(boxes: Path, sent: Iterable[str] | None, delivered: Iterable[str]) -> list[str]:
    out: list[str] = []
    places: dict[str, set[str]] = {}
    if boxes.is_dir():
        for box in sorted(os.listdir(boxes)):
            for sub in ("new", "cur"):
                folder = boxes / box / sub
                if not folder.is_dir():
                    continue
                for name in os.listdir(folder):
                    msg_id = name.rsplit(".", 1)[-1]
                    places.setdefault(msg_id, set()).add(f"{box}/{sub}")
    for msg_id, where in sorted(places.items()):
        if len(where) > 1:
            out.append(f"messages: {msg_id} is in {len(where)} places: {sorted(where)}")
    lost = sorted(set(delivered) - places.keys())
    if lost:
        out.append(f"messages: {len(lost)} delivered message(s) missing: {lost[:10]}")
    if sent is not None:
        extra = sorted(places.keys() - set(sent))
        if extra:
            out.append(f"messages: {len(extra)} message(s) never sent: {extra[:10]}")
    return out


def _check_processes(root: Path, pids: Iterable[int] | None, ignore: set[int]) -> list[str]:
    out: list[str] = []
    me = os.getpid()
    candidates = list(pids) if pids is not None else [p for p in child_pids() if p not in ignore]
    for pid in candidates:
        if _running(pid):
            out.append(f"processes: child {pid} ({_cmdline(pid)}) is still running")
    inside = os.path.realpath(root)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if (cwd == inside or cwd.startswith(inside + os.sep)) and _running(int(entry)):
            out.append(f"processes: {entry} ({_cmdline(int(entry))}) still runs in {cwd}")
    return out


def child_pids() -> list[int]:
    """Children of this process now, multiprocessing's helper processes excepted (take it at
    the start of a test and pass it as ``ignore_pids`` to ignore what earlier tests left)."""
    parent = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent and not any(h in _cmdline(int(entry)) for h in _MP_HELPERS):
            found.append(int(entry))
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie has exited; only its exit status is left)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"
