"""The live view's data: a frozen ``Snapshot`` of a team, built by a pure function.

``build_snapshot`` does no I/O: it takes the folded ``TeamState`` and values other modules
already compute (inbox counts, job views, cron views, the set of members whose lease is held,
pending permission requests, the progress of workflow runs) and arranges them the way a person reads a team at a glance.
``actors.live.load`` gathers those inputs from a repository; ``actors.live.render`` draws a
snapshot with rich; ``Snapshot.as_json`` is the ``teamctl watch --once --json`` document.

Two snapshots of an unchanged team compare equal (``taken_at`` is left out of equality), so a
refresher can skip redraws when a wake-up hint changed nothing a person would see.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from actors.board.state import NO_USAGE, Task, TeamState

if TYPE_CHECKING:
    from actors.jobs.cron import CronView
    from actors.jobs.table import JobView
    from mailboxes.events import Event

Column = Literal["in_progress", "ready", "blocked", "completed", "deleted"]
COLUMNS: tuple[Column, ...] = ("in_progress", "ready", "blocked", "completed", "deleted")
"""Task columns in the order the view shows them."""
ACTIVE_STATUSES = frozenset(
    {
        "starting",
        "working",
        "idle",
        "waiting_plan_approval",
        "waiting_permission",
        "stalled",
        "stopping",
    }
)
"""Agent statuses that mean "a process should be hosting it right now"."""
RECENT_JOBS = 3
"""Finished jobs shown after the running ones (most recent first)."""
RECENT_RUNS = 3
"""Finished workflow runs shown after the running ones (most recent first)."""
RECENT_PROGRESS = 20
"""Progress lines a workflow run keeps (its latest ones)."""


# --- rows ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberRow:
    """A member: its journaled status, whether a process hosts it, what it holds."""

    name: str
    kind: str
    """``agent`` (hosted by a runtime) or ``human`` (claims from a terminal)."""
    role: str
    status: str
    """As journaled: starting, working, idle, waiting_plan_approval, waiting_permission,
    stalled (no progress, or the same tool call repeated), stopping, stopped, crashed (agents)
    or active (humans)."""
    reason: str
    alive: bool | None
    """True while a process holds the member's lease; None for humans (they hold none)."""
    task_id: str | None
    task_subject: str | None
    worktree: str | None
    unread: int
    tokens: int = 0
    """Every token of the member's model calls so far (``usage.recorded``)."""
    cost_usd: float = 0.0
    """Their cost in USD (calls on a model of unknown price count none)."""

    @property
    def orphaned(self) -> bool:
        """An agent journaled as active whose hosting process is gone (not yet noticed)."""
        return self.alive is False and self.status in ACTIVE_STATUSES


@dataclass(frozen=True, slots=True)
class TaskRow:
    """A task in the column it belongs to."""

    id: str
    subject: str
    status: str
    column: Column
    owner: str | None
    human: bool
    blocked_by: tuple[str, ...]
    waiting_on: tuple[str, ...]
    """The ``blocked_by`` tasks not completed yet."""
    blocks: tuple[str, ...]
    worktree: str | None
    plan: str
    """The plan gate: none, required, requested, submitted, approved, rejected."""
    epoch: int


@dataclass(frozen=True, slots=True)
class InboxRow:
    """One agent's Maildir: ``unread`` in ``new/``, ``read`` in ``cur/``."""

    agent: str
    unread: int
    read: int


@dataclass(frozen=True, slots=True)
class JobRow:
    """A background job (running, or among the most recent finished)."""

    job_id: str
    owner: str
    command: str
    status: str
    exit_code: int | None
    started_at: float
    finished_at: float | None
    log_path: str
    gone: bool = False
    """Running as far as the journal knows, but its process no longer exists (the runtime that
    owned it died; the next runtime reports it ``lost``)."""


@dataclass(frozen=True, slots=True)
class CronRow:
    """An active cron job and when it fires next."""

    cron_id: str
    cron: str
    prompt: str
    owner: str
    recurring: bool
    tz: str | None
    next_fire: str | None
    """ISO time in the job's zone (None only for a job that cannot fire again)."""
    fired: int


