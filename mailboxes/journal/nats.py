"""The JetStream event store: a team's journal as a NATS JetStream stream
(docs/ARCHITECTURE.md, "The journal"; docs/SCALE-OUT.md).

One stream per team (``TEAMCTL_<team>_JOURNAL``, subject ``teamctl.<team>.journal``), one message
per commit. A message carries the commit's events as the same CRC-framed lines as
``journal.jsonl`` (``frame.encode``), so exporting the stream is concatenating the messages.
Stream message ``n`` is the ``n``-th commit; event seqs stay dense because a commit's first event
follows the previous commit's last (checked on every read: ``frame.decode_event``).

An append catches up (every message after the last one this store has read), runs ``decide``
against the caught-up events and publishes the commit with ``Nats-Expected-Last-Sequence`` set to
the stream sequence it decided against, and ``Nats-Msg-Id`` set to a fresh commit id. The server
stores it only if nothing was appended in between; otherwise (wrong last sequence) the store
catches up and runs ``decide`` again, which the ``EventStore`` contract allows. After an unclear
outcome (timeout, lost connection, no responders during a leader election) the store catches up
and looks for its commit id among the new messages before deciding again: found means committed;
not found with the stream unchanged means the same message is published again (same id, same
expected sequence: it can land at most once); not found with the stream moved means it can never
land (its expected sequence is gone), so ``decide`` runs again. No duplicate, no loss.

Serialisation: appends of one store instance are serialised by a mutex (one writer per process
funnels that process's appends); ``decide`` and ``on_commit`` run in the caller's thread under it.
Across processes the expected-sequence check makes ``decide`` linearizable, but ``on_commit`` is
not serialised with other processes' appends.

nats-py is asyncio: the store owns one event loop in a daemon thread and submits coroutines to it;
``close`` closes the connection and stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from mailboxes.errors import JournalCorrupt
from mailboxes.events import Event
from mailboxes.journal.base import Appended, check_after, stamp
from mailboxes.journal.frame import BadLine, decode_event, encode
from mailboxes.ports import Clock, Decide
from teamctl_base.clock import SystemClock

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.client import JetStreamContext

INSTALL_HINT = "the JetStream backend needs nats-py: pip install 'teamctl[nats]'"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
MSG_ID = "Nats-Msg-Id"
WRONG_LAST_SEQUENCE = 10071  # JetStream's err_code for a failed expected-last-sequence check
_TEAM_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FETCH_BATCH = 256  # messages fetched concurrently while catching up

T = TypeVar("T")


@dataclass(frozen=True)
class _Pending:
    """A commit published with an unclear outcome (or about to be published)."""

    msg_id: str
    stream_seq: int
    """The stream's last sequence it was decided against (its expected last sequence)."""
    base: int
    """The last event seq it was decided against."""
    payload: bytes
    new: list[Event]
    result: list[Event]


class NatsUnavailable(ConnectionError):
    """The JetStream server did not answer within the store's deadline."""


def stream_name(team: str) -> str:
    return f"TEAMCTL_{team}_JOURNAL"


def subject_name(team: str) -> str:
    return f"teamctl.{team}.journal"


def _require_nats() -> None:
    try:
        import nats  # noqa: F401
    except ImportError:
        raise ImportError(INSTALL_HINT) from None


