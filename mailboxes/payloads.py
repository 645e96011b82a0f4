"""The typed payload of each journal event type, and the upgrades of older shapes.

Every event's ``data`` parses into the frozen record registered here for its type
(``parse_payload``; ``mailboxes.events.payload`` for an event), first upgrading older shapes
(``v`` below the model's version) with the registered upgrade functions. Stored history is
never rewritten: upgrades happen on load only. ``mailboxes.events`` re-exports every name here.

The payloads are ``teamctl_base.records.Record``s: declared as pydantic models are, they make,
parse and dump plain values without pydantic, and hand anything else to the pydantic model of
the same declarations, which then decides and refuses with its own ``ValidationError``; so
``teamctl task add``, ``task claim`` and ``send`` import no pydantic (docs/ARCHITECTURE.md,
"Start-up and benchmarks").

Adding a new shape to a type: bump the model's ``VERSION`` and register one function::

    @upgrade("member.spawned", from_v=1)
    def _spawned_v1(data: dict[str, Any]) -> dict[str, Any]: ...
"""

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeVar

from mailboxes.errors import InvalidEvent
from teamctl_base.records import Field, Record

__all__ = [
    "PAYLOADS",
    "CronCancelled",
    "CronFired",
    "CronScheduled",
    "GoalCleared",
    "GoalEvaluated",
    "GoalSet",
    "InboxAcknowledged",
    "JobFinished",
    "JobStarted",
    "JournalTailRepaired",
    "MemberSpawned",
    "MemberStatusChanged",
    "MemberStopped",
    "Payload",
    "PermissionDecided",
    "PermissionRequested",
    "PlanRequested",
    "PlanReviewed",
    "PlanSubmitted",
    "ShutdownAcknowledged",
    "ShutdownRequested",
    "TaskClaimed",
    "TaskCompleted",
    "TaskCreated",
    "TaskDeleted",
    "TaskReleased",
    "TaskUpdated",
    "TaskVerified",
    "TeamCreated",
    "Upgrade",
    "UsageRecorded",
    "WorkflowFinished",
    "WorkflowLog",
    "WorkflowPhase",
    "WorkflowResumed",
    "WorkflowStarted",
    "WorkflowStepCached",
    "WorkflowStepCompleted",
    "WorkflowStepStarted",
    "WorktreeBound",
    "WorktreeCreated",
    "WorktreeMerged",
    "WorktreeRemoved",
    "parse_payload",
    "upgrade",
    "upgrade_data",
]


class Payload(Record):
    """Base of every event payload. ``TYPE`` is the event type, ``VERSION`` the current shape."""

    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1


# --- team and members -------------------------------------------------------------------------


class TeamCreated(Payload):
    TYPE = "team.created"
    name: str


class MemberSpawned(Payload):
    """v2: ``role`` (v1 stored it as ``agent_type``)."""

    TYPE = "member.spawned"
    VERSION = 2
    name: str
    role: str
    model: str | None = None
    kind: Literal["agent", "human"] = "agent"
    prompt: str = ""
    plan_required: bool = False
    tools: tuple[str, ...] | None = None


class MemberStatusChanged(Payload):
    TYPE = "member.status_changed"
    name: str
    status: str
    reason: str = ""


class MemberStopped(Payload):
    TYPE = "member.stopped"
    name: str
    reason: str = ""


# --- tasks and plans ---------------------------------------------------------------------------


class TaskCreated(Payload):
    """v2: ``verify``, the shell command that must exit 0 before the task counts as done."""

    TYPE = "task.created"
    VERSION = 2
    task_id: str
    subject: str
    description: str = ""
    blocked_by: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    plan_required: bool = False
    role: str | None = None
    verify: str | None = None


class TaskUpdated(Payload):
    """``None`` means unchanged."""

    TYPE = "task.updated"
    task_id: str
    subject: str | None = None
    description: str | None = None
    add_blocked_by: tuple[str, ...] = ()
    remove_blocked_by: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None


