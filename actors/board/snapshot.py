"""State snapshots: the folded ``TeamState`` saved every ``SNAPSHOT_EVERY`` events, so opening a
team folds only the events after it (docs/ARCHITECTURE.md, "Snapshots").

A snapshot is a cache of the fold, never the truth, and is not trusted blindly. ``load`` ignores
it (and the board folds the journal from the start instead) when:

- its checksum does not match its bytes (torn, truncated, edited);
- it was made by another fold: the snapshot records a fingerprint of the fold's code
  (``actors/board/fold.py`` and ``state.py``), so changing either invalidates every snapshot;
- the journal does not hold the event it was made at: the snapshot names the seq it covers and
  that event's identity (time, type, actor, op id), which must match the journal's event of that
  seq (a salvaged, replaced or shorter journal).

The format is a JSON header line, then the body in Python's ``marshal`` format: plain tuples,
dicts and lists, the tasks as one list per ``Task`` field (columns), so that decoding rebuilds
every ``Task`` with C-level ``zip``/``map`` and runs no Python code per task (about half the
time one tuple per task took). The header names the marshal version and the Python version that
wrote it, and a snapshot written by another one is not used (``marshal`` is only guaranteed to
read back what the same version wrote); its checksum is checked before the body is decoded.
Writing one costs a few tens of milliseconds for 20,000 tasks, once per ``SNAPSHOT_EVERY``
events, outside the journal lock; it goes through the ``BlobStore`` port, so the scale-out
backend stores it the same way.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import marshal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from itertools import repeat
from pathlib import Path
from types import MappingProxyType
from typing import Any

from actors.board.state import (
    Member,
    PlanRequest,
    Task,
    TaskPlan,
    TeamState,
    UsageTotals,
    WorktreeRecord,
)
from mailboxes.events import Event
from mailboxes.ports import BlobStore, EventStore

__all__ = [
    "REMOTE_SNAPSHOT_EVERY",
    "SNAPSHOT_BLOB",
    "SNAPSHOT_EVERY",
    "SnapshotRejected",
    "decode",
    "encode",
    "load",
]

log = logging.getLogger(__name__)

SNAPSHOT_BLOB = "state.snapshot"
SNAPSHOT_EVERY = 1024
"""Events between two snapshots: a command folds half as many on average (20,000 tasks: writing
one costs about what folding 2,000 events does, once per ``SNAPSHOT_EVERY``)."""
REMOTE_SNAPSHOT_EVERY = 4096
"""The same through a blob store on the network (JetStream): a snapshot there is an upload in
chunks that stalls the writing process's next commit, so it is taken four times less often
(bench_nats_claims: 1,024 cost about a tenth of the claims rate)."""
_FORMAT = 3
_CODEC = f"marshal-{marshal.version}-py{sys.version_info[0]}.{sys.version_info[1]}"
"""How the body is encoded: a snapshot with another codec is ignored (module docstring)."""
_EMPTY_MAP: Mapping[str, Any] = MappingProxyType({})


class SnapshotRejected(ValueError):
    """A snapshot that must not be used (the message says why)."""


@cache
def fingerprint() -> str:
    """A digest of the fold's code: a snapshot made by other code is not used."""
    digest = hashlib.sha256(b"teamctl-snapshot-%d\n" % _FORMAT)
    here = Path(__file__).parent
    for name in ("fold.py", "state.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()


def event_key(event: Event) -> list[Any]:
    """What identifies the event a snapshot was made at."""
    return [event.seq, event.ts, event.type, event.actor, event.op_id]


_PLAN = Task._fields.index("plan")
_METADATA = Task._fields.index("metadata")
_TUPLES = (Task._fields.index("blocked_by"), Task._fields.index("blocks"))
_USAGE_FIELDS = len(UsageTotals._fields)


def _task_columns(tasks: list[Task]) -> dict[str, Any]:
    """The tasks as one list per ``Task`` field (``marshal`` takes no named tuples or mapping
    proxies): plans and metadata as indexes into tables of their distinct values (most tasks
    share a few plans and have no metadata; table entry 0 is the empty metadata)."""
    columns: list[list[Any]] = [list(column) for column in zip(*tasks, strict=True)] or [
        [] for _ in Task._fields
    ]
    plans = {plan: at for at, plan in enumerate(dict.fromkeys(columns[_PLAN]))}
    columns[_PLAN] = list(map(plans.__getitem__, columns[_PLAN]))
    metadata: list[dict[str, Any]] = [{}]
    indexes = []
    for meta in columns[_METADATA]:
        if meta:
            indexes.append(len(metadata))
            metadata.append(dict(meta))
        else:
            indexes.append(0)
    columns[_METADATA] = indexes
    for at in _TUPLES:
        columns[at] = list(map(tuple, columns[at]))
    return {"columns": columns, "plans": list(map(tuple, plans)), "metadata": metadata}


def _tasks(body: dict[str, Any]) -> dict[str, Task]:
    """The tasks of a snapshot's columns (``_task_columns``), rebuilt column-wise at C speed:
    no Python code runs per task. Equal plans share one ``TaskPlan``."""
    columns: list[list[Any]] = body["columns"]
    ids = columns[0]
    if len(columns) != len(Task._fields) or any(len(c) != len(ids) for c in columns):
        raise SnapshotRejected("inconsistent task columns")
    plans = [TaskPlan._make(plan) for plan in body["plans"]]
    metadata = [MappingProxyType(meta) if meta else _EMPTY_MAP for meta in body["metadata"]]
    columns[_PLAN] = list(map(plans.__getitem__, columns[_PLAN]))
    columns[_METADATA] = list(map(metadata.__getitem__, columns[_METADATA]))
    # Task._make without its Python-level call and length check per task: the rows are ours
    # (checksummed) and every column has one value per task (checked above).
    return dict(zip(ids, map(tuple.__new__, repeat(Task), zip(*columns, strict=True)), strict=True))


def _usage(rows: dict[str, tuple[Any, ...]]) -> dict[str, UsageTotals]:
    """``UsageTotals`` by key (one per task that had model calls: thousands on a big team),
    rebuilt like the tasks, without a Python-level call each."""
    if not set(map(len, rows.values())) <= {_USAGE_FIELDS}:
        raise SnapshotRejected("inconsistent usage totals")
    return dict(zip(rows, map(tuple.__new__, repeat(UsageTotals), rows.values()), strict=True))


def _member(row: tuple[Any, ...]) -> Member:
    return Member._make(row)


def encode(state: TeamState, at: Event) -> bytes:
    """The snapshot of ``state``, made at the journal's event ``at`` (``at.seq == state.seq``)."""
    if at.seq != state.seq:
        raise ValueError(f"snapshot of seq {state.seq} made at event {at.seq}")
    with _collector_paused():
        raw = marshal.dumps(_body(state))
    header = {
        "format": _FORMAT,
        "codec": _CODEC,
        "fold": fingerprint(),
        "seq": state.seq,
        "at": event_key(at),
        "sha256": hashlib.sha256(raw).hexdigest(),
    }
    return json.dumps(header, sort_keys=True).encode() + b"\n" + raw


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: encoding and decoding make a few hundred thousand
    containers, none in a cycle, which it would otherwise scan many times (half the time)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _body(state: TeamState) -> dict[str, Any]:
    """``state`` as the plain values ``marshal`` takes."""
    return {
        "name": state.name,
        "seq": state.seq,
        "team_seq": state.team_seq,
        "next_task": state.next_task,
        "tasks": _task_columns(list(state.tasks.values())),
        "members": [tuple(m) for m in state.members.values()],
        "holdings": dict(state.holdings),
        "plan_requests": [tuple(p) for p in state.plan_requests.values()],
        "ops": dict(state.ops),
        "worktrees": [tuple(w) for w in state.worktrees.values()],
        "usage": tuple(state.usage),
        "agent_usage": dict(
            zip(state.agent_usage, map(tuple, state.agent_usage.values()), strict=True)
        ),
        "task_usage": dict(
            zip(state.task_usage, map(tuple, state.task_usage.values()), strict=True)
        ),
        "untasked_usage": tuple(state.untasked_usage),
    }


def _state(body: dict[str, Any]) -> TeamState:
    """The ``TeamState`` of a snapshot's parsed body."""
    return TeamState(
        name=body["name"],
        seq=body["seq"],
        team_seq=body["team_seq"],
        next_task=body["next_task"],
        tasks=MappingProxyType(_tasks(body["tasks"])),
        members=MappingProxyType({row[0]: _member(row) for row in body["members"]}),
        holdings=MappingProxyType(body["holdings"]),
        plan_requests=MappingProxyType(
            {row[0]: PlanRequest._make(row) for row in body["plan_requests"]}
        ),
        ops=MappingProxyType(body["ops"]),
        worktrees=MappingProxyType(
            {row[0]: WorktreeRecord._make(row) for row in body["worktrees"]}
        ),
        usage=UsageTotals._make(body["usage"]),
        agent_usage=MappingProxyType(_usage(body["agent_usage"])),
        task_usage=MappingProxyType(_usage(body["task_usage"])),
        untasked_usage=UsageTotals._make(body["untasked_usage"]),
    )


def decode(data: bytes) -> tuple[TeamState, list[Any]]:
    """The state in a snapshot and the key of the event it was made at (``SnapshotRejected``
    when its checksum or fold fingerprint does not match)."""
    cut = data.find(b"\n")
    head = data[:cut] if cut >= 0 else data
    raw = memoryview(data)[cut + 1 :]  # the body, not copied (3 MB on a big team)
    try:
        header = json.loads(head)
        if cut < 0 or header.get("format") != _FORMAT:
            raise SnapshotRejected("not a snapshot of this format")
        if header.get("codec") != _CODEC:
            raise SnapshotRejected(f"written as {header.get('codec')}, not {_CODEC}")
        if header.get("fold") != fingerprint():
            raise SnapshotRejected("made by another version of the fold")
        if hashlib.sha256(raw).hexdigest() != header.get("sha256"):
            raise SnapshotRejected("checksum mismatch")
        with _collector_paused():
            state = _state(marshal.loads(raw))
        at = header["at"]
    except SnapshotRejected:
        raise
    except (ValueError, KeyError, TypeError, IndexError, EOFError) as exc:
        raise SnapshotRejected(f"unreadable ({type(exc).__name__}: {exc})") from None
    if state.seq != header.get("seq") or not isinstance(at, list) or at[:1] != [state.seq]:
        raise SnapshotRejected("inconsistent header")
    return state, at


def load(blobs: BlobStore, store: EventStore) -> TeamState | None:
    """The snapshot in ``blobs`` if it checks out against ``store`` (module docstring), else
    None (the reason is logged at info level: falling back is routine, e.g. after an upgrade)."""
    try:
        data = blobs.get(SNAPSHOT_BLOB)
    except OSError as exc:
        log.info("state snapshot not read: %s", exc)
        return None
    if data is None:
        return None
    try:
        state, at = decode(data)
        event = next(iter(store.read_from(state.seq)), None)
        if event is None or event_key(event) != at:
            raise SnapshotRejected(f"the journal's event {state.seq} is not the one it was made at")
    except SnapshotRejected as exc:
        log.info("state snapshot ignored: %s", exc)
        return None
    return state


def save(blobs: BlobStore, state: TeamState, at: Event) -> bool:
    """Store the snapshot of ``state`` (made at ``at``); a failure is logged, not raised."""
    try:
        blobs.put(SNAPSHOT_BLOB, encode(state, at))
    except (OSError, ValueError) as exc:
        log.warning("state snapshot not written: %s", exc)
        return False
    return True
