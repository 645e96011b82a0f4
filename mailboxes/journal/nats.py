"""The JetStream event store: a team's journal as a NATS JetStream stream
(docs/ARCHITECTURE.md, "The journal"; docs/SCALE-OUT.md).

One stream per team (``TEAMCTL_<team>_JOURNAL``, subject ``teamctl.<team>.journal``), one message
per commit. A message carries the commit's events as the same CRC-framed lines as
``journal.jsonl`` (``frame.encode``), so exporting the stream is concatenating the messages.
Stream message ``n`` is the ``n``-th commit; event seqs stay dense because a commit's first event
follows the previous commit's last (checked on every read: ``frame.decode_event``).

A live feed keeps the store's cache current without asking: an ordered push consumer on the
stream (one per store, in memory, no acks) delivers every stored message, and the store indexes
them in stream order whenever it is about to read or decide. An append runs ``decide`` against the
cache as the feed left it and publishes the commit with ``Nats-Expected-Last-Sequence`` set to
the stream sequence it decided against, and ``Nats-Msg-Id`` set to a fresh commit id. The server
stores it only if nothing was appended in between; otherwise (wrong last sequence, the answer
naming the stream's last sequence) the store catches up to that sequence (from the feed, or by
reading the missing messages when the feed lags) and runs ``decide`` again, which the
``EventStore`` contract allows. An append that stores nothing (``decide`` refused by raising, or
decided nothing new) is only trusted after a catch-up that asks the server for its last
sequence: a refusal is never based on a stale cache. ``read_from`` and ``last_seq`` ask too (one
request), so they see every commit acknowledged before the call. The feed only saves round
trips: the expected-sequence check and the explicit catch-ups are what make it correct. After an unclear
outcome (timeout, lost connection, no responders during a leader election) the store catches up
and looks for its commit id among the new messages before deciding again: found means committed;
not found with the stream unchanged means the same message is published again (same id, same
expected sequence: it can land at most once); not found with the stream moved means it can never
land (its expected sequence is gone), so ``decide`` runs again. No duplicate, no loss.

Opening a long stream (more than ``LAZY_FROM`` messages) reads its last message only: the cache
then starts there, and ``last_seq`` and ``read_from(n)`` near the end (a board starting from a
state snapshot) cost one request plus a binary search over the messages' first event seqs
(O(log n) reads) plus the tail. Earlier events are read when asked for; an op id is looked up
only after every event has been read (an op id can be anywhere).

Serialisation: appends of one store instance are serialised by a mutex (one writer per process
funnels that process's appends); ``decide`` and ``on_commit`` run in the caller's thread under it.
Across processes the expected-sequence check makes ``decide`` linearizable, but ``on_commit`` is
not serialised with other processes' appends.

Replicas (docs/SCALE-OUT.md, "Durability"): a new stream gets ``replicas`` copies, by default
``min(3, cluster size)``, the cluster size being how many servers the connected server's ``INFO``
lists (``connect_urls``; 1 for a server outside a cluster). An existing stream with fewer copies
than that is used as it is; fewer copies than the cluster could hold (asked for, or found) are a
warning (``NatsEventStore.replicas`` says how many the stream has).

nats-py is asyncio: the store owns one event loop in a daemon thread and submits coroutines to it;
``close`` closes the connection and stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
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

log = logging.getLogger(__name__)

INSTALL_HINT = "the JetStream backend needs nats-py: pip install 'teamctl[nats]'"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
MSG_ID = "Nats-Msg-Id"
WRONG_LAST_SEQUENCE = 10071  # JetStream's err_code for a failed expected-last-sequence check
_TEAM_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FETCH_BATCH = 256  # messages fetched concurrently while catching up
NO_MESSAGE = 10037  # JetStream's err_code for a message get of a sequence not stored
_LAST_SEQ = re.compile(r"wrong last sequence: (\d+)")
FEED_WAIT = 0.05
"""Seconds a catch-up waits for the feed to deliver a message it knows exists, before reading
it with a request instead (the wait restarts while the feed keeps delivering)."""
FEED_HEARTBEAT = 2.0
"""Idle heartbeat of the feed's consumer: a feed silent for two of them is recreated from the
last message it delivered (nats-py's ordered consumer)."""
BACK_OFF_FIRST = 0.005
BACK_OFF_MAX = 0.04
"""Bounds, in seconds, of the random wait after a lost race (``NatsEventStore._back_off``)."""
LAZY_FROM = 256
"""A store opening a stream of more messages than this reads only its last message: earlier
events are read when asked for (``read_from`` below them, an op id looked up), the message
holding an event found by binary search over the stream (docs/SCALE-OUT.md)."""
FEED_RETRY = 10.0
"""Seconds between attempts to start a feed that could not be started (reads then ask)."""

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


def _decode(stream: str, stream_seq: int, data: bytes, first: int) -> list[Event]:
    """The events of one message, the first of which must hold event seq ``first``."""
    lines = data.split(b"\n")
    if lines[-1] != b"" or len(lines) < 2:
        raise JournalCorrupt(stream, first, f"message {stream_seq} is not framed")
    events = []
    for offset, raw in enumerate(lines[:-1]):
        try:
            events.append(decode_event(raw, first + offset))
        except BadLine as exc:
            raise JournalCorrupt(stream, first + offset, exc.reason) from None
    return events


def _first_seq(stream: str, stream_seq: int, data: bytes) -> int:
    """The event seq of the first event in a message (checked when it is decoded)."""
    try:
        seq = json.loads(data.split(b"\n", 1)[0])["seq"]
    except (ValueError, KeyError, TypeError):
        raise JournalCorrupt(stream, 0, f"message {stream_seq} is not framed") from None
    if not isinstance(seq, int) or seq < 1:
        raise JournalCorrupt(stream, 0, f"message {stream_seq} holds no event seq")
    return seq


class NatsUnavailable(ConnectionError):
    """The JetStream server did not answer within the store's deadline."""


def stream_name(team: str) -> str:
    return f"TEAMCTL_{team}_JOURNAL"


def subject_name(team: str) -> str:
    return f"teamctl.{team}.journal"


MAX_REPLICAS = 3
"""Copies of a team's stream and bucket on a cluster of 3 or more servers (JetStream allows up
to 5; 3 survives one lost server and keeps a quorum)."""


def cluster_size(nc: Client) -> int:
    """How many servers the cluster of ``nc``'s server has, from its ``INFO``: the client URLs it
    advertises (``connect_urls``, itself included) when it is in a cluster, else 1. A server that
    is down is not listed, so this can be short of the configured cluster."""
    info: dict[str, Any] = getattr(nc, "_server_info", None) or {}
    if not info.get("cluster"):
        return 1
    return max(1, len(set(info.get("connect_urls") or [])))


def wanted_replicas(size: int, replicas: int | None) -> int:
    """``replicas`` when given, else ``min(MAX_REPLICAS, size)``."""
    return replicas if replicas is not None else min(MAX_REPLICAS, size)


async def open_stream(
    js: JetStreamContext,
    name: str,
    subject: str,
    *,
    size: int,
    replicas: int | None,
    warn: bool = True,
    **options: Any,
) -> int:
    """Find stream ``name`` or create it (file storage, subjects ``[subject]``,
    ``wanted_replicas(size, replicas)`` copies, ``options`` for the rest of its config; another
    process creating it meanwhile is fine); with ``warn``, ``warn_few_replicas`` on what it has.
    Returns its number of copies."""
    from nats.js.api import StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    try:
        info = await js.stream_info(name)
    except NotFoundError:
        config = StreamConfig(
            name=name,
            subjects=[subject],
            storage=StorageType.FILE,
            num_replicas=wanted_replicas(size, replicas),
            **options,
        )
        try:
            info = await js.add_stream(config)
        except Exception:  # another process created it meanwhile
            info = await js.stream_info(name)
    has = info.config.num_replicas or 1
    if warn:
        warn_few_replicas("stream", name, has, size)
    return has


def warn_few_replicas(kind: str, name: str, has: int, size: int) -> None:
    """Warn when an existing stream or bucket keeps fewer copies than the cluster could hold."""
    could = min(MAX_REPLICAS, size)
    if has < could:
        log.warning(
            "%s %s has %d replica(s) but the cluster has %d servers: a lost server can lose "
            "acknowledged writes; raise it to %d (nats stream edit %s --replicas %d)",
            kind,
            name,
            has,
            size,
            could,
            name if kind == "stream" else f"KV_{name}",
            could,
        )


WRITE_TIMEOUT = 1.0
"""Seconds each request of an append (its catch-up reads, its publish) waits for an answer
(at most the store's ``timeout``). A request to a stream leader that stops or dies is never
answered; a short wait turns it into an unclear outcome, resolved by commit id and retried
against the new leader, so writes resume soon after an election (docs/SCALE-OUT.md,
"Failover"). Re-publishing is safe: the same commit id and expected sequence land once."""
OPEN_DEADLINE = 60.0
"""Seconds a store keeps asking for its stream or bucket while the cluster cannot answer yet
(a leader election, or every server just restarted) before ``NatsUnavailable``."""
READ_DEADLINE = 30.0
"""How long a read keeps asking a cluster that does not answer (leader election, overload)."""


async def until_answered(make: Callable[[], Awaitable[T]], what: str, deadline: float) -> T:
    """``await make()``, again while JetStream cannot answer yet (timeout, no responders, no
    leader), for at most ``deadline`` seconds; then ``NatsUnavailable``."""
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.errors import ServiceUnavailableError

    give_up = time.monotonic() + deadline
    while True:
        try:
            return await make()
        except (NatsTimeout, NoRespondersError, ServiceUnavailableError, TimeoutError) as exc:
            if time.monotonic() > give_up:
                raise NatsUnavailable(f"{what} did not answer within {deadline}s: {exc}") from exc
            await asyncio.sleep(0.1)  # a short back-off between attempts


async def _quiet(exc: Exception) -> None:
    """nats-py's error callback (its default prints to stderr): lost connections and reconnects
    are expected during failover; callers see their own requests fail instead."""
    log.debug("nats: %s", exc)


async def connect(servers: Sequence[str], *, timeout: float, name: str, **options: Any) -> Client:
    """Connect to ``servers`` (``nats://…`` URLs); once connected the client reconnects for ever
    (every request is bounded by its own timeout instead). The first connection is bounded by
    two ``timeout``s, since nats-py would retry it for ever too: then ``NatsUnavailable``, one
    line naming the servers. ``options``: more nats-py options (callbacks)."""
    import nats
    from nats.errors import Error as NatsError

    urls = list(servers)
    try:
        return await asyncio.wait_for(
            nats.connect(
                servers=urls,
                connect_timeout=timeout,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.25,
                name=name,
                error_cb=_quiet,
                **options,
            ),
            2 * timeout,
        )
    except (TimeoutError, OSError, NatsError) as exc:
        reason = str(exc) or f"no answer within {2 * timeout:g}s"
        raise NatsUnavailable(f"cannot connect to NATS at {', '.join(urls)}: {reason}") from None


def server_version(nc: Client) -> str:
    """The version the connected server announced in its ``INFO`` (``2.15.1``; "" unknown)."""
    info: dict[str, Any] = getattr(nc, "_server_info", None) or {}
    return str(info.get("version") or "")


def _require_nats() -> None:
    try:
        import nats  # noqa: F401
    except ImportError:
        raise ImportError(INSTALL_HINT) from None


class NatsEventStore:
    """An ``EventStore`` on a JetStream stream of team ``team`` at ``servers`` (``nats://…`` URLs).

    Creates the stream when missing (file storage, ``replicas`` copies, default
    ``min(3, cluster size)``, deletes and purges denied); after connecting, ``server_version``,
    ``cluster_size`` and ``replicas`` (the stream's copies) say what it found. ``timeout`` bounds each request; ``deadline`` bounds how long one append keeps
    retrying unclear outcomes before raising ``NatsUnavailable`` (the append then may or may not
    have been stored: its commit id is found by the next append's catch-up, never stored twice).
    """

    def __init__(
        self,
        servers: str | Sequence[str],
        team: str,
        clock: Clock | None = None,
        *,
        replicas: int | None = None,
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
        self._want_replicas = replicas
        self.server_version = ""
        """The version of the server this store connected to (``2.15.1``)."""
        self.cluster_size = 1
        """Servers in the connected server's cluster when the store connected (1: none)."""
        self.replicas = 0
        """Copies of the stream kept by the cluster."""
        self._timeout = timeout
        self._deadline = deadline
        self._mutex = threading.RLock()
        self._holder: int | None = None
        self._events: list[Event] = []
        self._by_op_id: dict[str, Event] = {}
        self._msg_ids: dict[str, tuple[int, int]] = {}  # commit id -> (first, last event seq)
        self._stream_seq = 0  # the last stream message read
        # Opened at the tail (``LAZY_FROM``): the cache holds stream messages
        # ``_first_stream..`` and events ``_base + 1..``; earlier ones are read when asked for.
        self._base = 0
        self._first_stream = 1
        self._synced = False  # caught up (by asking the server) at least once
        # The feed (an ordered push consumer): its callback, on the loop, files messages here by
        # stream seq; the caller's thread indexes them in order under the mutex (``_drain``).
        self._feed: dict[int, tuple[str | None, bytes]] = {}
        self._fed = threading.Condition()
        self._feed_sub: Any = None
        self._feed_tried = -FEED_RETRY  # monotonic time of the last attempt to start it
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"nats-journal-{team}", daemon=True
        )
        self._thread.start()
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._js_quick: JetStreamContext | None = None
        self._inflight: set[asyncio.Future[Any]] = set()  # publishes awaiting a reply
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
        while_queued: Callable[[], None] | None = None,  # never queued that way: not called
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
        """Events with ``seq >= seq`` as of this call (the server is asked for its last one)."""
        self._check_open()
        with self._mutex:
            self._catch_up()
            start = max(seq, 1)
            if start <= self._base:
                self._load_before(start)
            snapshot = self._events[start - 1 - self._base :]
        return iter(snapshot)

    def last_seq(self) -> int:
        self._check_open()
        with self._mutex:
            self._catch_up()
            return self._end()

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
        ask = not self._synced  # ask the server (not only the feed) before deciding
        target = 0  # a stream seq the server said is stored
        lost = 0  # races lost by this append
        while True:
            if ask:
                self._catch_up_until(give_up, quick=True)
            else:
                self._reach_until(target, give_up)
            current, ask, target = ask, False, 0  # current: the server was asked just now
            if pending is not None:
                if pending.msg_id in self._msg_ids:  # the unclear publish landed
                    return self._slice(after, pending.base), pending.new, pending.result
                if self._stream_seq != pending.stream_seq:
                    pending = None  # it can never land: its expected sequence is gone
            if pending is None:
                if after > self._end() and not current:
                    ask = True  # the caller knows of events the feed has not brought yet
                    continue
                check_after(after, self._end())
                if after < self._base:
                    self._load_before(after + 1)
                seen = self._slice(after, None)
                try:
                    drafts = decide(seen)
                    new, result = stamp(
                        drafts,
                        next_seq=self._end() + 1,
                        ts=self._clock.now(),
                        lookup=self._lookup_op,
                    )
                except Exception:
                    if current:
                        raise
                    ask = True  # refused on the feed's view: decide again on the server's
                    continue
                if not new:
                    if current:
                        return seen, new, result
                    ask = True  # nothing to store: only the server's view can say so
                    continue
                pending = _Pending(
                    msg_id=uuid.uuid4().hex,
                    stream_seq=self._stream_seq,
                    base=self._end(),
                    payload=b"".join(encode(event) for event in new),
                    new=new,
                    result=result,
                )
            headers = {EXPECTED_LAST_SEQ: str(pending.stream_seq), MSG_ID: pending.msg_id}
            try:
                ack = self._run(self._publish(pending.payload, headers))
            except APIError as exc:
                if exc.err_code == WRONG_LAST_SEQUENCE:
                    # Someone appended first (or ours landed): catch up to the stream's last
                    # sequence, which the answer names, look for ours, decide again.
                    found = _LAST_SEQ.search(exc.description or "")
                    target = int(found.group(1)) if found else 0
                    ask = found is None
                    lost += 1
                    self._back_off(lost)
                    continue
                if isinstance(exc, ServiceUnavailableError):
                    self._check_deadline(give_up, exc)
                    ask = True
                    continue
                raise
            except unclear as exc:
                self._check_deadline(give_up, exc)
                ask = True
                continue
            if ack.seq != pending.stream_seq + 1:  # not where we expected: read it back
                ask = True
                continue
            self._index(ack.seq, pending.msg_id, pending.new)
            return self._slice(after, pending.base), pending.new, pending.result

    def _end(self) -> int:
        """The last event seq read."""
        return self._base + len(self._events)

    def _slice(self, after: int, upto: int | None) -> tuple[Event, ...]:
        """Events with ``after < seq <= upto`` (None: to the end); ``after >= _base``."""
        return tuple(self._events[after - self._base : None if upto is None else upto - self._base])

    def _lookup_op(self, op_id: str) -> Event | None:
        """The stored event of ``op_id``: every event is read first (op ids can be anywhere)."""
        if self._base:
            self._load_before(1)
        return self._by_op_id.get(op_id)

    def _back_off(self, lost: int) -> None:
        """After losing ``lost`` races in a row, wait a random while (up to ``BACK_OFF_FIRST``
        seconds, doubling with each loss, at most ``BACK_OFF_MAX``) before deciding again.
        Contenders that retry at once mostly lose again to the writer that just won (it knows
        its own commit first) and burn the CPU and server time that writer needs; backing off
        measured 1.4 times the claims per second of retrying at once (docs/SCALE-OUT.md)."""
        time.sleep(random.uniform(0, min(BACK_OFF_MAX, BACK_OFF_FIRST * 2 ** (lost - 1))))

    def _check_deadline(self, give_up: float, exc: BaseException) -> None:
        if time.monotonic() > give_up:
            raise NatsUnavailable(
                f"JetStream stream {self.stream} did not answer within {self._deadline}s: {exc}"
            ) from exc

    def _catch_up_until(self, give_up: float, *, quick: bool = False) -> None:
        """Catch up, retrying while the server cannot answer until ``give_up``. Retries (and
        ``quick``, an append's catch-up) ask with ``WRITE_TIMEOUT``: during a leader election a
        request gets no answer at all, and waiting a whole ``timeout`` each time would add up
        to seconds after the new leader is elected."""
        self._until(give_up, lambda fast: self._catch_up(quick=fast), quick)

    def _reach_until(self, target: int, give_up: float) -> None:
        """Index what the feed delivered; when stream seq ``target`` (known to be stored) is
        still ahead, wait briefly for the feed, then read the rest (retrying like
        ``_catch_up_until``)."""
        self._drain()
        if target > self._stream_seq and not self._await_feed(target):
            self._until(give_up, lambda _fast: self._read_to(target, self._js_quick), True)

    def _until(self, give_up: float, step: Callable[[bool], None], quick: bool) -> None:
        from nats.errors import ConnectionClosedError, NoRespondersError
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.errors import ServiceUnavailableError

        while True:
            try:
                step(quick)
                return
            except (
                TimeoutError,
                NatsTimeout,
                ConnectionClosedError,
                NoRespondersError,
                ServiceUnavailableError,
            ) as exc:
                self._check_deadline(give_up, exc)
                quick = True

    def _catch_up(self, *, quick: bool = False) -> None:
        """Index every message stored before this call: ask the stream's last sequence (one
        request), take what the feed brings, read what it does not (holds the mutex)."""
        with self._mutex:
            self._drain()
            js = self._js_quick if quick else self._js
            last = self._run(self._last_stored(js))
            if self._stream_seq == 0 and last > LAZY_FROM:
                self._anchor(last, js)
            self._ensure_feed()
            if last > self._stream_seq and not self._await_feed(last):
                self._read_to(last, js)
            self._synced = True

    def _anchor(self, last: int, js: JetStreamContext | None) -> None:
        """Start the cache at stream message ``last`` (an empty cache, a long stream)."""
        (stream_seq, msg_id, data), *_ = self._run(self._fetch(last - 1, last, js))
        self._base = _first_seq(self.stream, stream_seq, data) - 1
        self._stream_seq = stream_seq - 1
        self._first_stream = stream_seq
        self._ingest(stream_seq, msg_id, data)

    def _load_before(self, seq: int) -> None:
        """Read the events from ``seq`` up to the first one cached (``seq <= _base``): find the
        message holding ``seq`` by binary search on each message's first event seq, then read
        from there to the cache's first message (holds the mutex)."""
        js = self._js
        lo, hi = 1, self._first_stream - 1  # the stream seqs before the cache
        while lo < hi:  # the last message whose first event is at or before seq
            mid = (lo + hi + 1) // 2
            ((at, _, data),) = self._run(self._fetch(mid - 1, mid, js))
            if _first_seq(self.stream, at, data) <= seq:
                lo = mid
            else:
                hi = mid - 1
        found = self._run(self._fetch(lo - 1, self._first_stream - 1, js))
        if len(found) != self._first_stream - lo:
            raise JournalCorrupt(
                self.stream, seq, f"messages {lo}..{self._first_stream - 1} missing"
            )
        events: list[Event] = []
        msg_ids: dict[str, tuple[int, int]] = {}
        next_seq = _first_seq(self.stream, lo, found[0][2])
        for stream_seq, msg_id, data in found:
            batch = _decode(self.stream, stream_seq, data, next_seq)
            if msg_id:
                msg_ids[msg_id] = (batch[0].seq, batch[-1].seq)
            events += batch
            next_seq += len(batch)
        if next_seq != self._base + 1:
            raise JournalCorrupt(
                self.stream, next_seq, f"message {self._first_stream} does not follow"
            )
        by_op_id: dict[str, Event] = {}
        for event in events:
            if event.op_id is not None:
                by_op_id.setdefault(event.op_id, event)
        for op_id, event in self._by_op_id.items():
            by_op_id.setdefault(op_id, event)
        self._by_op_id = by_op_id
        self._msg_ids.update(msg_ids)
        self._events[:0] = events
        self._base -= len(events)
        self._first_stream = lo

    def _read_to(self, target: int, js: JetStreamContext | None) -> None:
        """Read and index the messages after ``_stream_seq`` up to ``target`` with requests."""
        self._drain()
        if target > self._stream_seq:
            for stream_seq, msg_id, data in self._run(self._fetch(self._stream_seq, target, js)):
                if stream_seq == self._stream_seq + 1:  # the feed may have brought it meanwhile
                    self._ingest(stream_seq, msg_id, data)
                self._drain()

    def _drain(self) -> None:
        """Index, in order, the messages the feed delivered (holds the mutex)."""
        with self._mutex:
            while True:
                with self._fed:
                    got = self._feed.pop(self._stream_seq + 1, None)
                    if got is None:
                        for stale in [s for s in self._feed if s <= self._stream_seq]:
                            del self._feed[stale]
                        return
                self._ingest(self._stream_seq + 1, *got)

    def _await_feed(self, target: int) -> bool:
        """Index feed messages until stream seq ``target``; False when the feed brings nothing
        for ``FEED_WAIT`` seconds (or there is no feed)."""
        wait_until = time.monotonic() + FEED_WAIT
        while True:
            before = self._stream_seq
            self._drain()
            if self._stream_seq >= target:
                return True
            if self._feed_sub is None:
                return False
            now = time.monotonic()
            if self._stream_seq > before:
                wait_until = now + FEED_WAIT  # it is delivering: keep taking from it
            elif now >= wait_until:
                return False
            with self._fed:
                if self._stream_seq + 1 not in self._feed:
                    self._fed.wait(wait_until - now)

    def _ensure_feed(self) -> None:
        """Start the feed when there is none (at most every ``FEED_RETRY`` seconds); without
        one every catch-up reads with requests."""
        if self._feed_sub is not None or time.monotonic() - self._feed_tried < FEED_RETRY:
            return
        self._run(self._start_feed())

    def _ingest(self, stream_seq: int, msg_id: str | None, data: bytes) -> None:
        self._index(stream_seq, msg_id, _decode(self.stream, stream_seq, data, self._end() + 1))

    def _index(self, stream_seq: int, msg_id: str | None, events: Sequence[Event]) -> None:
        if stream_seq != self._stream_seq + 1:
            raise JournalCorrupt(
                self.stream, self._end() + 1, f"message {stream_seq} after {self._stream_seq}"
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
        from nats.js.api import DiscardPolicy, StorageType, StreamConfig
        from nats.js.errors import NotFoundError

        self._nc = await connect(
            self._servers,
            timeout=self._timeout,
            name=f"teamctl-journal-{self.team}",
            disconnected_cb=self._disconnected,
        )
        self._js = self._nc.jetstream(timeout=self._timeout)
        self._js_quick = self._nc.jetstream(timeout=min(WRITE_TIMEOUT, self._timeout))
        self.server_version = server_version(self._nc)
        self.cluster_size = cluster_size(self._nc)
        js = self._js

        async def find_or_create() -> Any:
            try:
                return await js.stream_info(self.stream)
            except NotFoundError:
                config = StreamConfig(
                    name=self.stream,
                    subjects=[self.subject],
                    storage=StorageType.FILE,
                    num_replicas=wanted_replicas(self.cluster_size, self._want_replicas),
                    discard=DiscardPolicy.NEW,
                    deny_delete=True,
                    deny_purge=True,
                )
                return await js.add_stream(config)  # the same config twice is not an error

        info = await until_answered(
            find_or_create, f"JetStream stream {self.stream}", min(self._deadline, OPEN_DEADLINE)
        )
        self.replicas = info.config.num_replicas or 1
        warn_few_replicas("stream", self.stream, self.replicas, self.cluster_size)

    async def _start_feed(self) -> None:
        """Subscribe the feed from the first message not indexed yet; a failure (the cluster
        cannot create consumers right now) leaves the store without one until a later
        catch-up tries again (``FEED_RETRY``)."""
        from nats.js.api import ConsumerConfig, DeliverPolicy

        assert self._js is not None
        self._feed_tried = time.monotonic()
        try:
            self._feed_sub = await self._js.subscribe(
                self.subject,
                stream=self.stream,
                cb=self._on_feed,
                ordered_consumer=True,
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                config=ConsumerConfig(opt_start_seq=self._stream_seq + 1),
                idle_heartbeat=FEED_HEARTBEAT,
            )
        except Exception as exc:  # nats-py errors, timeouts: reads ask instead
            log.debug("journal feed of %s not started: %s", self.stream, exc)

    async def _on_feed(self, msg: Any) -> None:
        """A message of the feed (on the loop): filed for the caller's thread to index."""
        try:
            stream_seq = int(msg.metadata.sequence.stream)
        except (ValueError, TypeError, AttributeError):  # not a stream message
            return
        with self._fed:
            if stream_seq > self._stream_seq:
                self._feed[stream_seq] = ((msg.headers or {}).get(MSG_ID), msg.data or b"")
                self._fed.notify_all()

    async def _last_stored(self, js: JetStreamContext | None) -> int:
        """The stream's last sequence, as its leader knows it."""
        assert js is not None
        # A busy or electing cluster may miss one request: ask again (bounded), and never let a
        # raw client timeout reach a command (NatsUnavailable is one line).
        stream = self.stream
        info = await until_answered(
            lambda: js.stream_info(stream), f"stream {stream}", READ_DEADLINE
        )
        return int(info.state.last_seq or 0)

    async def _publish(self, payload: bytes, headers: dict[str, str]) -> Any:
        """Publish and wait (at most ``WRITE_TIMEOUT``) for the acknowledgement; a connection
        lost meanwhile is ``ConnectionClosedError`` at once (an unclear outcome), not a wait for
        the timeout."""
        from nats.errors import ConnectionClosedError

        assert self._js is not None
        timeout = min(WRITE_TIMEOUT, self._timeout)
        sent = asyncio.ensure_future(
            self._js.publish(self.subject, payload, timeout=timeout, headers=dict(headers))
        )
        self._inflight.add(sent)
        try:
            return await sent
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not sent.cancelled() or (current is not None and current.cancelling()):
                raise  # we were cancelled, not the publish
            raise ConnectionClosedError from None
        finally:
            self._inflight.discard(sent)

    async def _disconnected(self) -> None:
        """The connection was lost (a server stopped or died): the acknowledgements of the
        publishes in flight would have come on it, so they never come. Fail them now; each is
        then looked up by its commit id after reconnecting (docs/SCALE-OUT.md, "Failover")."""
        for sent in list(self._inflight):
            sent.cancel()

    async def _fetch(
        self, known: int, target: int, js: JetStreamContext | None
    ) -> list[tuple[int, str | None, bytes]]:
        """The messages after stream seq ``known`` up to ``target``: ``(seq, commit id, data)``
        in order, ``_FETCH_BATCH`` requests at a time. Messages are never deleted
        (deny_delete); a missing one ends the list."""
        from nats.js.errors import NotFoundError

        assert js is not None
        stream = self.stream

        async def get(seq: int) -> Any:
            try:
                return await js.get_msg(stream, seq)
            except NotFoundError as exc:
                if exc.err_code == NO_MESSAGE:
                    return None
                raise

        found: list[tuple[int, str | None, bytes]] = []
        for start in range(known + 1, target + 1, _FETCH_BATCH):
            seqs = range(start, min(start + _FETCH_BATCH, target + 1))
            for msg in await asyncio.gather(*(get(seq) for seq in seqs)):
                if msg is None:
                    return found
                headers = msg.headers or {}
                found.append((int(msg.seq or 0), headers.get(MSG_ID), msg.data or b""))
        return found

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"event store {self.stream} is closed")
