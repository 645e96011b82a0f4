"""Team state: frozen values and the pure fold over journal events (DESIGN §4, §5).

``fold(state, event) -> state`` and ``fold_all(state, events) -> state`` never mutate their
input. For speed a batch is applied to a private mutable copy of the maps (one shallow copy per
batch, not per event) and frozen once at the end; the ``Task``/``Member`` values themselves are
immutable and shared between states.

Rules the fold encodes (the board validates commands; the fold only records what happened):

- task ids are ``task_<n>``, dense from 1, so dict order is creation order is id order;
- ``blocks`` is derived: the ids of live (not deleted) tasks listing this one in ``blocked_by``;
- deleting a task drops it from its dependents' ``blocked_by`` (a forced delete unblocks them);
- claiming sets owner and epoch; release and delete free the owner; completion keeps the owner
  for the record but frees the holding; any claim or release voids a plan approval;
- ``Task.seq`` is the last seq that changed the task's projection, ``TeamState.team_seq`` the
  last that changed the team view, so projections are reproducible by replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from actors.errors import TeamError, UnknownTask
from mailboxes.events import (
    Event,
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
    TeamCreated,
    WorktreeBound,
    WorktreeRemoved,
    payload,
)

TaskStatus = Literal["pending", "in_progress", "completed", "deleted"]
PlanStatus = Literal["none", "required", "requested", "submitted", "approved", "rejected"]
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


def task_id(number: int) -> str:
    """The id of the ``number``-th task."""
    return f"task_{number}"


def task_number(tid: str) -> int:
    """The ``n`` of ``task_<n>`` (``UnknownTask`` for anything else)."""
    prefix, _, digits = tid.partition("_")
    if prefix != "task" or not digits.isdigit():
        raise UnknownTask(tid)
    return int(digits)


class TaskPlan(NamedTuple):
    """The plan gate of the current claim. ``status`` none = no plan needed."""

    required: bool = False
    status: PlanStatus = "none"
    request_id: str | None = None
    epoch: int | None = None
    plan: str | None = None
    feedback: str | None = None
    reviewer: str | None = None

    @property
    def approved(self) -> bool:
        """True when writes are allowed as far as the plan gate is concerned."""
        return not self.required or self.status == "approved"


class Task(NamedTuple):
    """One task on the board (DESIGN §5)."""

    id: str
    subject: str
    description: str = ""
    status: TaskStatus = "pending"
    owner: str | None = None
    human: bool = False
    blocked_by: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()
    worktree: str | None = None
    epoch: int = 0
    plan: TaskPlan = TaskPlan()
    role: str | None = None
    created_by: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    metadata: Mapping[str, Any] = _EMPTY
    summary: str | None = None
    seq: int = 0

    @property
    def number(self) -> int:
        """The ``n`` of ``task_<n>``."""
        return int(self.id[5:])


class Member(NamedTuple):
    """A team member (agent hosted by a runtime, or a human)."""

    name: str
    role: str = ""
    model: str | None = None
    kind: Literal["agent", "human"] = "agent"
    status: str = "starting"
    reason: str = ""
    plan_required: bool = False
    tools: tuple[str, ...] | None = None
    prompt: str = ""
    joined_at: float = 0.0


class PlanRequest(NamedTuple):
    """A plan request not yet reviewed (``status`` requested or submitted)."""

    request_id: str
    task_id: str
    teammate: str
    epoch: int
    status: Literal["requested", "submitted"] = "requested"
    plan: str | None = None
    requested_at: float = 0.0


@dataclass(frozen=True, slots=True)
class TeamState:
    """Everything folded from the journal up to ``seq``. Treat the maps as read-only."""

    name: str | None = None
    seq: int = 0
    team_seq: int = 0
    next_task: int = 1
    tasks: Mapping[str, Task] = field(default_factory=_empty)
    members: Mapping[str, Member] = field(default_factory=_empty)
    holdings: Mapping[str, str] = field(default_factory=_empty)
    plan_requests: Mapping[str, PlanRequest] = field(default_factory=_empty)
    ops: Mapping[str, int] = field(default_factory=_empty)

    def task(self, tid: str) -> Task:
        """The task ``tid`` (``UnknownTask`` if it was never created)."""
        found = self.tasks.get(tid)
        if found is None:
            raise UnknownTask(tid)
        return found

    def is_ready(self, task: Task) -> bool:
        """Pending, unowned, and every ``blocked_by`` task completed."""
        if task.status != "pending" or task.owner is not None:
            return False
        tasks = self.tasks
        for dep in task.blocked_by:
            blocker = tasks.get(dep)
            if blocker is None or blocker.status != "completed":
                return False
        return True

    def ready(self, role: str | None = None, *, any_role: bool = True) -> list[Task]:
        """Ready tasks in id order; with ``any_role=False`` only those ``role`` may take."""
        return [
            t
            for t in self.tasks.values()
            if self.is_ready(t) and (any_role or t.role is None or t.role == role)
        ]

    def holding(self, owner: str) -> Task | None:
        """The in-progress task ``owner`` holds, if any."""
        tid = self.holdings.get(owner)
        return None if tid is None else self.tasks[tid]

    def live_dependents(self, tid: str) -> list[str]:
        """Ids of pending or in-progress tasks blocked by ``tid``."""
        tasks = self.tasks
        return [d for d in self.task(tid).blocks if tasks[d].status in ("pending", "in_progress")]

    def newly_ready_after(self, tid: str) -> tuple[str, ...]:
        """Dependents of ``tid`` that become ready once ``tid`` completes (it is not yet)."""
        out = []
        for dep_id in self.task(tid).blocks:
            dep = self.tasks[dep_id]
            if dep.status != "pending" or dep.owner is not None:
                continue
            if all(b == tid or self.tasks[b].status == "completed" for b in dep.blocked_by):
                out.append(dep_id)
        return tuple(out)

    def find_cycle(self, tid: str, new_blockers: Iterable[str]) -> list[str] | None:
        """The cycle closed by making ``tid`` blocked by ``new_blockers``, as a path, or None.

        The path reads "is blocked by": ``[tid, b, ..., tid]``.
        """
        tasks = self.tasks
        for start in new_blockers:
            # Depth-first along blocked_by from the new blocker; reaching tid closes a loop.
            parents: dict[str, str | None] = {start: None}
            stack = [start]
            while stack:
                node = stack.pop()
                if node == tid:
                    path: list[str] = []
                    cur: str | None = node
                    while cur is not None:
                        path.append(cur)
                        cur = parents[cur]
                    return [tid, *reversed(path)]
                found = tasks.get(node)
                for nxt in found.blocked_by if found is not None else ():
                    if nxt not in parents:
                        parents[nxt] = node
                        stack.append(nxt)
        return None


EMPTY = TeamState()
_TASK_FIELD = {name: i for i, name in enumerate(Task._fields)}
_UPDATED_AT = _TASK_FIELD["updated_at"]
_SEQ = _TASK_FIELD["seq"]


def fold(state: TeamState, event: Event) -> TeamState:
    """``state`` with ``event`` applied (events at or below ``state.seq`` are ignored)."""
    return fold_all(state, (event,))


def fold_all(state: TeamState, events: Iterable[Event]) -> TeamState:
    """``state`` with ``events`` applied in order; one copy of the maps per call."""
    return _Builder(state).apply_all(events).freeze()


class StateGap(TeamError):
    """An event seq that skips ahead of the state: the caller lost events (a bug)."""


class _Builder:
    """Mutable working copy used inside one ``fold_all`` call; never escapes it."""

    __slots__ = (
        "holdings",
        "members",
        "name",
        "next_task",
        "ops",
        "plan_requests",
        "seq",
        "tasks",
        "team_seq",
    )

    def __init__(self, state: TeamState) -> None:
        self.name = state.name
        self.seq = state.seq
        self.team_seq = state.team_seq
        self.next_task = state.next_task
        self.tasks = dict(state.tasks)
        self.members = dict(state.members)
        self.holdings = dict(state.holdings)
        self.plan_requests = dict(state.plan_requests)
        self.ops = dict(state.ops)

    def freeze(self) -> TeamState:
        return TeamState(
            name=self.name,
            seq=self.seq,
            team_seq=self.team_seq,
            next_task=self.next_task,
            tasks=MappingProxyType(self.tasks),
            members=MappingProxyType(self.members),
            holdings=MappingProxyType(self.holdings),
            plan_requests=MappingProxyType(self.plan_requests),
            ops=MappingProxyType(self.ops),
        )

    def apply_all(self, events: Iterable[Event]) -> _Builder:
        for event in events:
            if event.seq <= self.seq:
                continue
            if event.seq != self.seq + 1:
                raise StateGap(f"event seq {event.seq} follows state seq {self.seq}")
            self.seq = event.seq
            if event.op_id is not None:
                self.ops[event.op_id] = event.seq
            handler = _HANDLERS.get(event.type)
            if handler is not None:
                handler(self, event, payload(event))
        return self

    # --- helpers -------------------------------------------------------------------------------

    def _put(self, task: Task, event: Event, **changes: Any) -> Task:
        # A hand-rolled _replace: the namedtuple one costs several times more per event.
        values = list(task)
        values[_UPDATED_AT] = event.ts
        values[_SEQ] = event.seq
        for name, value in changes.items():
            values[_TASK_FIELD[name]] = value
        new = Task._make(values)
        self.tasks[task.id] = new
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
            del self.holdings[task.owner]

    def _void_plan_requests(self, tid: str) -> None:
        for rid in [r for r, req in self.plan_requests.items() if req.task_id == tid]:
            del self.plan_requests[rid]

    # --- handlers ------------------------------------------------------------------------------

    def team_created(self, event: Event, p: Any) -> None:
        body: TeamCreated = p
        self.name = body.name
        self.team_seq = event.seq

    def member_spawned(self, event: Event, p: Any) -> None:
        body: MemberSpawned = p
        self.members[body.name] = Member(
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
        member = self.members.get(body.name) or Member(name=body.name, joined_at=event.ts)
        self.members[body.name] = member._replace(status=body.status, reason=body.reason)
        self.team_seq = event.seq

    def member_stopped(self, event: Event, p: Any) -> None:
        body: MemberStopped = p
        member = self.members.get(body.name) or Member(name=body.name, joined_at=event.ts)
        self.members[body.name] = member._replace(status="stopped", reason=body.reason)
        self.team_seq = event.seq

    def task_created(self, event: Event, p: Any) -> None:
        body: TaskCreated = p
        tid = body.task_id
        self.next_task = max(self.next_task, task_number(tid) + 1)
        self.tasks[tid] = Task(
            id=tid,
            subject=body.subject,
            description=body.description,
            blocked_by=body.blocked_by,
            plan=TaskPlan(required=True, status="required") if body.plan_required else TaskPlan(),
            role=body.role,
            created_by=event.actor,
            created_at=event.ts,
            updated_at=event.ts,
            metadata=MappingProxyType(dict(body.metadata)),
            seq=event.seq,
        )
        self._link(tid, body.blocked_by, event)

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
        task = self.tasks[body.task_id]
        self._free(task)
        self._void_plan_requests(task.id)
        plan = TaskPlan(required=True, status="required") if task.plan.required else TaskPlan()
        self._put(
            task,
            event,
            status="in_progress",
            owner=body.owner,
            human=body.human,
            epoch=body.epoch,
            plan=plan,
        )
        self.holdings[body.owner] = task.id
        self.team_seq = event.seq

    def task_released(self, event: Event, p: Any) -> None:
        body: TaskReleased = p
        task = self.tasks[body.task_id]
        self._free(task)
        self._void_plan_requests(task.id)
        plan = TaskPlan(required=True, status="required") if task.plan.required else TaskPlan()
        self._put(task, event, status="pending", owner=None, human=False, plan=plan)
        self.team_seq = event.seq

    def task_completed(self, event: Event, p: Any) -> None:
        body: TaskCompleted = p
        task = self.tasks[body.task_id]
        self._free(task)
        self._void_plan_requests(task.id)
        self._put(task, event, status="completed", owner=body.owner, summary=body.summary)
        self.team_seq = event.seq

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
        self.plan_requests[body.request_id] = PlanRequest(
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
        self.plan_requests[body.request_id] = PlanRequest(
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
        self.plan_requests.pop(body.request_id, None)

    def worktree_bound(self, event: Event, p: Any) -> None:
        body: WorktreeBound = p
        self._put(self.tasks[body.task_id], event, worktree=body.name)
        self.team_seq = event.seq

    def worktree_removed(self, event: Event, p: Any) -> None:
        body: WorktreeRemoved = p
        for task in [t for t in self.tasks.values() if t.worktree == body.name]:
            self._put(task, event, worktree=None)
        self.team_seq = event.seq


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
    "plan.requested": _Builder.plan_requested,
    "plan.submitted": _Builder.plan_submitted,
    "plan.reviewed": _Builder.plan_reviewed,
    "worktree.bound": _Builder.worktree_bound,
    "worktree.removed": _Builder.worktree_removed,
}
