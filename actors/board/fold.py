"""The pure fold over journal events: ``fold(state, event) -> state`` and ``fold_all``.

Neither mutates its input. For speed a batch is applied to a private mutable copy of the maps
it changes (one shallow copy per map per batch, made at its first write, in ``_Builder``, one
handler per event type; a map the batch does not change is shared with the input) and frozen once
at the end; the ``Task``/``Member`` values themselves are immutable and shared between states.

Rules the fold encodes (the board validates commands; the fold only records what happened):

- task ids are ``task_<n>``, dense from 1, so dict order is creation order is id order;
- ``blocks`` is derived: the ids of live (not deleted) tasks listing this one in ``blocked_by``;
- deleting a task drops it from its dependents' ``blocked_by`` (a forced delete unblocks them);
- claiming sets owner and epoch; release and delete free the owner; completion keeps the owner
  for the record but frees the holding; any claim or release voids a plan approval;
- ``Task.seq`` is the last seq that changed the task's projection, ``TeamState.team_seq`` the
  last that changed the team view, so projections are reproducible by replay;
- ``task.verified`` records whether the last run of a task's ``verify`` command passed;
- ``usage.recorded`` adds one call to the team's, the agent's and the task's ``UsageTotals``
  (or the untasked ones); it changes no projection.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType, SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar

from actors.board.state import (
    NO_USAGE,
    Member,
    PendingHint,
    PlanRequest,
    PlanStatus,
    Task,
    TaskPlan,
    TeamState,
    UsageTotals,
    WorktreeRecord,
    task_number,
)
from actors.errors import TeamError
from mailboxes.events import Event, payload

if TYPE_CHECKING:
    from mailboxes.events import (
        MemberSpawned,
        MemberStatusChanged,
        MemberStopped,
        PlanRequested,
        PlanReviewed,
        PlanSubmitted,
        TaskClaimed,
        TaskCompleted,
        TaskCreated,
        TaskDeleted,
        TaskReleased,
        TaskUpdated,
        TaskVerified,
        TeamCreated,
        UsageRecorded,
        WorktreeBound,
        WorktreeCreated,
        WorktreeMerged,
        WorktreeRemoved,
    )

_TASK_FIELD = {name: i for i, name in enumerate(Task._fields)}
_UPDATED_AT = _TASK_FIELD["updated_at"]
_SEQ = _TASK_FIELD["seq"]
_STATUS = _TASK_FIELD["status"]
_OWNER = _TASK_FIELD["owner"]
_HUMAN = _TASK_FIELD["human"]
_EPOCH = _TASK_FIELD["epoch"]
_PLAN = _TASK_FIELD["plan"]
_SUMMARY = _TASK_FIELD["summary"]
_ID = _TASK_FIELD["id"]
_SUBJECT = _TASK_FIELD["subject"]
_DESCRIPTION = _TASK_FIELD["description"]
_BLOCKED_BY = _TASK_FIELD["blocked_by"]
_ROLE = _TASK_FIELD["role"]
_CREATED_BY = _TASK_FIELD["created_by"]
_CREATED_AT = _TASK_FIELD["created_at"]
_METADATA = _TASK_FIELD["metadata"]
_VERIFY = _TASK_FIELD["verify"]
_BLANK_TASK: list[Any] = list(Task(id="", subject=""))
_MEMBER_FIELD = {name: i for i, name in enumerate(Member._fields)}
_M_STATUS = _MEMBER_FIELD["status"]
_M_REASON = _MEMBER_FIELD["reason"]
_NO_PLAN = TaskPlan()
_PLAN_REQUIRED = TaskPlan(required=True, status="required")

# The current version and fields of each payload read on a fast path, spelled out so that
# folding needs no payload model (no pydantic import): tests/actors/board/test_fold_fast_path.py
# checks them against the models in mailboxes/payloads.py.
_CREATED_V = 2
_CREATED_KEYS = frozenset(
    (
        "task_id",
        "subject",
        "description",
        "blocked_by",
        "metadata",
        "plan_required",
        "role",
        "verify",
    )
)
_CLAIMED_V = 1
_CLAIMED_KEYS = frozenset(("task_id", "owner", "epoch", "human"))
_RELEASED_V = 2
_RELEASED_KEYS = frozenset(("task_id", "owner", "epoch", "reason", "forced_by"))
_COMPLETED_V = 3
_COMPLETED_KEYS = frozenset(
    ("task_id", "owner", "epoch", "summary", "unblocked", "forced_by", "commit", "remote")
)
_USAGE_V = 1
_USAGE_KEYS = frozenset(
    (
        "agent",
        "model",
        "task_id",
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "cost_usd",
    )
)
_STATUS_V = 1
_STATUS_KEYS = frozenset(("name", "status", "reason"))
_NO_META: dict[str, Any] = {}  # never mutated
_NO_METADATA: Mapping[str, Any] = MappingProxyType(_NO_META)
_FLOAT_MAX = sys.float_info.max


_OPT_STR = frozenset({str, type(None)})


def _strings(value: object) -> bool:
    kind = type(value)
    if kind is not list and kind is not tuple:
        return False
    # a loop, not all(<generator>): most lists are empty or short, and the generator costs more
    for x in value:  # type: ignore[attr-defined]  # noqa: SIM110
        if type(x) is not str:
            return False
    return True


def _count(value: object) -> bool:
    """An exact JSON integer >= 0 (what ``Field(ge=0)`` on an int keeps as it is)."""
    return type(value) is int and value >= 0


# The hot event types are read straight from ``event.data`` when it already has the exact shape
# their payload model would produce (current version, known keys, exact JSON types): the same
# values as ``payload(event)`` without a pydantic validation per event. Anything else (an older
# version, a value pydantic would coerce, bad data) goes through ``payload``, which upgrades or
# raises.


_Created = tuple[str, str, str, tuple[str, ...], dict[str, Any], bool, str | None, str | None]


def _created_args(event: Event) -> _Created | None:
    d = event.data
    if event.v != _CREATED_V or not d.keys() <= _CREATED_KEYS:
        return None
    tid, subject, description = d.get("task_id"), d.get("subject"), d.get("description", "")
    blocked, meta = d.get("blocked_by", ()), d.get("metadata", _NO_META)
    plan_required, role, verify = d.get("plan_required", False), d.get("role"), d.get("verify")
    if (
        type(tid) is not str
        or type(subject) is not str
        or type(description) is not str
        or not _strings(blocked)
        or type(meta) is not dict
        or (meta and not all(type(k) is str for k in meta))
        or type(plan_required) is not bool
        or type(role) not in _OPT_STR
        or type(verify) not in _OPT_STR
    ):
        return None
    return tid, subject, description, tuple(blocked), meta, plan_required, role, verify


def _claim_args(event: Event) -> tuple[str, str, int, bool] | None:
    d = event.data
    if event.v != _CLAIMED_V or not d.keys() <= _CLAIMED_KEYS:
        return None
    tid, owner, epoch, human = (
        d.get("task_id"),
        d.get("owner"),
        d.get("epoch"),
        d.get("human", False),
    )
    if (
        type(tid) is not str
        or type(owner) is not str
        or type(epoch) is not int
        or type(human) is not bool
    ):
        return None
    return tid, owner, epoch, human


def _release_args(event: Event) -> str | None:
    d = event.data
    if event.v != _RELEASED_V or not d.keys() <= _RELEASED_KEYS:
        return None
    tid = d.get("task_id")
    if (
        type(tid) is not str
        or type(d.get("owner")) is not str
        or type(d.get("epoch")) is not int
        or type(d.get("reason")) is not str
        or type(d.get("forced_by")) not in _OPT_STR
    ):
        return None
    return tid


def _complete_args(event: Event) -> tuple[str, str, str, str | None, str | None] | None:
    d = event.data
    if event.v != _COMPLETED_V or not d.keys() <= _COMPLETED_KEYS:
        return None
    tid, owner, summary = d.get("task_id"), d.get("owner"), d.get("summary", "")
    commit, remote = d.get("commit"), d.get("remote")
    if (
        type(tid) is not str
        or type(owner) is not str
        or type(d.get("epoch")) is not int
        or type(summary) is not str
        or not _strings(d.get("unblocked", ()))
        or type(d.get("forced_by")) not in _OPT_STR
        or type(commit) not in _OPT_STR
        or type(remote) not in _OPT_STR
    ):
        return None
    return tid, owner, summary, commit, remote


_Usage = tuple[str, str | None, int, int, int, int, float | None]


def _usage_args(event: Event) -> _Usage | None:
    d = event.data
    if event.v != _USAGE_V or not d.keys() <= _USAGE_KEYS:
        return None
    agent, tid, cost = d.get("agent"), d.get("task_id"), d.get("cost_usd")
    inp, out = d.get("input_tokens", 0), d.get("output_tokens", 0)
    read, write = d.get("cache_read_input_tokens", 0), d.get("cache_creation_input_tokens", 0)
    if (
        type(agent) is not str
        or type(d.get("model")) is not str
        or type(tid) not in _OPT_STR
        or not (_count(inp) and _count(out) and _count(read) and _count(write))
        or (cost is not None and (type(cost) is not float or not 0.0 <= cost <= _FLOAT_MAX))
    ):
        return None
    return agent, tid, inp, out, read, write, cost


def _status_args(event: Event) -> tuple[str, str, str] | None:
    d = event.data
    if event.v != _STATUS_V or not d.keys() <= _STATUS_KEYS:
        return None
    name, status, reason = d.get("name"), d.get("status"), d.get("reason", "")
    if type(name) is not str or type(status) is not str or type(reason) is not str:
        return None
    return name, status, reason


# The other event types the fold reads, as (version, fields): each field's name, a check that
# returns the value the payload model would hold (or ``_BAD``) for an exact JSON value, and its
# default (``_REQUIRED``: none). Data of exactly such a shape becomes a plain namespace with the
# payload's attribute values; anything else goes through ``payload``.

_BAD: Any = object()
_REQUIRED: Any = object()


def _str(value: object) -> object:
    return value if type(value) is str else _BAD


def _opt_str(value: object) -> object:
    return value if value is None or type(value) is str else _BAD


def _int(value: object) -> object:
    return value if type(value) is int else _BAD


def _opt_int(value: object) -> object:
    return value if value is None or type(value) is int else _BAD


def _bool(value: object) -> object:
    return value if type(value) is bool else _BAD


def _str_tuple(value: object) -> object:
    return tuple(value) if _strings(value) else _BAD  # type: ignore[arg-type]


def _opt_str_tuple(value: object) -> object:
    return None if value is None else _str_tuple(value)


def _opt_object(value: object) -> object:
    if value is None:
        return None
    return value if type(value) is dict else _BAD  # JSON object keys are strings


def _one_of(*allowed: str) -> Callable[[object], object]:
    def check(value: object) -> object:
        return value if type(value) is str and value in allowed else _BAD

    return check


_Shape = tuple[int, frozenset[str], tuple[tuple[str, Callable[[object], object], Any], ...]]


def _shape(version: int, *fields: tuple[str, Callable[[object], object], Any]) -> _Shape:
    return version, frozenset(name for name, _, _ in fields), fields


_SHAPES: dict[str, _Shape] = {
    "team.created": _shape(1, ("name", _str, _REQUIRED)),
    "member.spawned": _shape(
        2,
        ("name", _str, _REQUIRED),
        ("role", _str, _REQUIRED),
        ("model", _opt_str, None),
        ("kind", _one_of("agent", "human"), "agent"),
        ("prompt", _str, ""),
        ("plan_required", _bool, False),
        ("tools", _opt_str_tuple, None),
    ),
    "member.stopped": _shape(1, ("name", _str, _REQUIRED), ("reason", _str, "")),
    "task.updated": _shape(
        1,
        ("task_id", _str, _REQUIRED),
        ("subject", _opt_str, None),
        ("description", _opt_str, None),
        ("add_blocked_by", _str_tuple, ()),
        ("remove_blocked_by", _str_tuple, ()),
        ("metadata", _opt_object, None),
    ),
    "task.deleted": _shape(1, ("task_id", _str, _REQUIRED), ("force", _bool, False)),
    "task.verified": _shape(
        1,
        ("task_id", _str, _REQUIRED),
        ("command", _str, _REQUIRED),
        ("stage", _one_of("complete", "merge"), _REQUIRED),
        ("passed", _bool, _REQUIRED),
        ("exit_code", _opt_int, None),
        ("timed_out", _bool, False),
        ("output", _str, ""),
        ("worktree", _opt_str, None),
        ("commit", _opt_str, None),
    ),
    "plan.requested": _shape(
        1,
        ("task_id", _str, _REQUIRED),
        ("request_id", _str, _REQUIRED),
        ("teammate", _str, _REQUIRED),
        ("epoch", _int, _REQUIRED),
    ),
    "plan.submitted": _shape(
        1,
        ("task_id", _str, _REQUIRED),
        ("request_id", _str, _REQUIRED),
        ("owner", _str, _REQUIRED),
        ("epoch", _int, _REQUIRED),
        ("plan", _str, _REQUIRED),
    ),
    "plan.reviewed": _shape(
        1,
        ("task_id", _str, _REQUIRED),
        ("request_id", _str, _REQUIRED),
        ("approve", _bool, _REQUIRED),
        ("feedback", _str, ""),
        ("reviewer", _str, _REQUIRED),
    ),
    "worktree.created": _shape(
        1,
        ("name", _str, _REQUIRED),
        ("branch", _str, _REQUIRED),
        ("base", _str, _REQUIRED),
        ("path", _str, _REQUIRED),
    ),
    "worktree.bound": _shape(1, ("name", _str, _REQUIRED), ("task_id", _str, _REQUIRED)),
    "worktree.removed": _shape(1, ("name", _str, _REQUIRED), ("branch_deleted", _bool, False)),
    "worktree.merged": _shape(
        1,
        ("name", _str, _REQUIRED),
        ("into", _str, _REQUIRED),
        ("commit", _str, _REQUIRED),
        ("squash", _bool, False),
    ),
}


def _plain_body(event: Event) -> SimpleNamespace | None:
    """The payload of an event of ``_SHAPES`` as a namespace, or None (``payload`` decides)."""
    shape = _SHAPES.get(event.type)
    if shape is None:
        return None
    version, keys, fields = shape
    d = event.data
    if event.v != version or not d.keys() <= keys:
        return None
    values: dict[str, Any] = {}
    for name, check, default in fields:
        if name in d:
            value = check(d[name])
            if value is _BAD:
                return None
        elif default is _REQUIRED:
            return None
        else:
            value = default
        values[name] = value
    return SimpleNamespace(**values)


K = TypeVar("K")
V = TypeVar("V")


def _copy(mapping: Mapping[K, V]) -> dict[K, V]:
    """A mutable copy. ``.copy()`` clones the dict under a read-only proxy in one step, while
    ``dict(proxy)`` goes key by key (16x slower on 1,000 tasks; folds run under the journal lock).
    """
    if isinstance(mapping, MappingProxyType | dict):
        return mapping.copy()
    return dict(mapping)


RECENT_MAX = 256
"""How many task changes ``TeamState.recent`` keeps (a projection write after a command finds
its tasks there; a bigger batch, such as a replay, falls back to a scan)."""


class StateGap(TeamError):
    """An event seq that skips ahead of the state: the caller lost events (a bug)."""


def fold(state: TeamState, event: Event) -> TeamState:
    """``state`` with ``event`` applied (events at or below ``state.seq`` are ignored)."""
    return fold_all(state, (event,))


def fold_all(state: TeamState, events: Iterable[Event]) -> TeamState:
    """``state`` with ``events`` applied in order; one copy per call of each map the events
    change (``state`` itself is returned when nothing is new).

    The cyclic garbage collector is paused while the batch is applied (and ``events`` read, when
    it is a journal replay): every event and task value is a new container, so on a long replay
    the collector would otherwise rescan the growing state again and again (half the time on
    200,000 events). Nothing the fold makes is cyclic; plain reference counting frees it.
    """
    seq = state.seq
    it = iter(events)
    for event in it:
        if event.seq > seq:
            paused = gc.isenabled()
            if paused:
                gc.disable()
            try:
                return _Builder(state).apply_all(it, first=event).freeze()
            finally:
                if paused:
                    gc.enable()
    return state


class _Builder:
    """Mutable working copy used inside one ``fold_all`` call; never escapes it.

    Each map is copied on its first write only (``_owned`` names the copies): a batch of task
    events copies the task map once and leaves the others (members, op ids, usage...) shared
    with the state it started from, and ``freeze`` hands an untouched map on as it was.
    """

    __slots__ = (
        "_changed",
        "_owned",
        "_start",
        "agent_usage",
        "holdings",
        "members",
        "name",
        "next_task",
        "ops",
        "plan_requests",
        "seq",
        "task_usage",
        "tasks",
        "team_seq",
        "untasked_usage",
        "usage",
        "worktrees",
    )

    def __init__(self, state: TeamState) -> None:
        self._owned: set[str] = set()
        self._start = state
        self._changed: list[str] = []
        self.name = state.name
        self.seq = state.seq
        self.team_seq = state.team_seq
        self.next_task = state.next_task
        self.tasks: Mapping[str, Task] = state.tasks
        self.members: Mapping[str, Member] = state.members
        self.holdings: Mapping[str, str] = state.holdings
        self.plan_requests: Mapping[str, PlanRequest] = state.plan_requests
        self.ops: Mapping[str, int] = state.ops
        self.worktrees: Mapping[str, WorktreeRecord] = state.worktrees
        self.usage = state.usage
        self.agent_usage: Mapping[str, UsageTotals] = state.agent_usage
        self.task_usage: Mapping[str, UsageTotals] = state.task_usage
        self.untasked_usage = state.untasked_usage

    def _own(self, name: str) -> dict[Any, Any]:
        """The map ``name``, copied on its first write in this batch."""
        current: Mapping[Any, Any] = getattr(self, name)
        if name in self._owned:
            return current  # type: ignore[return-value]
        copy = _copy(current)
        setattr(self, name, copy)
        self._owned.add(name)
        return copy

    def _tasks(self) -> dict[str, Task]:
        if "tasks" in self._owned:
            return self.tasks  # type: ignore[return-value]
        return self._own("tasks")

    def _store(self, tid: str, task: Task) -> None:
        """Put ``task`` in the task map (noted for ``TeamState.recent``)."""
        self._tasks()[tid] = task
        self._changed.append(tid)

    def _recent(self) -> tuple[tuple[str, ...], int]:
        """``TeamState.recent`` and ``recent_from`` after this batch: the start state's plus
        this batch's while they fit in ``RECENT_MAX``, else this batch's alone (complete from
        its first seq), else none (complete from the next seq: no task has a seq above ours)."""
        start = self._start
        changed = self._changed
        if not changed:
            return start.recent, start.recent_from
        if len(start.recent) + len(changed) <= RECENT_MAX and start.recent_from <= start.seq + 1:
            return start.recent + tuple(changed), start.recent_from
        if len(changed) <= RECENT_MAX:
            return tuple(changed), start.seq + 1
        return (), self.seq + 1

    def _frozen(self, name: str) -> Mapping[Any, Any]:
        current: Mapping[Any, Any] = getattr(self, name)
        return MappingProxyType(current) if name in self._owned else current

    def _pending_hint(self, tasks: Mapping[str, Task]) -> PendingHint:
        """The start state's ``pending_from``, lowered to every task this batch left pending
        (only those can be pending below it now)."""
        start = self._start
        hint = start.pending_hint
        if tasks is start.tasks and hint is not None and hint.tasks is tasks:
            return hint  # the same task map: the same fact
        changed = self._changed
        if len(changed) > RECENT_MAX:
            return PendingHint(tasks, 1)  # a replay or an import: the next claim looks
        lowest = start.pending_from()
        for tid in changed:
            if tasks[tid].status == "pending":
                lowest = min(lowest, task_number(tid))
        return PendingHint(tasks, lowest)

    def freeze(self) -> TeamState:
        recent, recent_from = self._recent()
        tasks = self._frozen("tasks")
        return TeamState(
            name=self.name,
            seq=self.seq,
            team_seq=self.team_seq,
            next_task=self.next_task,
            tasks=tasks,
            members=self._frozen("members"),
            holdings=self._frozen("holdings"),
            plan_requests=self._frozen("plan_requests"),
            ops=self._frozen("ops"),
            worktrees=self._frozen("worktrees"),
            usage=self.usage,
            agent_usage=self._frozen("agent_usage"),
            task_usage=self._frozen("task_usage"),
            untasked_usage=self.untasked_usage,
            recent=recent,
            recent_from=recent_from,
            pending_hint=self._pending_hint(tasks),
        )

    def apply_all(self, events: Iterable[Event], first: Event | None = None) -> _Builder:
        if first is not None:
            self._apply(first)
        for event in events:
            self._apply(event)
        return self

    def _apply(self, event: Event) -> None:
        seq = event.seq
        if seq <= self.seq:
            return
        if seq != self.seq + 1:
            raise StateGap(f"event seq {seq} follows state seq {self.seq}")
        self.seq = seq
        if event.op_id is not None:
            self._own("ops")[event.op_id] = seq
        kind = event.type
        if kind == "task.claimed":
            args = _claim_args(event)
            if args is not None:
                return self._claimed(event, *args)
        elif kind == "task.completed":
            done = _complete_args(event)
            if done is not None:
                return self._completed(event, *done)
        elif kind == "task.created":
            created = _created_args(event)
            if created is not None:
                return self._created(event, *created)
        elif kind == "task.released":
            tid = _release_args(event)
            if tid is not None:
                return self._released(event, tid)
        elif kind == "usage.recorded":
            usage = _usage_args(event)
            if usage is not None:
                return self._usage(*usage)
        elif kind == "member.status_changed":
            status = _status_args(event)
            if status is not None:
                return self._status_changed(event, *status)
        handler = _HANDLERS.get(kind)
        if handler is not None:
            body = _plain_body(event)
            handler(self, event, payload(event) if body is None else body)

    # --- helpers -------------------------------------------------------------------------------

    def _put(self, task: Task, event: Event, **changes: Any) -> Task:
        # A hand-rolled _replace: the namedtuple one costs several times more per event.
        values = list(task)
        values[_UPDATED_AT] = event.ts
        values[_SEQ] = event.seq
        for name, value in changes.items():
            values[_TASK_FIELD[name]] = value
        new = Task._make(values)
        self._store(task.id, new)
        return new

    def _link(self, tid: str, blockers: Iterable[str], event: Event) -> None:
        for b in blockers:
            blocker = self.tasks.get(b)
            if blocker is not None and tid not in blocker.blocks:
                self._put(blocker, event, blocks=(*blocker.blocks, tid))

    def _unlink(self, tid: str, blockers: Iterable[str], event: Event) -> None:
        for b in blockers:
            blocker = self.tasks.get(b)
            if blocker is not None and tid in blocker.blocks:
                self._put(blocker, event, blocks=tuple(x for x in blocker.blocks if x != tid))

    def _free(self, task: Task) -> None:
        if task.owner is not None and self.holdings.get(task.owner) == task.id:
            del self._own("holdings")[task.owner]

    def _void_plan_requests(self, tid: str) -> None:
        if not self.plan_requests:
            return
        for rid in [r for r, req in self.plan_requests.items() if req.task_id == tid]:
            del self._own("plan_requests")[rid]

    # --- handlers ------------------------------------------------------------------------------

    def team_created(self, event: Event, p: Any) -> None:
        body: TeamCreated = p
        self.name = body.name
        self.team_seq = event.seq

    def member_spawned(self, event: Event, p: Any) -> None:
        body: MemberSpawned = p
        self._own("members")[body.name] = Member(
            name=body.name,
            role=body.role,
            model=body.model,
            kind=body.kind,
            status="starting" if body.kind == "agent" else "active",
            plan_required=body.plan_required,
            tools=body.tools,
            prompt=body.prompt,
            joined_at=event.ts,
        )
        self.team_seq = event.seq

    def member_status_changed(self, event: Event, p: Any) -> None:
        body: MemberStatusChanged = p
        self._status_changed(event, body.name, body.status, body.reason)

    def _status_changed(self, event: Event, name: str, status: str, reason: str) -> None:
        member = self.members.get(name) or Member(name=name, joined_at=event.ts)
        values = list(member)
        values[_M_STATUS] = status
        values[_M_REASON] = reason
        self._own("members")[name] = Member._make(values)
        self.team_seq = event.seq

    def member_stopped(self, event: Event, p: Any) -> None:
        body: MemberStopped = p
        member = self.members.get(body.name) or Member(name=body.name, joined_at=event.ts)
        self._own("members")[body.name] = member._replace(status="stopped", reason=body.reason)
        self.team_seq = event.seq

    def task_created(self, event: Event, p: Any) -> None:
        body: TaskCreated = p
        self._created(
            event,
            body.task_id,
            body.subject,
            body.description,
            body.blocked_by,
            body.metadata,
            body.plan_required,
            body.role,
            body.verify,
        )

    def _created(
        self,
        event: Event,
        tid: str,
        subject: str,
        description: str,
        blocked_by: tuple[str, ...],
        metadata: Mapping[str, Any],
        plan_required: bool,
        role: str | None,
        verify: str | None,
    ) -> None:
        number = task_number(tid) + 1
        if number > self.next_task:
            self.next_task = number
        # Filled in by position: building a 20-field namedtuple by keyword costs several times more.
        values = _BLANK_TASK.copy()
        values[_ID] = tid
        values[_SUBJECT] = subject
        values[_DESCRIPTION] = description
        values[_BLOCKED_BY] = blocked_by
        values[_PLAN] = _PLAN_REQUIRED if plan_required else _NO_PLAN
        values[_ROLE] = role
        values[_CREATED_BY] = event.actor
        values[_CREATED_AT] = values[_UPDATED_AT] = event.ts
        values[_METADATA] = MappingProxyType(dict(metadata)) if metadata else _NO_METADATA
        values[_VERIFY] = verify
        values[_SEQ] = event.seq
        self._store(tid, Task._make(values))
        if blocked_by:
            self._link(tid, blocked_by, event)

    def task_updated(self, event: Event, p: Any) -> None:
        body: TaskUpdated = p
        task = self.tasks[body.task_id]
        blocked = [b for b in task.blocked_by if b not in body.remove_blocked_by]
        blocked += [b for b in body.add_blocked_by if b not in blocked]
        metadata = task.metadata
        if body.metadata is not None:
            merged = {**metadata, **body.metadata}
            metadata = MappingProxyType({k: v for k, v in merged.items() if v is not None})
        self._put(
            task,
            event,
            subject=task.subject if body.subject is None else body.subject,
            description=task.description if body.description is None else body.description,
            blocked_by=tuple(blocked),
            metadata=metadata,
        )
        self._unlink(task.id, body.remove_blocked_by, event)
        self._link(task.id, body.add_blocked_by, event)

    def task_claimed(self, event: Event, p: Any) -> None:
        body: TaskClaimed = p
        self._claimed(event, body.task_id, body.owner, body.epoch, body.human)

    def _claimed(self, event: Event, tid: str, owner: str, epoch: int, human: bool) -> None:
        task = self.tasks[tid]
        self._free(task)
        self._void_plan_requests(tid)
        values = list(task)
        values[_UPDATED_AT] = event.ts
        values[_SEQ] = event.seq
        values[_STATUS] = "in_progress"
        values[_OWNER] = owner
        values[_HUMAN] = human
        values[_EPOCH] = epoch
        values[_PLAN] = _PLAN_REQUIRED if task.plan.required else _NO_PLAN
        self._store(tid, Task._make(values))
        self._own("holdings")[owner] = tid
        self.team_seq = event.seq

    def task_released(self, event: Event, p: Any) -> None:
        body: TaskReleased = p
        self._released(event, body.task_id)

    def _released(self, event: Event, tid: str) -> None:
        task = self.tasks[tid]
        self._free(task)
        self._void_plan_requests(task.id)
        plan = _PLAN_REQUIRED if task.plan.required else _NO_PLAN
        self._put(task, event, status="pending", owner=None, human=False, plan=plan)
        self.team_seq = event.seq

    def task_completed(self, event: Event, p: Any) -> None:
        body: TaskCompleted = p
        self._completed(event, body.task_id, body.owner, body.summary, body.commit, body.remote)

    def _completed(
        self,
        event: Event,
        tid: str,
        owner: str,
        summary: str,
        commit: str | None,
        remote: str | None,
    ) -> None:
        task = self.tasks[tid]
        self._free(task)
        self._void_plan_requests(tid)
        values = list(task)
        values[_UPDATED_AT] = event.ts
        values[_SEQ] = event.seq
        values[_STATUS] = "completed"
        values[_OWNER] = owner
        values[_SUMMARY] = summary
        self._store(tid, Task._make(values))
        record = self.worktrees.get(task.worktree) if task.worktree else None
        if record is not None and commit is not None:
            self._own("worktrees")[record.name] = record._replace(
                completed_commit=commit, remote=remote
            )
        self.team_seq = event.seq

    def task_verified(self, event: Event, p: Any) -> None:
        body: TaskVerified = p
        task = self.tasks.get(body.task_id)
        if task is not None:
            self._put(task, event, verified=body.passed)

    def task_deleted(self, event: Event, p: Any) -> None:
        body: TaskDeleted = p
        task = self.tasks[body.task_id]
        if task.status == "in_progress":
            self._free(task)
            self.team_seq = event.seq
        self._void_plan_requests(task.id)
        self._unlink(task.id, task.blocked_by, event)
        for dep_id in task.blocks:
            dep = self.tasks[dep_id]
            self._put(dep, event, blocked_by=tuple(b for b in dep.blocked_by if b != task.id))
        self._put(task, event, status="deleted", owner=None, human=False, blocks=())

    def plan_requested(self, event: Event, p: Any) -> None:
        body: PlanRequested = p
        task = self.tasks[body.task_id]
        plan = TaskPlan(
            required=True, status="requested", request_id=body.request_id, epoch=body.epoch
        )
        self._put(task, event, plan=plan)
        self._own("plan_requests")[body.request_id] = PlanRequest(
            request_id=body.request_id,
            task_id=body.task_id,
            teammate=body.teammate,
            epoch=body.epoch,
            requested_at=event.ts,
        )

    def plan_submitted(self, event: Event, p: Any) -> None:
        body: PlanSubmitted = p
        task = self.tasks[body.task_id]
        plan = task.plan._replace(
            required=True,
            status="submitted",
            request_id=body.request_id,
            epoch=body.epoch,
            plan=body.plan,
            feedback=None,
            reviewer=None,
        )
        self._put(task, event, plan=plan)
        self._own("plan_requests")[body.request_id] = PlanRequest(
            request_id=body.request_id,
            task_id=body.task_id,
            teammate=body.owner,
            epoch=body.epoch,
            status="submitted",
            plan=body.plan,
            requested_at=event.ts,
        )

    def plan_reviewed(self, event: Event, p: Any) -> None:
        body: PlanReviewed = p
        task = self.tasks[body.task_id]
        status: PlanStatus = "approved" if body.approve else "rejected"
        plan = task.plan._replace(status=status, feedback=body.feedback, reviewer=body.reviewer)
        self._put(task, event, plan=plan)
        self._own("plan_requests").pop(body.request_id, None)

    def worktree_created(self, event: Event, p: Any) -> None:
        body: WorktreeCreated = p
        self._own("worktrees")[body.name] = WorktreeRecord(
            name=body.name,
            branch=body.branch,
            base=body.base,
            path=body.path,
            created_at=event.ts,
        )

    def worktree_bound(self, event: Event, p: Any) -> None:
        body: WorktreeBound = p
        self._put(self.tasks[body.task_id], event, worktree=body.name)
        record = self.worktrees.get(body.name)
        if record is not None:
            self._own("worktrees")[body.name] = record._replace(task_id=body.task_id)
        self.team_seq = event.seq

    def worktree_removed(self, event: Event, p: Any) -> None:
        body: WorktreeRemoved = p
        for task in [t for t in self.tasks.values() if t.worktree == body.name]:
            self._put(task, event, worktree=None)
        record = self.worktrees.get(body.name)
        if record is not None:
            self._own("worktrees")[body.name] = record._replace(removed=True)
        self.team_seq = event.seq

    def worktree_merged(self, event: Event, p: Any) -> None:
        body: WorktreeMerged = p
        record = self.worktrees.get(body.name)
        if record is not None:
            self._own("worktrees")[body.name] = record._replace(merged_commit=body.commit)

    def usage_recorded(self, event: Event, p: Any) -> None:
        body: UsageRecorded = p
        self._usage(
            body.agent,
            body.task_id,
            body.input_tokens,
            body.output_tokens,
            body.cache_read_input_tokens,
            body.cache_creation_input_tokens,
            body.cost_usd,
        )

    def _usage(
        self,
        agent: str,
        tid: str | None,
        inp: int,
        out: int,
        read: int,
        write: int,
        cost: float | None,
    ) -> None:
        call = (inp, out, read, write, cost)
        self.usage = _add(self.usage, *call)
        self._own("agent_usage")[agent] = _add(self.agent_usage.get(agent, NO_USAGE), *call)
        if tid is None:
            self.untasked_usage = _add(self.untasked_usage, *call)
        else:
            self._own("task_usage")[tid] = _add(self.task_usage.get(tid, NO_USAGE), *call)


def _add(
    totals: UsageTotals, inp: int, out: int, read: int, write: int, cost: float | None
) -> UsageTotals:
    return totals.plus(
        input_tokens=inp,
        output_tokens=out,
        cache_read_input_tokens=read,
        cache_creation_input_tokens=write,
        cost_usd=cost,
    )


_HANDLERS: dict[str, Callable[[_Builder, Event, Any], None]] = {
    "team.created": _Builder.team_created,
    "member.spawned": _Builder.member_spawned,
    "member.status_changed": _Builder.member_status_changed,
    "member.stopped": _Builder.member_stopped,
    "task.created": _Builder.task_created,
    "task.updated": _Builder.task_updated,
    "task.claimed": _Builder.task_claimed,
    "task.released": _Builder.task_released,
    "task.completed": _Builder.task_completed,
    "task.deleted": _Builder.task_deleted,
    "task.verified": _Builder.task_verified,
    "plan.requested": _Builder.plan_requested,
    "plan.submitted": _Builder.plan_submitted,
    "plan.reviewed": _Builder.plan_reviewed,
    "worktree.created": _Builder.worktree_created,
    "worktree.bound": _Builder.worktree_bound,
    "worktree.removed": _Builder.worktree_removed,
    "worktree.merged": _Builder.worktree_merged,
    "usage.recorded": _Builder.usage_recorded,
}
