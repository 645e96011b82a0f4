"""``teamctl stop NAME [--force]`` and ``teamctl run --fresh``: retiring members from any process
(docs/ARCHITECTURE.md, "Protocols"; docs/RELIABILITY.md, "Stop and resume").

Without ``--force`` the teammate is asked: ``shutdown.requested`` is journaled and a
``shutdown_request`` delivered; the teammate finishes its step, releases or completes its task,
answers and stops (a paused teammate reads it when the team resumes). With ``--force``, a teammate
hosted by a live runtime is stopped by that runtime as soon as it sees the request in the journal
(request ids starting with ``force-``); one that no live process hosts (paused, or its process
died) is recorded as stopped here and its claim released. ``retire_all`` does that to every
teammate (``run --fresh``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.errors import TeamError, UnknownMember
from mailboxes.events import EventDraft, MemberStopped, ShutdownRequested, draft
from mailboxes.messages import MessageDraft
from teamctl_base.clock import new_id

if TYPE_CHECKING:
    from actors.board.state import TeamState
    from actors.factory import Team

FORCE_PREFIX = "force-"
"""A ``shutdown.requested`` whose request id starts with this is a forced stop."""
SENDER = "cli"


def request_stop(team: Team, name: str, *, force: bool = False, lead: str = "lead") -> str:
    """Ask ``name`` to stop (or force it); returns a line for the user."""
    state = team.state()
    member = state.members.get(name)
    if member is None or member.kind != "agent" or name == lead:
        raise UnknownMember(name)
    if member.status == "stopped":
        raise TeamError(f"{name} has already stopped")
    request_id = (FORCE_PREFIX if force else "") + new_id()
    body = ShutdownRequested(name=name, request_id=request_id)
    if force and not team.liveness.is_alive(name):
        _record_stopped(team, [name], "forced")
        return f"{name} was not running; recorded as stopped and its task released"
    team.board.execute(lambda st: [draft(body.TYPE, SENDER, body)])
    if force:
        return f"asked the runtime hosting {name} to stop it now ({request_id})"
    text = "Please shut down: finish your step, release or complete your task."
    team.mailbox.deliver(
        SENDER,
        MessageDraft(
            to=name, type="shutdown_request", body={"text": text, "request_id": request_id}
        ),
    )
    if not team.liveness.is_alive(name):
        return (
            f"asked {name} to shut down ({request_id}); it is not running and will shut down "
            "when the team resumes (--force retires it now)"
        )
    return f"asked {name} to shut down ({request_id})"


def retire_all(team: Team, *, lead: str = "lead") -> TeamState:
    """``run --fresh``: record every teammate that has not stopped as stopped (reason
    ``fresh``), its claim released; refused while a live process hosts one. Returns the state
    after."""
    state = team.board.refresh()
    names = [
        m.name
        for m in state.members.values()
        if m.kind == "agent" and m.name != lead and m.status != "stopped"
    ]
    live = [name for name in names if team.liveness.is_alive(name)]
    if live:
        raise TeamError(
            f"{', '.join(live)} still running in another process (`teamctl join`): stop it first"
        )
    if names:
        _record_stopped(team, names, "fresh")
    return team.board.refresh()


def _record_stopped(team: Team, names: list[str], reason: str) -> None:
    def decision(state: TeamState) -> list[EventDraft]:
        from mailboxes.events import TaskReleased

        drafts = []
        for name in names:
            member = state.members.get(name)
            if member is None or member.status == "stopped":
                continue
            held = state.holding(name)
            if held is not None:
                rel = TaskReleased(task_id=held.id, owner=name, epoch=held.epoch, reason=reason)
                drafts.append(draft(rel.TYPE, SENDER, rel))
            stop = MemberStopped(name=name, reason=reason)
            drafts.append(draft(stop.TYPE, SENDER, stop))
        return drafts

    team.board.execute(decision)
