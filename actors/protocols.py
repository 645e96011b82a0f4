"""Protocols between members: plan approval and shutdown, journal first, then mail
(docs/ARCHITECTURE.md, "Protocols").

Every step journals its event through ``actors.board.protocols`` (checked under the journal
lock) and only then sends the message, so a message never announces something the journal does
not hold. Plans are reviewed by the lead or by a human (``settings.approvals.plans``); with a
human reviewer no message goes to the lead and the request shows in ``teamctl plans``.

Permission requests are in ``actors.runtime.permission_requests``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors.board import protocols as bp
from actors.board.protocols import PlanReview, ProtocolError
from actors.board.state import PlanRequest, TeamState

if TYPE_CHECKING:
    from actors.factory import Team
    from actors.services import TeamChannel, TeamServices

__all__ = [
    "LEAD",
    "PlanSubmission",
    "ProtocolError",
    "answer_request",
    "answer_shutdown",
    "plan_mode_active",
    "request_plan",
    "review_plan",
    "submit_plan",
]

LEAD = "lead"


def plan_mode_active(state: TeamState, agent: str) -> bool:
    """True while ``agent`` must stay read-only because a plan is needed and not approved for
    its current claim: the task it holds requires a plan (or one was requested), or the member
    was spawned with ``plan_required``. Holding no task, a ``plan_required`` member stays in
    plan mode; anyone else is not gated by plans."""
    member = state.members.get(agent)
    member_requires = member is not None and member.plan_required
    task = state.holding(agent)
    if task is None:
        return member_requires
    plan = task.plan
    if not (plan.required or member_requires):
        return False
    return not (plan.status == "approved" and plan.epoch == task.epoch)


@dataclass(frozen=True)
class PlanSubmission:
    """A journaled plan and who reviews it (``"human"`` or the lead's name)."""

    request: PlanRequest
    reviewer: str


def request_plan(services: TeamServices, teammate: str, task_id: str, *, by: str) -> PlanRequest:
    """Ask ``teammate`` for a plan on the task it holds: journal, then tell it."""
    req = bp.request_plan(services.board, teammate, task_id, by=by)
    services.send(
        by,
        teammate,
        "message",
        {
            "text": (
                f"{by} asks for a plan before you change anything on {task_id}. Stay with "
                "read-only tools, then call submit_plan with your plan."
            ),
            "protocol": "plan_requested",
            "request_id": req.request_id,
            "task_id": task_id,
        },
    )
    return req


def submit_plan(
    services: TeamServices, owner: str, plan: str, *, epoch: int | None = None
) -> PlanSubmission:
    """Journal ``owner``'s plan for the task it holds, then send ``plan_approval_request`` to
    the lead (unless plans are reviewed by a human)."""
    req = bp.submit_plan(services.board, owner, plan, epoch=epoch)
    if services.settings.approvals.plans == "human":
        return PlanSubmission(req, "human")
    services.send(
        owner,
        LEAD,
        "plan_approval_request",
        {
            "text": f"{owner} submitted a plan for {req.task_id}:\n{plan}",
            "request_id": req.request_id,
            "task_id": req.task_id,
            "epoch": req.epoch,
            "plan": plan,
        },
    )
    return PlanSubmission(req, LEAD)


def review_plan(
    services: TeamServices,
    request_id: str,
    approve: bool,
    feedback: str = "",
    *,
    reviewer: str,
) -> PlanReview:
    """Journal the review, then send ``plan_approval_response`` to the plan's author."""
    review = bp.review_plan(services.board, request_id, approve, feedback, reviewer=reviewer)
    notify_review(services, review)
    return review


def review_text(review: PlanReview) -> str:
    """What the author reads about a review."""
    tid = review.request.task_id
    if review.approve:
        text = f"Your plan for {tid} was approved by {review.reviewer}. You may now make changes."
    else:
        text = (
            f"Your plan for {tid} was rejected by {review.reviewer}. Revise it and call "
            "submit_plan again. Stay with read-only tools until a plan is approved."
        )
    return f"{text}\nFeedback: {review.feedback}" if review.feedback else text


def notify_review(services: TeamServices, review: PlanReview) -> None:
    """Send ``plan_approval_response`` for a journaled review."""
    services.send(
        review.reviewer,
        review.request.teammate,
        "plan_approval_response",
        review_body(review),
    )


def review_body(review: PlanReview) -> dict[str, object]:
    """The body of a ``plan_approval_response``."""
    return {
        "text": review_text(review),
        "request_id": review.request.request_id,
        "task_id": review.request.task_id,
        "approve": review.approve,
        "feedback": review.feedback,
    }


def answer_shutdown(
    services: TeamChannel,
    name: str,
    request_id: str,
    *,
    approve: bool = True,
    requested_by: str = LEAD,
    reason: str = "",
) -> None:
    """``name`` answers a shutdown request: journal ``shutdown.acknowledged``, then send
    ``shutdown_response`` to whoever asked. The caller then stops the member."""
    bp.acknowledge_shutdown(services.board, name, request_id, approve=approve)
    text = f"{name} is shutting down." if approve else f"{name} declined to shut down."
    services.send(
        name,
        requested_by,
        "shutdown_response",
        {
            "text": f"{text} {reason}".strip(),
            "request_id": request_id,
            "approve": approve,
        },
    )


def _check_reviewer(services: TeamServices) -> None:
    if services.settings.approvals.plans == "human":
        raise ProtocolError(
            "plans are reviewed by a human in this team (settings approvals.plans); "
            "they answer with `teamctl approve|reject`"
        )


def lead_review_plan(
    services: TeamServices, request_id: str, approve: bool, feedback: str, *, reviewer: str
) -> PlanReview:
    """``review_plan`` for the lead's tool: refused when plans go to a human."""
    _check_reviewer(services)
    return review_plan(services, request_id, approve, feedback, reviewer=reviewer)


def answer_request(
    team: Team, request_id: str, approve: bool, feedback: str, who: str
) -> dict[str, Any]:
    """A person answers a request by its id, as ``teamctl approve|reject`` and the web
    dashboard do: ``plan-…`` reviews a plan (journal ``plan.reviewed`` by ``who``, then send
    ``plan_approval_response`` to its author), ``perm-…`` decides a permission request (journal
    ``permission.decided`` by ``who``; the waiting teammate sees it in the journal). Refused
    (``ProtocolError``): an unknown id, a stale, repeated or self review, a decided permission,
    a plan rejected without feedback. Returns what was decided (``line``: one sentence)."""
    if request_id.startswith("plan-"):
        return _answer_plan(team, request_id, approve, feedback, who)
    if request_id.startswith("perm-"):
        return _answer_permission(team, request_id, approve, feedback, who)
    raise ProtocolError(f"unknown request id {request_id!r}: see `teamctl plans` or `permissions`")


def _answer_plan(
    team: Team, request_id: str, approve: bool, feedback: str, who: str
) -> dict[str, Any]:
    from mailboxes.messages import MessageDraft

    if not approve and not feedback.strip():
        raise ProtocolError("rejecting a plan needs feedback saying what to change")
    review = bp.review_plan(team.board, request_id, approve, feedback, reviewer=who)
    draft = MessageDraft(
        to=review.request.teammate, type="plan_approval_response", body=review_body(review)
    )
    team.mailbox.deliver(who, draft)
    verb = "approved" if approve else "rejected"
    return {
        "request_id": request_id,
        "kind": "plan",
        "decision": verb,
        "teammate": review.request.teammate,
        "task_id": review.request.task_id,
        "line": f"{verb} plan {request_id} of {review.request.teammate} "
        f"for {review.request.task_id}",
    }


def _answer_permission(
    team: Team, request_id: str, allow: bool, reason: str, who: str
) -> dict[str, Any]:
    answer = bp.decide_permission(team.board, request_id, allow, by=who, reason=reason)
    if not answer.first:
        raise ProtocolError(
            f"permission request {request_id} was already decided: {answer.decision} "
            f"by {answer.by}" + (f" ({answer.reason})" if answer.reason else "")
        )
    verb = "allowed" if allow else "denied"
    return {
        "request_id": request_id,
        "kind": "permission",
        "decision": answer.decision,
        "line": f"{verb} permission request {request_id}",
    }
