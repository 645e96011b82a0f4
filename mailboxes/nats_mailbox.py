"""Durable per-agent inboxes on NATS JetStream (docs/SCALE-OUT.md, "Mailboxes").

The same ``Mailbox`` as the Maildir (mailboxes/maildir.py), for a team whose hosts share no file
system. One stream per team, ``TEAMCTL_<team>_MAIL``, file storage, one subject per message:
``teamctl.<team>.mail.<agent>.<msgid>`` (an agent's ``.`` becomes ``=``, as in the liveness
bucket). A message is the envelope's canonical JSON (mailboxes/messages.py), published with
``Nats-Msg-Id`` ``<agent>.<msgid>``: a publish repeated after an unclear outcome is stored once.

- An inbox is a durable pull consumer named after the agent, filtered on its subjects, explicit
  ack: ``ensure_inbox`` creates it, ``agents`` lists the stream's consumers, a recipient without
  one is ``UnknownRecipient``. ``*`` is one copy (own id) per known agent but the sender.
- ``pending`` fetches what the consumer has not delivered yet and keeps every fetched, unacked
  message in this process (a repeated ``pending`` returns it again, oldest first by stream
  sequence); while held, each message's ack wait is extended with in-progress signals (a model
  call can take minutes). ``ack`` acks it (waiting for the server's confirmation) and publishes
  a core message on ``teamctl.<team>.acked.<agent>`` so that watchers wake (mailboxes/nats_watch.py).
  ``close`` gives held messages back (nak) so the next reader gets them at once; a process that
  dies holding messages gives them back after the ack wait (30 s).
- ``unread``/``has_unread`` come from the consumer's counts (not delivered + delivered unacked);
  ``holds`` looks the message's subject up (acked or not); ``prune`` deletes acked messages older
  than a cut-off (everything at or below the consumer's ack floor), never unacked ones.

An unreachable server is ``MailboxUnavailable`` (a ``MailboxesError``) after the request timeout,
never a raw nats-py error. Calls are thread-safe: everything runs on the store's loop
(mailboxes/nats_loop.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from mailboxes.errors import BadMessage, MailboxUnavailable, UnknownRecipient
from mailboxes.journal.nats import cluster_size, open_stream
from mailboxes.messages import (
    BROADCAST,
    Envelope,
    InvalidEnvelope,
    MessageDraft,
    check_agent_name,
    dump_envelope,
    parse_envelope,
)
from mailboxes.nats_loop import NatsLoop, check_team
from mailboxes.ports import Clock, IdSource
from teamctl_base.clock import SystemClock, UuidIds

if TYPE_CHECKING:
    from nats.aio.msg import Msg
    from nats.js.client import JetStreamContext

__all__ = ["ACK_WAIT", "NatsMailbox", "acked_subject", "mail_subject", "stream_name"]

log = logging.getLogger(__name__)

ACK_WAIT = 30.0
"""Seconds a fetched message stays with its reader without an in-progress signal before the
server gives it to the next fetch (how long a crashed reader delays its messages)."""
MSG_ID = "Nats-Msg-Id"
_PAGE = 256  # the server's page size when listing consumers


def stream_name(team: str) -> str:
    return f"TEAMCTL_{team}_MAIL"


def key(agent: str) -> str:
    """``agent`` as one subject token and consumer name: ``.`` becomes ``=`` (one-to-one: no
    agent name contains ``=``)."""
    return check_agent_name(agent).replace(".", "=")


def agent_of(token: str) -> str | None:
    """The agent of a subject token or consumer name (None: not one of ours)."""
    try:
        return check_agent_name(token.replace("=", "."))
    except ValueError:
        return None


def mail_subject(team: str, agent: str | None = None, message_id: str | None = None) -> str:
    """The subject of a message, of ``agent``'s messages (``…<agent>.*``), or of all (``…>``)."""
    if agent is None:
        return f"teamctl.{team}.mail.>"
    return f"teamctl.{team}.mail.{key(agent)}.{message_id or '*'}"


def acked_subject(team: str, agent: str | None = None) -> str:
    """The core subject an ack is announced on (not stored): ``agent``'s, or all (``…*``)."""
    return f"teamctl.{team}.acked.{'*' if agent is None else key(agent)}"