@dataclass(frozen=True, slots=True)
class WorktreeRow:
    """A worktree the journal knows of and has not removed."""

    name: str
    branch: str
    path: str
    task_id: str | None
    task_status: str | None
    task_owner: str | None
    merged: bool
    merged_commit: str | None


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    """A question waiting for an answer: a plan to review or a permission to decide."""

    kind: Literal["plan", "permission"]
    request_id: str
    agent: str
    about: str
    """The task id (plans) or the tool (permissions)."""
    status: str


@dataclass(frozen=True, slots=True)
class WorkflowRow:
    """A workflow run: where it is, and its latest progress lines (``workflow.*`` events)."""

    run_id: str
    name: str
    status: str
    """``running``, ``completed`` or ``failed``."""
    phase: str | None
    done: int
    """Steps done (cached ones included)."""
    running: int
    """Steps started (tasks on the board) and not done yet."""
    cached: int
    """Steps answered from the journal by the last resume."""
    progress: tuple[tuple[int, str], ...]
    """``(journal seq, line)`` of the latest phase changes, steps started, done or cached and
    log lines (``actors.workflows.record.progress_line``; plain, unescaped text)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the live view shows, as of journal ``seq``."""

    team: str | None
    seq: int
    members: tuple[MemberRow, ...] = ()
    tasks: tuple[TaskRow, ...] = ()
    inboxes: tuple[InboxRow, ...] = ()
    jobs: tuple[JobRow, ...] = ()
    crons: tuple[CronRow, ...] = ()
    worktrees: tuple[WorktreeRow, ...] = ()
    approvals: tuple[ApprovalRow, ...] = ()
    workflows: tuple[WorkflowRow, ...] = ()
    taken_at: float = field(default=0.0, compare=False)
    """Wall-clock time of the reading (not part of equality)."""

    def column(self, name: Column) -> tuple[TaskRow, ...]:
        """The tasks in column ``name``, in id order."""
        return tuple(t for t in self.tasks if t.column == name)

    def task_counts(self) -> dict[str, int]:
        """How many tasks per column (every column present)."""
        counts: dict[str, int] = dict.fromkeys(COLUMNS, 0)
        for task in self.tasks:
            counts[task.column] += 1
        return counts

    def as_json(self) -> dict[str, Any]:
        """The JSON document of ``teamctl watch --once --json``."""
        out = asdict(self)
        out["task_counts"] = self.task_counts()
        out["unread"] = {row.agent: row.unread for row in self.inboxes}
        for row, member in zip(out["members"], self.members, strict=True):
            row["orphaned"] = member.orphaned
        return out


# --- pending permission requests (a small fold of their own) -------------------------------------


class PendingPermission(NamedTuple):
    """A ``permission.requested`` with no ``permission.decided`` yet."""

    request_id: str
    agent: str
    tool: str
    requested_at: float


PermissionTable = Mapping[str, PendingPermission]
NO_PERMISSIONS: PermissionTable = MappingProxyType({})


def fold_permissions(table: PermissionTable, events: Iterable[Event]) -> PermissionTable:
    """``table`` with the permission events among ``events`` applied (others ignored); pure."""
    out: dict[str, PendingPermission] | None = None
    for event in events:
        if not event.type.startswith("permission."):
            continue
        out = dict(table) if out is None else out
        rid = str(event.data.get("request_id", ""))
        if event.type == "permission.requested":
            agent, tool = str(event.data.get("agent", "")), str(event.data.get("tool", ""))
            out[rid] = PendingPermission(rid, agent, tool, event.ts)
        elif event.type == "permission.decided":
            out.pop(rid, None)
    return table if out is None else MappingProxyType(out)


# --- workflow runs (a small fold of their own) ---------------------------------------------------


class RunProgress(NamedTuple):
    """What the live view knows of one workflow run."""

    run_id: str
    name: str
    status: str
    phase: str | None
    started: frozenset[str]
    done: frozenset[str]
    cached: int
    progress: tuple[tuple[int, str], ...]
    at: float
    """When it started or finished (the order of finished runs)."""