class NatsEventStore:
    """An ``EventStore`` on a JetStream stream of team ``team`` at ``servers`` (``nats://…`` URLs).

    Creates the stream when missing (file storage, ``replicas`` copies, deletes and purges
    denied). ``timeout`` bounds each request; ``deadline`` bounds how long one append keeps
    retrying unclear outcomes before raising ``NatsUnavailable`` (the append then may or may not
    have been stored: its commit id is found by the next append's catch-up, never stored twice).
    """

    def __init__(
        self,
        servers: str | Sequence[str],
        team: str,
        clock: Clock | None = None,
        *,
        replicas: int = 1,
        timeout: float = 5.0,
        deadline: float = 60.0,
    ) -> None:
        _require_nats()
        if not _TEAM_NAME.match(team):
            raise ValueError(f"team name {team!r} must be 1-64 of A-Z a-z 0-9 _ -")
        self.team = team
        self.stream = stream_name(team)
        self.subject = subject_name(team)
        self._servers = [servers] if isinstance(servers, str) else list(servers)
        self._clock: Clock = clock or SystemClock()
        self._replicas = replicas
        self._timeout = timeout
        self._deadline = deadline
        self._mutex = threading.RLock()
        self._holder: int | None = None
        self._events: list[Event] = []
        self._by_op_id: dict[str, Event] = {}
        self._msg_ids: dict[str, tuple[int, int]] = {}  # commit id -> (first, last event seq)
        self._stream_seq = 0  # the last stream message read
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"nats-journal-{team}", daemon=True
        )
        self._thread.start()
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        try:
            self._run(self._connect())
        except BaseException:
            self.close()
            raise

    # --- EventStore ---------------------------------------------------------------------------

    def append(
        self,
        decide: Decide,
        *,
        after: int,
        on_commit: Callable[[Sequence[Event]], None] | None = None,
    ) -> Appended:
        """Catch up, decide, publish with the expected last sequence; on a conflict catch up and
        decide again; then run ``on_commit(all events with seq > after)``."""
        self._check_open()
        if self._holder == threading.get_ident():
            raise RuntimeError("journal append called from inside decide or on_commit")
        with self._mutex:
            self._holder = threading.get_ident()
            try:
                seen, new, result = self._commit(decide, after)
                if on_commit is not None:
                    on_commit(seen + tuple(new))
            finally:
                self._holder = None
        return Appended(seen=seen, appended=tuple(result))

    def read_from(self, seq: int) -> Iterator[Event]:
        """Events with ``seq >= seq`` as of this call (read from the server first)."""
        self._check_open()
        with self._mutex:
            self._catch_up()
            snapshot = self._events[max(seq, 1) - 1 :]
        return iter(snapshot)

    def last_seq(self) -> int:
        self._check_open()
        with self._mutex:
            self._catch_up()
            return len(self._events)

    def close(self) -> None:
        """Close the connection and stop the loop thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._loop.is_running():
            with contextlib.suppress(Exception):  # a dead connection: nothing to release
                self._run(self._shutdown(), timeout=2 * self._timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=self._timeout)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        if self._nc is not None:
            # A connection lost on the way out (say, while reconnecting) has nothing to flush.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._nc.close(), self._timeout)
        # Whatever the client left running ends here, not when the closed loop is collected.
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    # --- internals ----------------------------------------------------------------------------

    def _commit(
        self, decide: Decide, after: int
    ) -> tuple[tuple[Event, ...], list[Event], list[Event]]:
        from nats.errors import ConnectionClosedError, NoRespondersError
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.errors import APIError, NoStreamResponseError, ServiceUnavailableError

        unclear = (
            NatsTimeout,
            ConnectionClosedError,
            NoRespondersError,
            NoStreamResponseError,
            ServiceUnavailableError,
            asyncio.TimeoutError,
        )
        give_up = time.monotonic() + self._deadline
        pending: _Pending | None = None
        while True:
            self._catch_up_until(give_up)
            if pending is not None:
                if pending.msg_id in self._msg_ids:  # the unclear publish landed
                    return tuple(self._events[after : pending.base]), pending.new, pending.result
                if self._stream_seq != pending.stream_seq:
                    pending = None  # it can never land: its expected sequence is gone
            if pending is None:
                check_after(after, len(self._events))
                seen = tuple(self._events[after:])
                drafts = decide(seen)
                new, result = stamp(
                    drafts,
                    next_seq=len(self._events) + 1,
                    ts=self._clock.now(),
                    lookup=self._by_op_id.get,
                )
                if not new:
                    return seen, new, result
                pending = _Pending(
                    msg_id=uuid.uuid4().hex,
                    stream_seq=self._stream_seq,
                    base=len(self._events),
                    payload=b"".join(encode(event) for event in new),
                    new=new,
                    result=result,
                )
            headers = {EXPECTED_LAST_SEQ: str(pending.stream_seq), MSG_ID: pending.msg_id}
            try:
                ack = self._run(self._publish(pending.payload, headers))
            except APIError as exc:
                if exc.err_code == WRONG_LAST_SEQUENCE:
                    continue  # someone appended first (or ours landed): catch up, look, decide
                if isinstance(exc, ServiceUnavailableError):
                    self._check_deadline(give_up, exc)
                    continue
                raise
            except unclear as exc:
                self._check_deadline(give_up, exc)
                continue
            if ack.seq != pending.stream_seq + 1:  # not where we expected: read it back
                continue
            self._index(ack.seq, pending.msg_id, pending.new)
            return tuple(self._events[after : pending.base]), pending.new, pending.result

    def _check_deadline(self, give_up: float, exc: BaseException) -> None:
        if time.monotonic() > give_up:
            raise NatsUnavailable(
                f"JetStream stream {self.stream} did not answer within {self._deadline}s: {exc}"
            ) from exc

    def _catch_up_until(self, give_up: float) -> None:
        from nats.errors import ConnectionClosedError, NoRespondersError
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.errors import ServiceUnavailableError

        while True:
            try:
                self._catch_up()
                return
            except (
                TimeoutError,
                NatsTimeout,
                ConnectionClosedError,
                NoRespondersError,
                ServiceUnavailableError,
            ) as exc:
                self._check_deadline(give_up, exc)

    def _catch_up(self) -> None:
        """Read and index every message after ``_stream_seq`` (holds the mutex)."""
        with self._mutex:
            for stream_seq, msg_id, data in self._run(self._fetch_new(self._stream_seq)):
                first = len(self._events) + 1
                lines = data.split(b"\n")
                if lines[-1] != b"" or len(lines) < 2:
                    raise JournalCorrupt(self.stream, first, f"message {stream_seq} is not framed")
                events = []
                for offset, raw in enumerate(lines[:-1]):
                    try:
                        events.append(decode_event(raw, first + offset))
                    except BadLine as exc:
                        raise JournalCorrupt(self.stream, first + offset, exc.reason) from None
                self._index(stream_seq, msg_id, events)

    def _index(self, stream_seq: int, msg_id: str | None, events: Sequence[Event]) -> None:
        if stream_seq != self._stream_seq + 1:
            raise JournalCorrupt(
                self.stream, len(self._events) + 1, f"message {stream_seq} after {self._stream_seq}"
            )
        self._stream_seq = stream_seq
        if msg_id:
            self._msg_ids[msg_id] = (events[0].seq, events[-1].seq)
        for event in events:
            self._events.append(event)
            if event.op_id is not None:
                self._by_op_id.setdefault(event.op_id, event)

    # --- coroutines (run on the store's loop) -------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise

    async def _connect(self) -> None:
        import nats
        from nats.js.api import DiscardPolicy, StorageType, StreamConfig
        from nats.js.errors import NotFoundError

        self._nc = await nats.connect(
            servers=self._servers,
            connect_timeout=self._timeout,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.25,
            name=f"teamctl-journal-{self.team}",
        )
        self._js = self._nc.jetstream(timeout=self._timeout)
        try:
            await self._js.stream_info(self.stream)
        except NotFoundError:
            config = StreamConfig(
                name=self.stream,
                subjects=[self.subject],
                storage=StorageType.FILE,
                num_replicas=self._replicas,
                discard=DiscardPolicy.NEW,
                deny_delete=True,
                deny_purge=True,
            )
            await self._js.add_stream(config)  # the same config twice is not an error

    async def _publish(self, payload: bytes, headers: dict[str, str]) -> Any:
        assert self._js is not None
        return await self._js.publish(self.subject, payload, headers=dict(headers))

    async def _fetch_new(self, known: int) -> list[tuple[int, str | None, bytes]]:
        """Every message after stream seq ``known``: ``(seq, commit id, data)`` in order."""
        assert self._js is not None
        js = self._js
        info = await js.stream_info(self.stream)
        last = info.state.last_seq
        found: list[tuple[int, str | None, bytes]] = []
        for start in range(known + 1, last + 1, _FETCH_BATCH):
            seqs = range(start, min(start + _FETCH_BATCH, last + 1))
            for msg in await asyncio.gather(*(js.get_msg(self.stream, seq) for seq in seqs)):
                headers = msg.headers or {}
                found.append((int(msg.seq or 0), headers.get(MSG_ID), msg.data or b""))
        return found

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"event store {self.stream} is closed")
