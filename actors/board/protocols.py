"""Journal commands of the protocols: plans, shutdown answers, permission requests
(docs/ARCHITECTURE.md, "Protocols").

Each command is a decision run through ``Board.execute``, so it is checked under the journal's
lock against caught-up state, like a claim. Events record the agent that caused them.

Plans are folded into ``TeamState`` (``Task.plan``, ``TeamState.plan_requests``). Shutdown
answers and permission requests are not folded; their existence is checked through the
idempotency keys (``op_id``) the fold keeps: ``permission.requested:<id>`` and
``permission.decided:<id>``, so a decision can never precede its request and the first decision
wins (a late answer, or a timeout racing a human, gets the stored decision back).

Plan request ids name the task and epoch they are bound to (``plan-task_3-e2-1a2b3c``), so a
review of a request voided by a release or re-claim is refused as a ``StaleEpoch``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from actors.board.board import Board
from actors.board.rules import fence
from actors.board.state import PlanRequest, Task, TeamState
from actors.errors import StaleEpoch, TeamError, UnknownMember
from mailboxes.events import Event, EventDraft, draft, payload
from mailboxes.ports import EventStore
from teamctl_base.clock import new_id

if TYPE_CHECKING:
    from mailboxes.payloads import PermissionRequested

__all__ = [
    "PermissionAnswer",
    "PlanReview",
    "ProtocolError",
    "acknowledge_shutdown",
    "decide_permission",
    "new_permission_id",
    "new_plan_id",
    "pending_permissions",
    "request_permission",
    "request_plan",
    "review_plan",
    "submit_plan",
]

_REQUESTED = "permission.requested:"
_DECIDED = "permission.decided:"
"""The op_id prefixes of a permission request and of its decision (then the request id)."""
_PLAN_ID = re.compile(r"^plan-(task_\d+)-e(\d+)-[0-9a-f]+$")


class ProtocolError(TeamError):
    """A protocol step that is not allowed now (the message says why and what to do)."""


def new_plan_id(task_id: str, epoch: int) -> str:
    """A fresh plan request id bound to ``task_id`` at ``epoch``."""
    return f"plan-{task_id}-e{epoch}-{new_id()[:6]}"


def new_permission_id() -> str:
    """A fresh permission request id."""
    return f"perm-{new_id()[:8]}"


def _plan_op(kind: str, request_id: str) -> str:
    return f"plan.{kind}:{request_id}"


# --- plans ---------------------------------------------------------------------------------------


def request_plan(board: Board, teammate: str, tid: str, *, by: str) -> PlanRequest:
    """Journal ``plan.requested``: ``teammate`` must submit a plan before writing on ``tid``,
    which it must hold now. Asking again while a request is open returns the open one."""
    made: list[str] = []

    def decision(st: TeamState) -> Sequence[EventDraft]:
        task = st.task(tid)
        if task.status != "in_progress" or task.owner != teammate:
            held = f"held by {task.owner}" if task.status == "in_progress" else task.status
            raise ProtocolError(f"{teammate} does not hold {tid} (it is {held})")
        if task.plan.status in ("requested", "submitted") and task.plan.epoch == task.epoch:
            made.append(str(task.plan.request_id))
            return ()
        if task.plan.status == "approved" and task.plan.epoch == task.epoch:
            raise ProtocolError(f"the plan for {tid} is already approved for this claim")
        rid = new_plan_id(tid, task.epoch)
        made.append(rid)
        from mailboxes.payloads import PlanRequested

        body = PlanRequested(task_id=tid, request_id=rid, teammate=teammate, epoch=task.epoch)
        return (draft(body.TYPE, by, body, _plan_op("requested", rid)),)

    state, _ = board.execute(decision)
    return state.plan_requests[made[-1]]


def submit_plan(board: Board, owner: str, plan: str, *, epoch: int | None = None) -> PlanRequest:
    """Journal ``plan.submitted`` for the task ``owner`` holds, fenced by its claim ``epoch``
    (default: the epoch of the claim as the board sees it now). Reuses an open
    ``plan.requested`` id; refused while an earlier submission waits for review."""
    if not plan.strip():
        raise ProtocolError("the plan is empty")
    made: list[str] = []

    def decision(st: TeamState) -> Sequence[EventDraft]:
        task = st.holding(owner)
        if task is None:
            raise ProtocolError(f"{owner} holds no task: claim one before submitting a plan")
        fence(st, task.id, owner, task.epoch if epoch is None else epoch)
        current = task.plan.epoch == task.epoch
        if current and task.plan.status == "submitted":
            raise ProtocolError(
                f"plan {task.plan.request_id} for {task.id} is still waiting for review"
            )
        if current and task.plan.status == "approved":
            raise ProtocolError(f"the plan for {task.id} is already approved: go ahead")
        reuse = current and task.plan.status == "requested" and task.plan.request_id
        rid = str(task.plan.request_id) if reuse else new_plan_id(task.id, task.epoch)
        made.append(rid)
        from mailboxes.payloads import PlanSubmitted

        body = PlanSubmitted(
            task_id=task.id, request_id=rid, owner=owner, epoch=task.epoch, plan=plan
        )
        return (draft(body.TYPE, owner, body, _plan_op("submitted", rid)),)

    state, _ = board.execute(decision)
    return state.plan_requests[made[-1]]


@dataclass(frozen=True)
class PlanReview:
    """A journaled review: the request it answered and the task after it."""

    request: PlanRequest
    approve: bool
    feedback: str
    reviewer: str
    task: Task


def _voided(st: TeamState, request_id: str) -> TeamError:
    """Why ``request_id`` is not pending (unknown, reviewed, or voided by a new claim)."""
    if _plan_op("reviewed", request_id) in st.ops:
        return ProtocolError(f"plan request {request_id} was already reviewed")
    match = _PLAN_ID.fullmatch(request_id)
    if match is None or match.group(1) not in st.tasks:
        return ProtocolError(f"unknown plan request {request_id!r}")
    tid, epoch = match.group(1), int(match.group(2))
    task = st.tasks[tid]
    if task.epoch != epoch:
        return StaleEpoch(tid, epoch, task.epoch)
    if _plan_op("submitted", request_id) not in st.ops:
        return ProtocolError(f"no plan has been submitted for request {request_id} yet")
    return ProtocolError(f"plan request {request_id} is no longer pending ({tid} is {task.status})")


def review_plan(
    board: Board, request_id: str, approve: bool, feedback: str = "", *, reviewer: str
) -> PlanReview:
    """Journal ``plan.reviewed`` for a submitted plan whose claim is still current. Refused:
    before the plan was submitted, for an old epoch (``StaleEpoch``), twice, or by its author."""
    found: list[PlanRequest] = []

    def decision(st: TeamState) -> Sequence[EventDraft]:
        req = st.plan_requests.get(request_id)
        if req is None or req.status != "submitted":
            raise _voided(st, request_id)
        if reviewer == req.teammate:
            raise ProtocolError(f"{reviewer} cannot review its own plan")
        fence(st, req.task_id, req.teammate, req.epoch)
        found.append(req)
        from mailboxes.payloads import PlanReviewed

        body = PlanReviewed(
            task_id=req.task_id,
            request_id=request_id,
            approve=approve,
            feedback=feedback,
            reviewer=reviewer,
        )
        return (draft(body.TYPE, reviewer, body, _plan_op("reviewed", request_id)),)

    state, _ = board.execute(decision)
    req = found[-1]
    return PlanReview(req, approve, feedback, reviewer, state.task(req.task_id))


# --- shutdown ------------------------------------------------------------------------------------


def acknowledge_shutdown(board: Board, name: str, request_id: str, *, approve: bool = True) -> None:
    """Journal ``shutdown.acknowledged`` by ``name`` (once per request id)."""

    def decision(st: TeamState) -> Sequence[EventDraft]:
        if name not in st.members:
            raise UnknownMember(name)
        from mailboxes.payloads import ShutdownAcknowledged

        body = ShutdownAcknowledged(name=name, request_id=request_id, approve=approve)
        return (draft(body.TYPE, name, body, f"shutdown.acknowledged:{request_id}"),)

    board.execute(decision)


# --- permission requests -------------------------------------------------------------------------

Verdict = Literal["allow", "deny"]


@dataclass(frozen=True)
class PermissionAnswer:
    """The decision on a permission request; ``first`` is False when it was already decided
    before this call (the stored decision is returned)."""

    request_id: str
    decision: Verdict
    by: str
    reason: str
    first: bool = True

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"


def request_permission(
    board: Board,
    request_id: str,
    agent: str,
    tool: str,
    tool_input: Mapping[str, Any],
    reason: str = "",
) -> None:
    """Journal ``permission.requested`` (idempotent per ``request_id``)."""

    def decision(st: TeamState) -> Sequence[EventDraft]:
        from mailboxes.payloads import PermissionRequested

        body = PermissionRequested(
            request_id=request_id, agent=agent, tool=tool, input=dict(tool_input), reason=reason
        )
        return (draft(body.TYPE, agent, body, f"permission.requested:{request_id}"),)

    board.execute(decision)


def decide_permission(
    board: Board, request_id: str, allow: bool, *, by: str, reason: str = ""
) -> PermissionAnswer:
    """Journal ``permission.decided``; the first decision wins. Unknown request → error."""
    from mailboxes.payloads import PermissionDecided

    verdict: Verdict = "allow" if allow else "deny"
    before: list[int] = []

    def decision(st: TeamState) -> Sequence[EventDraft]:
        before.append(st.seq)
        if f"{_REQUESTED}{request_id}" not in st.ops:
            raise ProtocolError(f"unknown permission request {request_id!r}")
        body = PermissionDecided(request_id=request_id, decision=verdict, by=by, reason=reason)
        # A known op_id makes the store return the stored decision instead of appending.
        return (draft(body.TYPE, by, body, f"permission.decided:{request_id}"),)

    _, events = board.execute(decision)
    stored = payload(events[0])
    assert isinstance(stored, PermissionDecided)
    first = events[0].seq > before[-1]
    return PermissionAnswer(request_id, stored.decision, stored.by, stored.reason, first)


def open_permission_events(store: EventStore, state: TeamState | None = None) -> list[Event]:
    """The ``permission.requested`` events with no decision yet, oldest first. With ``state``
    (folded from ``store``) they are found by their idempotency keys in ``state.ops`` and only
    they are read, instead of the whole journal."""
    if state is not None:
        found = []
        for op, seq in state.ops.items():
            if op.startswith(_REQUESTED) and _DECIDED + op[len(_REQUESTED) :] not in state.ops:
                event = next(iter(store.read_from(seq)), None)
                if event is not None and event.seq == seq:
                    found.append(event)
        return sorted(found, key=lambda e: e.seq)
    open_: dict[str, Event] = {}
    for event in store.read_from(1):
        if event.type == "permission.requested":
            open_[str(event.data.get("request_id"))] = event
        elif event.type == "permission.decided":
            open_.pop(str(event.data.get("request_id")), None)
    return list(open_.values())


def pending_permissions(
    store: EventStore, state: TeamState | None = None
) -> list[PermissionRequested]:
    """Permission requests in the journal with no decision yet, oldest first."""
    from mailboxes.payloads import PermissionRequested

    out = []
    for event in open_permission_events(store, state):
        body = payload(event)
        assert isinstance(body, PermissionRequested)
        out.append(body)
    return out
