"""Mailbox commands: ``send TO TEXT`` and ``inbox AGENT``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from actors.cli.common import Lines, echo_json, json_option, show, team_session, text_table
from teamctl_base.text import safe

if TYPE_CHECKING:
    from actors.factory import Team
    from mailboxes.messages import Envelope, MessageType


def envelope_json(envelope: Envelope) -> dict[str, Any]:
    """The JSON a program reads for one message (the on-disk field names)."""
    return envelope.model_dump(mode="json", by_alias=True)


def _text(envelope: Envelope) -> str:
    body = envelope.body
    for key in ("text", "summary", "content"):
        value = body.get(key)
        if isinstance(value, str):
            return value
    return ", ".join(f"{k}={v}" for k, v in body.items()) or "-"


@click.command()
@click.argument("to")
@click.argument("text")
@click.option("--as", "sender", default="user", show_default=True, help="Sender name.")
@json_option
def send(to: str, text: str, sender: str, as_json: bool) -> None:
    """Send TEXT to agent TO (`*` sends one copy to every agent but the sender)."""
    from mailboxes.messages import BROADCAST, MessageDraft

    kind: MessageType = "broadcast" if to == BROADCAST else "message"
    with team_session() as team:
        delivered = team.mailbox.deliver(
            sender, MessageDraft(to=to, type=kind, body={"text": text})
        )
    if as_json:
        echo_json([envelope_json(e) for e in delivered])
        return
    for envelope in delivered:
        click.echo(f"sent {envelope.id} to {envelope.to}")


@click.command()
@click.argument("agent")
@click.option("--ack", is_flag=True, help="Mark the shown messages as read (moves them to cur/).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--full", is_flag=True, help="Whole texts with their line breaks (else cut with …).")
@click.option(
    "--force",
    is_flag=True,
    help="With --ack: even the mail of an agent a running teamctl hosts (journaled).",
)
@click.option("--by", default="user", show_default=True, help="With --force: who is forcing it.")
@json_option
def inbox(
    agent: str, ack: bool, limit: int, full: bool, force: bool, by: str, as_json: bool
) -> None:
    """Unread messages for AGENT, oldest first."""
    with team_session(read_only=not ack) as team:
        messages = team.mailbox.pending(agent, max_messages=limit, max_bytes=1 << 30)
        if ack and messages:
            ids = [m.id for m in messages]
            _record_forced_ack(team, agent, ids, force=force, by=by)
            team.mailbox.ack(agent, ids)
    if as_json:
        echo_json([envelope_json(m) for m in messages])
        return
    if not messages:
        click.echo(f"no unread messages for {safe(agent)}")
        return
    grid = text_table(f"inbox of {agent}", ("time", "from", "type", "text", "id"))
    for m in messages:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m.ts))
        text = Lines(_text(m)) if full else _text(m)
        grid.add_row(stamp, m.sender, m.type, text, m.id)
    show(grid)
    if ack:
        click.echo(f"acknowledged {len(messages)} message(s)")


def _record_forced_ack(team: Team, agent: str, ids: list[str], *, force: bool, by: str) -> None:
    """A live agent's mail is its own: acknowledging it by hand needs ``--force``, and is then
    journaled (``inbox.acknowledged``, with who forced it) before the messages move."""
    from actors.errors import LiveMemberRefused
    from mailboxes.events import InboxAcknowledged, draft
    from mailboxes.messages import check_agent_name

    if not team.liveness.is_alive(agent):
        return
    if not force:
        raise LiveMemberRefused(agent, "mark its mail as read")
    body = InboxAcknowledged(agent=agent, message_ids=tuple(ids), forced_by=check_agent_name(by))
    team.board.execute(lambda state: [draft(body.TYPE, by, body)])


COMMANDS = (send, inbox)