WorkflowTable = Mapping[str, RunProgress]
NO_WORKFLOWS: WorkflowTable = MappingProxyType({})


def fold_workflows(table: WorkflowTable, events: Iterable[Event]) -> WorkflowTable:
    """``table`` with the ``workflow.*`` events among ``events`` applied; pure."""
    from actors.workflows.record import progress_line

    out: dict[str, RunProgress] | None = None
    for event in events:
        if not event.type.startswith("workflow."):
            continue
        out = dict(table) if out is None else out
        data = event.data
        run_id = str(data.get("run_id", ""))
        run = out.get(run_id)
        kind = event.type.removeprefix("workflow.")
        if kind == "started":
            run = RunProgress(
                run_id, str(data.get("name", "")), "running", None, frozenset(), frozenset(), 0,
                (), event.ts,
            )  # fmt: skip
        elif run is None:
            continue
        elif kind == "resumed":
            run = run._replace(status="running", cached=0, at=event.ts)
        elif kind == "phase":
            run = run._replace(phase=data.get("title"))
        elif kind == "step_started":
            run = run._replace(started=run.started | {str(data.get("key"))})
        elif kind == "step_cached":
            key = str(data.get("key"))
            run = run._replace(done=run.done | {key}, cached=run.cached + 1)
        elif kind == "step_completed":
            run = run._replace(done=run.done | {str(data.get("key"))})
        elif kind == "finished":
            run = run._replace(status=str(data.get("status")), at=event.ts)
        line = progress_line(event.type, data)
        if line is not None:
            run = run._replace(progress=(*run.progress, (event.seq, line))[-RECENT_PROGRESS:])
        out[run_id] = run
    return table if out is None else MappingProxyType(out)


def _workflow_rows(table: WorkflowTable) -> tuple[WorkflowRow, ...]:
    def row(r: RunProgress) -> WorkflowRow:
        running = len(r.started - r.done) if r.status == "running" else 0
        return WorkflowRow(
            r.run_id, r.name, r.status, r.phase, len(r.done), running, r.cached, r.progress
        )

    live = sorted((r for r in table.values() if r.status == "running"), key=lambda r: r.at)
    ended = sorted((r for r in table.values() if r.status != "running"), key=lambda r: -r.at)
    return tuple(row(r) for r in (*live, *ended[:RECENT_RUNS]))


# --- the builder ---------------------------------------------------------------------------------


def _column(state: TeamState, task: Task) -> Column:
    if task.status == "pending":
        return "ready" if state.is_ready(task) else "blocked"
    return task.status


def _task_row(state: TeamState, task: Task) -> TaskRow:
    tasks = state.tasks
    waiting = tuple(
        b for b in task.blocked_by if (dep := tasks.get(b)) is None or dep.status != "completed"
    )
    return TaskRow(
        id=task.id,
        subject=task.subject,
        status=task.status,
        column=_column(state, task),
        owner=task.owner,
        human=task.human,
        blocked_by=task.blocked_by,
        waiting_on=waiting,
        blocks=task.blocks,
        worktree=task.worktree,
        plan=task.plan.status,
        epoch=task.epoch,
    )


def _member_rows(
    state: TeamState, alive: Collection[str], unread: Mapping[str, int]
) -> tuple[MemberRow, ...]:
    rows = []
    for member in state.members.values():
        held = state.holding(member.name)
        used = state.agent_usage.get(member.name, NO_USAGE)
        rows.append(
            MemberRow(
                name=member.name,
                kind=member.kind,
                role=member.role,
                status=member.status,
                reason=member.reason,
                alive=None if member.kind == "human" else member.name in alive,
                task_id=None if held is None else held.id,
                task_subject=None if held is None else held.subject,
                worktree=None if held is None else held.worktree,
                unread=unread.get(member.name, 0),
                tokens=used.tokens,
                cost_usd=used.cost_usd,
            )
        )
    return tuple(rows)