class TaskClaimed(Payload):
    TYPE = "task.claimed"
    task_id: str
    owner: str
    epoch: int
    human: bool = False


class TaskReleased(Payload):
    """v2: ``forced_by``, the person who released a live agent's task by hand (``--force``)."""

    TYPE = "task.released"
    VERSION = 2
    task_id: str
    owner: str
    epoch: int
    reason: str
    forced_by: str | None = None


class TaskCompleted(Payload):
    """v2: ``forced_by``, the person who completed a live agent's task by hand (``--force``).
    v3: ``commit`` and ``remote``, where a worktree-bound task's work is (docs/SCALE-OUT.md,
    "Code across hosts")."""

    TYPE = "task.completed"
    VERSION = 3
    task_id: str
    owner: str
    epoch: int
    summary: str = ""
    unblocked: tuple[str, ...] = ()
    forced_by: str | None = None
    commit: str | None = None
    """The tip of the task's worktree branch when it was completed (None: no worktree, or
    completed without one of its clone's Worktrees actors)."""
    remote: str | None = None
    """The git remote ``commit`` was pushed to (as ``wt/<name>``); None = it stayed in the clone
    that completed it."""


class TaskVerified(Payload):
    """One run of a task's ``verify`` command: at ``complete_task`` (``stage`` complete, in the
    task's worktree or the main checkout) or on the merge result before ``worktree merge`` lands
    it (``stage`` merge, ``commit`` the candidate). ``output`` is capped; ``exit_code`` None =
    timed out or could not start."""

    TYPE = "task.verified"
    task_id: str
    command: str
    stage: Literal["complete", "merge"]
    passed: bool
    exit_code: int | None = None
    timed_out: bool = False
    output: str = ""
    worktree: str | None = None
    commit: str | None = None


class TaskDeleted(Payload):
    TYPE = "task.deleted"
    task_id: str
    force: bool = False


class PlanRequested(Payload):
    TYPE = "plan.requested"
    task_id: str
    request_id: str
    teammate: str
    epoch: int


class PlanSubmitted(Payload):
    TYPE = "plan.submitted"
    task_id: str
    request_id: str
    owner: str
    epoch: int
    plan: str


class PlanReviewed(Payload):
    TYPE = "plan.reviewed"
    task_id: str
    request_id: str
    approve: bool
    feedback: str = ""
    reviewer: str


# --- mail ----------------------------------------------------------------------------------------


class InboxAcknowledged(Payload):
    """A person marked a live agent's unread mail as read (``teamctl inbox AGENT --ack
    --force``): the agent will never see ``message_ids``; ``forced_by`` says who did it."""

    TYPE = "inbox.acknowledged"
    agent: str
    message_ids: tuple[str, ...]
    forced_by: str


# --- protocols ---------------------------------------------------------------------------------


class ShutdownRequested(Payload):
    TYPE = "shutdown.requested"
    name: str
    request_id: str


class ShutdownAcknowledged(Payload):
    TYPE = "shutdown.acknowledged"
    name: str
    request_id: str
    approve: bool = True


class PermissionRequested(Payload):
    TYPE = "permission.requested"
    request_id: str
    agent: str
    tool: str
    input: dict[str, Any]
    reason: str = ""


class PermissionDecided(Payload):
    TYPE = "permission.decided"
    request_id: str
    decision: Literal["allow", "deny"]
    by: str
    reason: str = ""


# --- scheduler, jobs, worktrees ----------------------------------------------------------------


class CronScheduled(Payload):
    TYPE = "cron.scheduled"
    cron_id: str
    cron: str
    prompt: str
    recurring: bool
    tz: str | None = None


class CronCancelled(Payload):
    TYPE = "cron.cancelled"
    cron_id: str


class CronFired(Payload):
    """``slot`` is the ISO time of the schedule slot; ``missed`` slots skipped before it."""

    TYPE = "cron.fired"
    cron_id: str
    slot: str
    missed: int = 0


