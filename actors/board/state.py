"""Team state: the frozen values folded from journal events
(docs/ARCHITECTURE.md, "The task board").

The values the fold in ``actors.board.fold`` builds from journal events: ``TeamState`` (the
whole team up to a seq) with its ``Task``, ``Member``, ``PlanRequest``, ``WorktreeRecord`` and
``UsageTotals`` values, ``EMPTY`` (the state before the first event) and the ``task_<n>`` id helpers. Every value
is immutable; states share the values they did not change.

- task ids are ``task_<n>``, dense from 1, so dict order is creation order is id order;
- ``blocks`` is derived: the ids of live (not deleted) tasks listing this one in ``blocked_by``;
- ``Task.seq`` is the last seq that changed the task's projection, ``TeamState.team_seq`` the
  last that changed the team view, so projections are reproducible by replay.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from actors.errors import UnknownTask

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
    """One task on the board."""

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
    verify: str | None = None
    """A shell command that must exit 0 before the task may be completed and before its
    worktree's merge result lands (docs/ARCHITECTURE.md, "Verified tasks"); None = no check."""
    verified: bool | None = None
    """Whether the last run of ``verify`` (``task.verified``) passed; None = never run."""
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


class UsageTotals(NamedTuple):
    """Model usage summed over ``usage.recorded`` events (an agent's, a task's, the team's)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float = 0.0
    """The cost of the priced calls (``unpriced_calls`` are not in it)."""
    unpriced_calls: int = 0
    """Calls on a model whose price is unknown (``harness.model.pricing``)."""

    @property
    def tokens(self) -> int:
        """Every token: input, output, cache reads and cache writes."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_input_tokens
            + self.cache_creation_input_tokens
        )

    @property
    def cache_hit_rate(self) -> float:
        """Cache reads as a share of all input tokens (0.0 when there were none)."""
        read = self.cache_read_input_tokens
        total = self.input_tokens + read + self.cache_creation_input_tokens
        return read / total if total else 0.0

    def as_json(self) -> dict[str, Any]:
        """The fields of ``teamctl cost --json`` (the API's token names)."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_hit_rate": round(self.cache_hit_rate, 4),
            "cost_usd": self.cost_usd,
            "unpriced_calls": self.unpriced_calls,
        }

    def plus(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read_input_tokens: int,
        cache_creation_input_tokens: int,
        cost_usd: float | None,
    ) -> UsageTotals:
        """These totals with one more call."""
        return UsageTotals(
            self.calls + 1,
            self.input_tokens + input_tokens,
            self.output_tokens + output_tokens,
            self.cache_read_input_tokens + cache_read_input_tokens,
            self.cache_creation_input_tokens + cache_creation_input_tokens,
            self.cost_usd + (cost_usd or 0.0),
            self.unpriced_calls + (cost_usd is None),
        )


NO_USAGE = UsageTotals()


class WorktreeRecord(NamedTuple):
    """A git worktree the journal knows of (``worktree.*`` events); kept after removal."""

    name: str
    branch: str
    base: str
    """The base ref it was made from: a branch name, or a commit id when made from one."""
    path: str
    """Relative to the main checkout (``.worktrees/<name>``)."""
    task_id: str | None = None
    removed: bool = False
    merged_commit: str | None = None
    """The base-branch commit of the last ``worktree.merged`` (None = never merged)."""
    created_at: float = 0.0
    completed_commit: str | None = None
    """The branch tip its task's last ``task.completed`` recorded (None = none recorded)."""
    remote: str | None = None
    """The git remote ``completed_commit`` was pushed to (None = it stayed in its clone)."""


NO_RECENT = 1 << 62
"""``TeamState.recent_from`` of a state whose ``recent`` covers nothing."""


def _task_key(task: Task) -> int:
    return task_number(task.id)


class PendingHint:
    """A cache of one fact about one task map (``tasks``, compared by identity): no task
    numbered below ``number`` is pending. ``first_claimable`` raises ``number`` as it learns
    more; the fold hands a lowered copy to the state it makes (``TeamState.pending_hint``)."""

    __slots__ = ("number", "tasks")

    def __init__(self, tasks: Mapping[str, Task], number: int) -> None:
        self.tasks = tasks
        self.number = number


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
    worktrees: Mapping[str, WorktreeRecord] = field(default_factory=_empty)
    usage: UsageTotals = NO_USAGE
    """Model usage of the whole team (``usage.recorded``)."""
    agent_usage: Mapping[str, UsageTotals] = field(default_factory=_empty)
    """Model usage per agent, in order of first call."""
    task_usage: Mapping[str, UsageTotals] = field(default_factory=_empty)
    """Model usage per task: the calls made by an agent while it held the task."""
    untasked_usage: UsageTotals = NO_USAGE
    """Model usage of calls made holding no task (the lead's, a teammate's between tasks)."""
    recent: tuple[str, ...] = field(default=(), compare=False)
    """Ids of the tasks the last folds changed (repeats allowed): every task whose ``seq`` is at
    least ``recent_from`` is among them (``changed_since``). Kept by the fold, bounded."""
    recent_from: int = field(default=NO_RECENT, compare=False)
    """The seq from which ``recent`` is complete (``NO_RECENT``: it covers nothing, as in a state
    loaded from a snapshot or built by hand)."""
    pending_hint: PendingHint | None = field(default=None, compare=False, repr=False)
    """Where the search for a ready task may start (``pending_from``): kept by the fold, so a
    claim late in a long run does not walk past every finished task under the journal lock."""

    def pending_from(self) -> int:
        """A task number below which no task is pending (1 when not known)."""
        hint = self.pending_hint
        return hint.number if hint is not None and hint.tasks is self.tasks else 1

    def note_pending_from(self, number: int) -> None:
        """Record that no task numbered below ``number`` is pending (a pure fact about this
        state's tasks, so caching it in a frozen state is safe; concurrent notes keep a valid
        bound either way)."""
        hint = self.pending_hint
        if hint is not None and hint.tasks is self.tasks and number > hint.number:
            hint.number = number

    def changed_since(self, since: int) -> list[Task]:
        """Every task whose ``seq`` is at least ``since``, in id order. From ``recent`` when it
        covers ``since`` (a projection write after a claim looks at a few tasks, not all) and
        is shorter than the task map."""
        tasks = self.tasks
        if since < self.recent_from or len(self.recent) >= len(tasks):
            return [task for task in tasks.values() if task.seq >= since]
        found = [tasks[tid] for tid in dict.fromkeys(self.recent) if tasks[tid].seq >= since]
        found.sort(key=_task_key)
        return found

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

    def newly_ready_after(self, tid: str, done: Collection[str] = ()) -> tuple[str, ...]:
        """Dependents of ``tid`` that become ready once ``tid`` completes (it is not yet), with
        the tasks in ``done`` counted as completed too (completed earlier in the same commit)."""
        out = []
        for dep_id in self.task(tid).blocks:
            dep = self.tasks[dep_id]
            if dep.status != "pending" or dep.owner is not None:
                continue
            if all(
                b == tid or b in done or self.tasks[b].status == "completed" for b in dep.blocked_by
            ):
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