def _job_rows(jobs: Iterable[JobView], gone: Collection[str]) -> tuple[JobRow, ...]:
    running: list[JobRow] = []
    finished: list[JobRow] = []
    for v in jobs:
        row = JobRow(
            job_id=v.job_id,
            owner=v.owner,
            command=v.command,
            status=v.status,
            exit_code=v.exit_code,
            started_at=v.started_at,
            finished_at=v.finished_at,
            log_path=v.log_path,
            gone=v.status == "running" and v.job_id in gone,
        )
        (running if v.status == "running" else finished).append(row)
    running.sort(key=lambda r: (r.started_at, r.job_id))
    finished.sort(key=lambda r: -(r.finished_at or r.started_at))
    return (*running, *finished[:RECENT_JOBS])


def _fire_time(row: CronRow) -> float:
    return (
        float("inf") if row.next_fire is None else datetime.fromisoformat(row.next_fire).timestamp()
    )


def _cron_rows(crons: Iterable[CronView]) -> tuple[CronRow, ...]:
    rows = [
        CronRow(v.cron_id, v.cron, v.prompt, v.owner, v.recurring, v.tz, v.next_fire, v.fired)
        for v in crons
        if v.status == "active"
    ]
    return tuple(sorted(rows, key=lambda r: (_fire_time(r), r.cron_id)))


def _worktree_rows(state: TeamState) -> tuple[WorktreeRow, ...]:
    rows = []
    for wt in state.worktrees.values():
        if wt.removed:
            continue
        task = state.tasks.get(wt.task_id) if wt.task_id else None
        rows.append(
            WorktreeRow(
                name=wt.name,
                branch=wt.branch,
                path=wt.path,
                task_id=wt.task_id,
                task_status=None if task is None else task.status,
                task_owner=None if task is None else task.owner,
                merged=wt.merged_commit is not None,
                merged_commit=wt.merged_commit,
            )
        )
    return tuple(rows)


def _approval_rows(state: TeamState, permissions: PermissionTable) -> tuple[ApprovalRow, ...]:
    plans = [
        ApprovalRow("plan", r.request_id, r.teammate, r.task_id, r.status)
        for r in sorted(state.plan_requests.values(), key=lambda r: r.requested_at)
    ]
    asks = [
        ApprovalRow("permission", p.request_id, p.agent, p.tool, "requested")
        for p in sorted(permissions.values(), key=lambda p: p.requested_at)
    ]
    return (*plans, *asks)


def build_snapshot(
    state: TeamState,
    *,
    inboxes: Mapping[str, tuple[int, int]] | None = None,
    jobs: Iterable[JobView] = (),
    crons: Iterable[CronView] = (),
    alive: Collection[str] = frozenset(),
    gone_jobs: Collection[str] = frozenset(),
    permissions: PermissionTable = NO_PERMISSIONS,
    workflows: WorkflowTable = NO_WORKFLOWS,
    taken_at: float = 0.0,
) -> Snapshot:
    """The snapshot of a team; pure.

    ``inboxes`` maps agent → (unread, read) as ``Maildir.counts`` gives them; ``jobs`` and
    ``crons`` are the views of ``actors.jobs.table.job_views`` and ``actors.jobs.cron.views``; ``alive``
    names the agents whose lease is held right now, ``gone_jobs`` the running jobs whose process is
    gone, ``workflows`` the runs as ``fold_workflows`` folds them.
    """
    counts = dict(inboxes or {})
    unread = {agent: pair[0] for agent, pair in counts.items()}
    return Snapshot(
        team=state.name,
        seq=state.seq,
        members=_member_rows(state, alive, unread),
        tasks=tuple(_task_row(state, t) for t in state.tasks.values()),
        inboxes=tuple(InboxRow(a, n, r) for a, (n, r) in sorted(counts.items())),
        jobs=_job_rows(jobs, gone_jobs),
        crons=_cron_rows(crons),
        worktrees=_worktree_rows(state),
        approvals=_approval_rows(state, permissions),
        workflows=_workflow_rows(workflows),
        taken_at=taken_at,
    )