T = TypeVar("T")


@dataclass
class _Held:
    """A fetched, unacked message (and any later copies of the same id, acked along with it)."""

    seq: int
    envelope: Envelope
    size: int
    msg: Msg
    copies: list[Msg] = field(default_factory=list)


class NatsMailbox:
    """The JetStream ``Mailbox`` of team ``team`` at ``servers`` (``nats://…`` URLs). One
    reader per inbox is expected, as with the Maildir."""

    def __init__(
        self,
        servers: str | Sequence[str],
        team: str,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        *,
        replicas: int | None = None,
        timeout: float = 5.0,
        ack_wait: float = ACK_WAIT,
        max_message_bytes: int = 1_048_576,
    ) -> None:
        self.team = check_team(team)
        self.stream = stream_name(team)
        self._servers = [servers] if isinstance(servers, str) else list(servers)
        self.max_message_bytes = max_message_bytes
        self._clock: Clock = clock or SystemClock()
        self._ids: IdSource = ids or UuidIds()
        self._want_replicas = replicas
        self.cluster_size = 1
        """Servers in the connected server's cluster when the store connected (1: none)."""
        self.replicas = 0
        """Copies of the mail stream kept by the cluster."""
        self._timeout = timeout
        self._ack_wait = ack_wait
        self._held: dict[str, dict[str, _Held]] = {}  # agent -> id -> message; loop thread only
        self._known: set[str] = set()  # agents whose inbox exists (inboxes are never removed)
        self._js: JetStreamContext | None = None
        self._keeper: asyncio.Future[None] | None = None
        self._io = NatsLoop(f"nats-mail-{team}", timeout=timeout)
        try:
            self._call(self._connect(servers), connecting=True)
            self._call(self._setup())
        except BaseException:
            self._io.close()
            raise

    # --- Mailbox ------------------------------------------------------------------------------

    def deliver(self, sender: str, draft: MessageDraft) -> list[Envelope]:
        """Deliver ``draft`` durably; ``*`` = one copy (own id) per known agent but ``sender``."""
        return self.deliver_many(sender, [draft])

    def deliver_many(self, sender: str, drafts: Sequence[MessageDraft]) -> list[Envelope]:
        """Deliver several drafts; every recipient is checked first (an unknown one refuses the
        whole call, sending nothing)."""
        check_agent_name(sender)
        targets: list[tuple[MessageDraft, str]] = []
        agents: list[str] | None = None
        for draft in drafts:
            if draft.to == BROADCAST:
                agents = self.agents() if agents is None else agents
                targets.extend((draft, agent) for agent in agents if agent != sender)
            elif self._exists(draft.to):
                targets.append((draft, draft.to))
            else:
                raise UnknownRecipient(draft.to, self.agents())
        staged = [self._envelope(sender, draft, to, self._ids.new_id()) for draft, to in targets]
        payloads = [self._dump(envelope) for envelope in staged]
        self._call(self._publish_all(list(zip(staged, payloads, strict=True))))
        return staged

    def deliver_keyed(self, sender: str, draft: MessageDraft, message_id: str) -> bool:
        """Deliver ``draft`` to one agent under ``message_id`` unless its inbox already holds
        that id (acked or not); True if it was delivered now."""
        check_agent_name(sender)
        if self.holds(draft.to, message_id):
            return False
        envelope = self._envelope(sender, draft, draft.to, message_id)
        acks = self._call(self._publish_all([(envelope, self._dump(envelope))]))
        return not acks[0]

    def pending(
        self, agent: str, *, max_messages: int = 50, max_bytes: int = 256_000
    ) -> list[Envelope]:
        """Unacked messages, oldest first: at most ``max_messages``, and at most ``max_bytes``
        of payload unless the first message alone is larger. Messages already fetched by this
        store and not acked are returned again; duplicates by id are dropped."""
        self._require(agent)
        return self._call(self._pending(agent, max_messages, max_bytes))

    def ack(self, agent: str, message_ids: Sequence[str]) -> None:
        """Ack the held messages of these ids (copies included), waiting for the server; unknown
        or already-acked ids are ignored. Announces the ack to watchers."""
        self._require(agent)
        if message_ids:
            self._call(self._ack(agent, set(message_ids)))

    def agents(self) -> list[str]:
        """Known agents (those with an inbox), sorted."""
        found = self._call(self._consumers())
        self._known.update(found)
        return sorted(found)

    def ensure_inbox(self, agent: str) -> None:
        """Create ``agent``'s durable consumer if missing (idempotent)."""
        check_agent_name(agent)
        if agent not in self._known:
            self._call(self._ensure(agent))
            self._known.add(agent)

    def unread(self, agent: str) -> int:
        """Messages not acked yet (not delivered + delivered unacked)."""
        counts = self._call(self._unread(agent))
        if counts is None:
            raise UnknownRecipient(agent, self.agents())
        return counts

    def has_unread(self, agent: str) -> bool:
        """Whether ``agent`` has an unacked message; False without an inbox."""
        return bool(self._call(self._unread(check_agent_name(agent))))

    def holds(self, agent: str, message_id: str) -> bool:
        """Whether the stream has a message of this id for ``agent`` (acked or not)."""
        self._require(agent)
        return self._call(self._holds(agent, message_id))

    # --- beyond the protocol (the live view, runtime housekeeping) ---------------------------

    def history(self, agent: str) -> list[Envelope]:
        """Every message the stream still stores for ``agent``, acked or not, in stream order
        (``MailArchive``); a message that does not parse is ``BadMessage``."""
        self._require(agent)
        return self._call(self._history(agent))

    def counts(self, agent: str) -> tuple[int, int]:
        """(unacked messages, acked messages still stored)."""
        unread = self.unread(agent)
        stored = self._call(self._stored(agent))
        return unread, max(0, stored - unread)

    def prune(self, agent: str, *, max_age_s: float | None = None) -> int:
        """Delete acked messages (those at or below the consumer's ack floor) delivered more
        than ``max_age_s`` seconds ago; never an unacked one. Returns how many went."""
        self._require(agent)
        if max_age_s is None:
            return 0
        return self._call(self._prune(agent, self._clock.now() - max_age_s))

    def recover(self, *, older_than_s: float = 60.0) -> int:
        """Nothing to recover: a publish is stored whole or not at all. Returns 0."""
        return 0

    def close(self) -> None:
        """Give held messages back (nak: the next reader gets them at once), close the
        connection and stop the loop; idempotent."""
        if self._io.closed:
            return
        with contextlib.suppress(Exception):
            self._io.run(self._give_back(), timeout=2 * self._timeout)
        self._io.close()

    # --- helpers ------------------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T], *, connecting: bool = False) -> T:
        """Run ``coro`` on the loop; a nats-py error or timeout is ``MailboxUnavailable``."""
        from nats.errors import Error as NatsError

        if self._io.closed:
            coro.close()
            raise ValueError(f"mailbox store {self.stream} is closed")
        try:
            return self._io.run(coro, timeout=4 * self._timeout)
        except (NatsError, TimeoutError, OSError) as exc:
            cause = str(exc) or ("no answer in time" if connecting else type(exc).__name__)
            raise MailboxUnavailable(
                f"the mailbox store {self.stream} on {', '.join(self._servers)} cannot be "
                f"reached: {cause}"
            ) from exc

    def _require(self, agent: str) -> None:
        if not self._exists(agent):
            raise UnknownRecipient(agent, self.agents())

    def _exists(self, agent: str) -> bool:
        if check_agent_name(agent) in self._known:
            return True
        if self._call(self._unread(agent)) is None:
            return False
        self._known.add(agent)
        return True

    def _envelope(self, sender: str, draft: MessageDraft, to: str, message_id: str) -> Envelope:
        return Envelope(
            id=message_id,
            sender=sender,
            to=to,
            type=draft.type,
            ts=self._clock.now(),
            in_reply_to=draft.in_reply_to,
            body=draft.body,
        )

    def _dump(self, envelope: Envelope) -> bytes:
        data = dump_envelope(envelope)
        if len(data) > self.max_message_bytes:
            raise InvalidEnvelope(
                f"message of {len(data)} bytes exceeds the limit of {self.max_message_bytes} bytes",
                data[:200],
            )
        return data

    # --- coroutines (run on the store's loop) -------------------------------------------------

    async def _connect(self, servers: str | Sequence[str]) -> None:
        await self._io.open(servers, name=f"teamctl-mail-{self.team}")

    async def _setup(self) -> None:
        from nats.js.api import DiscardPolicy

        assert self._io.nc is not None
        self._js = self._io.nc.jetstream(timeout=self._timeout)
        self.cluster_size = cluster_size(self._io.nc)
        self.replicas = await open_stream(
            self._js,
            self.stream,
            mail_subject(self.team),
            size=self.cluster_size,
            replicas=self._want_replicas,
            discard=DiscardPolicy.NEW,
            deny_delete=True,
        )
        self._keeper = asyncio.ensure_future(self._keep_alive())

    async def _publish_all(self, staged: list[tuple[Envelope, bytes]]) -> list[bool]:
        """Publish each message and wait for the server; True for each one already stored."""
        assert self._js is not None
        duplicates = []
        for envelope, data in staged:
            ack = await self._js.publish(
                mail_subject(self.team, envelope.to, envelope.id),
                data,
                headers={MSG_ID: f"{key(envelope.to)}.{envelope.id}"},
            )
            duplicates.append(bool(ack.duplicate))
        return duplicates

    async def _ensure(self, agent: str) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
        from nats.js.errors import NotFoundError

        assert self._js is not None
        try:
            await self._js.consumer_info(self.stream, key(agent))
            return
        except NotFoundError:
            pass
        config = ConsumerConfig(
            durable_name=key(agent),
            filter_subject=mail_subject(self.team, agent),
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self._ack_wait,
            max_deliver=-1,
            max_ack_pending=-1,
        )
        await self._js.add_consumer(self.stream, config)

    async def _consumers(self) -> list[str]:
        assert self._js is not None
        names: list[str] = []
        while True:
            page = await self._js.consumers_info(self.stream, offset=len(names) or None)
            names += [info.name for info in page]
            if len(page) < _PAGE:
                break
        return [a for a in map(agent_of, names) if a is not None]

    async def _unread(self, agent: str) -> int | None:
        """Unacked messages of ``agent``'s consumer (None: no such consumer)."""
        from nats.js.errors import NotFoundError

        assert self._js is not None
        try:
            info = await self._js.consumer_info(self.stream, key(agent))
        except NotFoundError:
            return None
        return (info.num_pending or 0) + (info.num_ack_pending or 0)

    async def _holds(self, agent: str, message_id: str) -> bool:
        from nats.js.errors import NotFoundError

        assert self._js is not None
        try:
            await self._js.get_msg(self.stream, subject=mail_subject(self.team, agent, message_id))
        except NotFoundError:
            return False
        return True

    async def _stored(self, agent: str) -> int:
        assert self._js is not None
        info = await self._js.stream_info(
            self.stream, subjects_filter=mail_subject(self.team, agent)
        )
        return sum((info.state.subjects or {}).values())

    async def _fetch(self, agent: str, batch: int) -> list[Msg]:
        """Up to ``batch`` messages the consumer has not delivered yet, without waiting for
        more to arrive (a ``no_wait`` pull request)."""
        import json

        from nats.errors import TimeoutError as NatsTimeout

        nc = self._io.nc
        assert nc is not None
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        got: list[Msg] = []
        try:
            request = json.dumps({"batch": batch, "no_wait": True}).encode()
            await nc.publish(
                f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{key(agent)}", request, reply=inbox
            )
            while len(got) < batch:
                try:
                    msg = await sub.next_msg(timeout=self._timeout)
                except NatsTimeout:
                    if got:
                        break
                    raise
                if msg.headers and msg.headers.get("Status") and not msg.data:
                    break  # 404 no messages, 408 request expired: nothing more now
                got.append(msg)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        return got

    async def _pending(self, agent: str, max_messages: int, max_bytes: int) -> list[Envelope]:
        held = self._held.setdefault(agent, {})
        if len(held) < max_messages:
            for msg in await self._fetch(agent, max_messages - len(held)):
                await self._take(agent, held, msg)
        batch: list[Envelope] = []
        total = 0
        for item in sorted(held.values(), key=lambda h: h.seq)[:max_messages]:
            if batch and total + item.size > max_bytes:
                break
            batch.append(item.envelope)
            total += item.size
        return batch

    async def _take(self, agent: str, held: dict[str, _Held], msg: Msg) -> None:
        """File a fetched message under its id (a redelivery of a held one refreshes its handle;
        another copy of a held id is acked along with it); a bad one is dropped for good."""
        seq = msg.metadata.sequence.stream
        try:
            envelope = parse_envelope(msg.data)
            if msg.subject.rsplit(".", 1)[-1] != envelope.id:
                raise InvalidEnvelope(f"subject {msg.subject!r} does not match id", msg.data)
            if envelope.to != agent:
                raise InvalidEnvelope(
                    f"addressed to {envelope.to!r}, in {agent!r}'s inbox", msg.data
                )
        except BadMessage as exc:
            log.warning("dropping bad message %d of %s for %s: %s", seq, self.stream, agent, exc)
            with contextlib.suppress(Exception):
                await msg.term()
            return
        item = held.get(envelope.id)
        if item is None:
            held[envelope.id] = _Held(seq, envelope, len(msg.data), msg)
        elif item.seq == seq:
            item.msg = msg  # redelivered (its ack wait ran out): ack this delivery
        else:
            log.info("dropping duplicate message %s for %s", envelope.id, agent)
            item.copies.append(msg)

    async def _ack(self, agent: str, ids: set[str]) -> None:
        assert self._io.nc is not None
        held = self._held.get(agent, {})
        done = False
        for message_id in ids:
            item = held.get(message_id)
            if item is None:
                continue
            for msg in (item.msg, *item.copies):
                await msg.ack_sync(timeout=self._timeout)
            del held[message_id]
            done = True
        if done:
            await self._io.nc.publish(acked_subject(self.team, agent))

    async def _keep_alive(self) -> None:
        """Every third of the ack wait, tell the server each held message is still being
        worked on (the task ends when the loop shuts down)."""
        while True:
            await asyncio.sleep(self._ack_wait / 3)
            for held in list(self._held.values()):
                for item in list(held.values()):
                    for msg in (item.msg, *item.copies):
                        with contextlib.suppress(Exception):  # unreachable: redelivered later
                            await msg.in_progress()

    async def _give_back(self) -> None:
        for held in self._held.values():
            for item in held.values():
                for msg in (item.msg, *item.copies):
                    with contextlib.suppress(Exception):
                        await msg.nak()
            held.clear()
        if self._io.nc is not None:
            with contextlib.suppress(Exception):
                await self._io.nc.flush(timeout=max(1, round(self._timeout)))

    async def _history(self, agent: str) -> list[Envelope]:
        from nats.js.errors import NotFoundError

        assert self._js is not None
        subject = mail_subject(self.team, agent)
        found: list[Envelope] = []
        seq = 1
        while True:
            try:
                raw = await self._js.get_msg(self.stream, seq=seq, subject=subject, next=True)
            except NotFoundError:
                return found
            assert raw.seq is not None
            found.append(parse_envelope(raw.data or b""))
            seq = raw.seq + 1

    async def _prune(self, agent: str, cutoff: float) -> int:
        from nats.js.errors import NotFoundError

        assert self._js is not None
        info = await self._js.consumer_info(self.stream, key(agent))
        floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
        subject = mail_subject(self.team, agent)
        seq, doomed, stop = 1, 0, 0
        while True:
            try:
                raw = await self._js.get_msg(self.stream, seq=seq, subject=subject, next=True)
            except NotFoundError:
                break
            assert raw.seq is not None
            if raw.seq > floor or _delivered_at(raw.data) >= cutoff:
                stop = raw.seq
                break
            doomed += 1
            seq = raw.seq + 1
            stop = seq
        if doomed:
            await self._js.purge_stream(self.stream, seq=stop, subject=subject)
        return doomed


def _delivered_at(data: bytes | None) -> float:
    """A stored message's delivery time (a message that does not parse counts as new: kept)."""
    try:
        return parse_envelope(data or b"").ts
    except BadMessage:
        return time.time() + 1e9
