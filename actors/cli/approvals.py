"""Human approvals from a terminal: ``plans``, ``permissions``, ``approve ID``, ``reject ID``.

A person reviews plans (when ``settings.approvals.plans`` is ``human``, or to overrule the lead)
and answers permission requests (when ``settings.approvals.permissions`` is ``human``). The id
says what it answers: ``plan-…`` ids are plans, ``perm-…`` ids are permission requests. Every
answer is journaled first (checked under the journal lock: a stale, repeated or self review is
refused), then the plan's author is told with a ``plan_approval_response``; a waiting teammate
sees a permission decision through its journal watch.
"""

from __future__ import annotations

from typing import Any

import click

from actors.cli.common import Lines, echo_json, json_option, show, team_session, text_table

HUMAN = "user"
_as_option = click.option(
    "--as", "who", default=HUMAN, show_default=True, help="Who is answering (recorded)."
)


@click.command("plans")
@json_option
def plans(as_json: bool) -> None:
    """Plan requests waiting for a review (or for a plan)."""
    with team_session() as team:
        state = team.state()
    rows = [
        {
            "request_id": r.request_id,
            "status": r.status,
            "teammate": r.teammate,
            "task_id": r.task_id,
            "subject": state.tasks[r.task_id].subject if r.task_id in state.tasks else "",
            "epoch": r.epoch,
            "plan": r.plan,
        }
        for r in state.plan_requests.values()
    ]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no plans waiting")
        return
    # A reviewer reads the whole plan: escaped, line breaks kept, never cut.
    grid = text_table(None, ("request", "status", "teammate", "task", "plan"), max_cell=None)
    for row in rows:
        plan = Lines(row["plan"] or "(not submitted yet)")
        grid.add_row(
            str(row["request_id"]),
            str(row["status"]),
            str(row["teammate"]),
            str(row["task_id"]),
            plan,
        )
    show(grid)
    click.echo("answer with `teamctl approve ID` or `teamctl reject ID --feedback TEXT`")


@click.command("permissions")
@json_option
def permissions(as_json: bool) -> None:
    """Permission requests from teammates waiting for an answer."""
    from actors.board.protocols import pending_permissions

    with team_session() as team:
        pending = pending_permissions(team.journal, team.state())
    rows = [p.model_dump(mode="json") for p in pending]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no permission requests waiting")
        return
    # Whole targets, escaped: a command cut short could hide what is being approved.
    grid = text_table(None, ("request", "agent", "tool", "target", "reason"), max_cell=None)
    for p in pending:
        target = p.input.get("target") or ", ".join(p.input.get("paths") or ()) or "-"
        grid.add_row(p.request_id, p.agent, p.tool, str(target), p.reason or "-")
    show(grid)
    click.echo("answer with `teamctl approve ID` or `teamctl reject ID`")


def _answer(request_id: str, approve: bool, feedback: str, who: str) -> dict[str, Any]:
    from actors.protocols import answer_request

    if request_id.startswith("plan-") and not approve and not feedback.strip():
        raise click.UsageError("rejecting a plan needs --feedback saying what to change")
    with team_session(actor="cli") as team:
        return answer_request(team, request_id, approve, feedback, who)


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json({k: v for k, v in result.items() if k != "line"})
    else:
        click.echo(result["line"])


@click.command("approve")
@click.argument("request_id")
@click.option("--feedback", default="", help="A note for the teammate.")
@_as_option
@json_option
def approve(request_id: str, feedback: str, who: str, as_json: bool) -> None:
    """Approve a plan (plan-…) or allow a permission request (perm-…)."""
    result = _answer(request_id, True, feedback, who)
    _print(result, as_json)


@click.command("reject")
@click.argument("request_id")
@click.option("--feedback", default="", help="What to change (required for plans).")
@_as_option
@json_option
def reject(request_id: str, feedback: str, who: str, as_json: bool) -> None:
    """Reject a plan (plan-…, needs --feedback) or deny a permission request (perm-…)."""
    result = _answer(request_id, False, feedback, who)
    _print(result, as_json)


COMMANDS = (plans, permissions, approve, reject)