class JobStarted(Payload):
    TYPE = "job.started"
    job_id: str
    owner: str
    command: str
    cwd: str
    pid: int | None = None
    start_time: float | None = None


class JobFinished(Payload):
    TYPE = "job.finished"
    job_id: str
    status: str
    exit_code: int | None = None


class WorktreeCreated(Payload):
    TYPE = "worktree.created"
    name: str
    branch: str
    base: str
    path: str


class WorktreeBound(Payload):
    TYPE = "worktree.bound"
    name: str
    task_id: str


class WorktreeRemoved(Payload):
    TYPE = "worktree.removed"
    name: str
    branch_deleted: bool = False


class WorktreeMerged(Payload):
    TYPE = "worktree.merged"
    name: str
    into: str
    commit: str
    squash: bool = False


class UsageRecorded(Payload):
    """One model call of ``agent``: the tokens the model client reported as billed for it and
    their cost in USD (``None``: the model's price is unknown), charged to ``task_id``, the task
    the agent held when the call was recorded (``None``: none). Counted once per stored event."""

    TYPE = "usage.recorded"
    agent: str
    model: str
    task_id: str | None = None
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)


class JournalTailRepaired(Payload):
    """Written by the journal itself: a torn last line (1-based ``line_no``) was dropped."""

    TYPE = "journal.tail_repaired"
    line_no: int
    bytes_dropped: int


# --- workflows ---------------------------------------------------------------------------------


class WorkflowStarted(Payload):
    """A workflow run began: ``file_sha256`` is the script's hash, so a resume can tell that the
    file changed since (docs/ARCHITECTURE.md, "Workflows")."""

    TYPE = "workflow.started"
    run_id: str
    name: str
    args: Any = None
    file: str
    file_sha256: str


class WorkflowResumed(Payload):
    """``teamctl workflow resume`` (or ``teamctl resume``) re-runs the script of ``run_id``."""

    TYPE = "workflow.resumed"
    run_id: str
    file_sha256: str
    file_changed: bool = False


class WorkflowStepCompleted(Payload):
    """One ``agent()`` step done: its stable content ``key`` and its (validated) ``result``,
    returned again without a model call when a resumed run asks for the same key."""

    TYPE = "workflow.step_completed"
    run_id: str
    key: str
    label: str | None = None
    name: str = ""
    """How progress names the step: its label, or the first line of its prompt."""
    phase: str | None = None
    task_id: str | None = None
    result: Any = None


class WorkflowStepStarted(Payload):
    """An ``agent()`` step put on the board as ``task_id`` (``attempt`` 1: the schema retry)."""

    TYPE = "workflow.step_started"
    run_id: str
    key: str
    name: str = ""
    phase: str | None = None
    task_id: str | None = None
    attempt: int = 0


class WorkflowStepCached(Payload):
    """A resumed run's step answered from its recorded result (no task, no model call)."""

    TYPE = "workflow.step_cached"
    run_id: str
    key: str
    name: str = ""
    phase: str | None = None


class WorkflowPhase(Payload):
    TYPE = "workflow.phase"
    run_id: str
    title: str


class WorkflowLog(Payload):
    TYPE = "workflow.log"
    run_id: str
    text: str


class WorkflowFinished(Payload):
    """The run ended: ``completed`` with its ``result``, or ``failed`` with the ``error``."""

    TYPE = "workflow.finished"
    run_id: str
    status: Literal["completed", "failed"]
    result: Any = None
    error: str | None = None


# --- goals ------------------------------------------------------------------------------------


class GoalSet(Payload):
    """An agent's goal armed (``harness.goal``; the actor is the agent): ``goal`` is the
    ``harness.goal.Goal`` as JSON (condition, check, caps), ``at`` when (docs/ARCHITECTURE.md,
    "Goals")."""

    TYPE = "goal.set"
    goal: dict[str, Any]
    at: float = 0.0


class GoalEvaluated(Payload):
    """One judgement of an agent's goal at a stop: ``state`` stays ``active`` while it blocks
    (``blocks`` in a row), or ends it ``met``, ``unmet`` (the cap), ``impossible`` or ``error``."""

    TYPE = "goal.evaluated"
    ok: bool
    state: Literal["active", "met", "unmet", "impossible", "error"]
    reason: str = ""
    tokens: int = 0
    blocks: int = 0


class GoalCleared(Payload):
    """The agent's goal was cleared (console ``/goal clear``, ``teamctl run --fresh``)."""

    TYPE = "goal.cleared"


# --- registry ----------------------------------------------------------------------------------

PAYLOADS: Mapping[str, type[Payload]] = MappingProxyType(
    {model.TYPE: model for model in Payload.__subclasses__()}
)
"""Event type → payload model (the current shape): every direct subclass of ``Payload``."""

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns the ``data`` of version ``n`` into the ``data`` of version ``n + 1`` (pure)."""

_UPGRADES: dict[tuple[str, int], Upgrade] = {}

_F = TypeVar("_F", bound=Upgrade)


def upgrade(event_type: str, *, from_v: int) -> Callable[[_F], _F]:
    """Register the function that upgrades ``event_type`` data from ``from_v`` to ``from_v+1``.

    Registered at import time of this module only; never changed afterwards.
    """

    def register(func: _F) -> _F:
        key = (event_type, from_v)
        if key in _UPGRADES:
            raise ValueError(f"upgrade {event_type} v{from_v} registered twice")
        _UPGRADES[key] = func
        return func

    return register


@upgrade("member.spawned", from_v=1)
def _member_spawned_v1(data: dict[str, Any]) -> dict[str, Any]:
    """v1 called the role ``agent_type`` (the Claude Code name); v2 calls it ``role``."""
    if "agent_type" not in data:
        return data
    upgraded = {k: v for k, v in data.items() if k != "agent_type"}
    upgraded.setdefault("role", data["agent_type"])
    return upgraded


@upgrade("task.created", from_v=1)
@upgrade("task.released", from_v=1)
@upgrade("task.completed", from_v=1)
def _new_optional_field_v1(data: dict[str, Any]) -> dict[str, Any]:
    """v1 had no ``forced_by`` (nobody forced it) or ``verify`` (no check): the defaults."""
    return data


@upgrade("task.completed", from_v=2)
def _completed_v2(data: dict[str, Any]) -> dict[str, Any]:
    """v2 had no ``commit`` or ``remote`` (nothing recorded): the defaults."""
    return data


def upgrade_data(event_type: str, v: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` stored at version ``v`` in the current shape of ``event_type``."""
    model = PAYLOADS.get(event_type)
    if model is None:
        raise InvalidEvent(f"unknown event type {event_type!r}")
    if v > model.VERSION:
        raise InvalidEvent(
            f"{event_type} v{v} is newer than this program understands (v{model.VERSION})"
        )
    current = dict(data)
    while v < model.VERSION:
        step = _UPGRADES.get((event_type, v))
        if step is None:
            raise InvalidEvent(f"no upgrade registered for {event_type} v{v}")
        current = step(current)
        v += 1
    return current


def parse_payload(event_type: str, v: int, data: Mapping[str, Any]) -> Payload:
    """Parse ``data`` of ``event_type`` at version ``v`` into its current payload model."""
    current = upgrade_data(event_type, v, data)
    model = PAYLOADS[event_type]
    try:
        parsed: Payload = model.model_validate(current)
    except ValueError as exc:
        from pydantic import ValidationError  # only a payload the record left to its twin

        if not isinstance(exc, ValidationError):
            raise
        raise InvalidEvent(f"bad {event_type} v{v} payload {dict(data)!r}: {exc}") from None
    return parsed
