"""Member liveness on a JetStream key-value bucket: a TTL lease per hosted agent
(docs/ARCHITECTURE.md, "Locks"; docs/SCALE-OUT.md, "Liveness").

The same interface as ``FlockLiveness`` (``hold``, ``is_alive``, ``alive``), for a team whose
hosts share no file system. One bucket per team (``TEAMCTL_<team>_MEMBERS``, file storage, one
revision per key) whose TTL is the lease TTL: a key lives ``ttl`` seconds after its last write.

- ``hold`` creates the agent's key (create-only: while a live holder's key exists a second
  ``hold``, in this process or any other, raises ``LeaseHeld``), then refreshes it every
  ``refresh`` seconds by compare-and-swap on the revision it last wrote.
- A failed compare-and-swap means the key expired or was deleted and perhaps taken by another
  holder: the lease is lost. So is a lease whose refreshes could not be confirmed for ``ttl``
  seconds (the server was unreachable; the key may have expired meanwhile). Either way the
  holder stops refreshing, ``held(agent)`` turns False and ``on_lost(agent)`` runs (in a worker
  thread) so that the host stops the agent; leaving the ``hold`` then deletes nothing.
- Leaving ``hold`` deletes the key (compare-and-swap on its revision, so another holder's key is
  never deleted). A holder that dies, or stops refreshing, is seen dead once the TTL passes: the
  server drops the key. This replaces the kernel dropping a ``flock`` and is what ``owner_dead``
  relies on (docs/RELIABILITY.md).

Replicas: as for the journal stream (``mailboxes.journal.nats.wanted_replicas``): a new bucket gets
``min(3, cluster size)`` copies unless ``replicas`` says otherwise; an existing bucket is used as
it is, and fewer copies than the cluster could hold are a warning (``NatsLiveness.replicas``).

nats-py is asyncio: like ``NatsEventStore`` (mailboxes/journal/nats.py), the store owns one event
loop in a daemon thread; refreshes are timers on that loop (no polling); ``close`` stops them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from mailboxes.errors import LeaseHeld, LivenessUnavailable
from mailboxes.messages import check_agent_name

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.kv import KeyValue

__all__ = ["NatsLiveness", "bucket_name"]

INSTALL_HINT = "the JetStream backend needs nats-py: pip install 'teamctl[nats]'"
_TEAM_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

T = TypeVar("T")


def bucket_name(team: str) -> str:
    return f"TEAMCTL_{team}_MEMBERS"


def _key(agent: str) -> str:
    """The bucket key of ``agent``: ``.`` (a subject separator in NATS) becomes ``=``, which no
    agent name contains, so the mapping is one-to-one."""
    return check_agent_name(agent).replace(".", "=")


def _agent(key: str) -> str | None:
    name = key.replace("=", ".")
    try:
        return check_agent_name(name)
    except ValueError:
        return None


def _require_nats() -> None:
    try:
        import nats  # noqa: F401
    except ImportError:
        raise ImportError(INSTALL_HINT) from None


@dataclass
class _Lease:
    agent: str
    value: bytes
    revision: int
    confirmed: float
    """``time.monotonic()`` when the last write of the key was sent and then acknowledged."""
    lost: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    stop: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    """Set by the release: the refresh loop ends after any write in flight (never cancelled
    mid-write, so the release deletes the revision actually stored)."""


class NatsLiveness:
    """The JetStream ``Liveness`` of team ``team`` at ``servers`` (``nats://…`` URLs).

    ``ttl``: seconds a lease outlives its holder's last refresh (the bucket's TTL; every process
    of a team must use the same one: a bucket that exists with another TTL is refused).
    ``refresh``: seconds between refreshes, default ``ttl / 3``; must be below ``ttl``.
    ``on_lost(agent)``: called once, in a worker thread, when a held lease is lost.
    """

    def __init__(
        self,
        servers: str | Sequence[str],
        team: str,
        *,
        ttl: float = 10.0,
        refresh: float | None = None,
        on_lost: Callable[[str], None] | None = None,
        replicas: int | None = None,
        timeout: float = 5.0,
    ) -> None:
        _require_nats()
        if not _TEAM_NAME.match(team):
            raise ValueError(f"team name {team!r} must be 1-64 of A-Z a-z 0-9 _ -")
        refresh = ttl / 3 if refresh is None else refresh
        if not 0 < refresh < ttl:
            raise ValueError(f"refresh ({refresh}s) must be positive and below ttl ({ttl}s)")
        self.team = team
        self.bucket = bucket_name(team)
        self.ttl = ttl
        self.refresh = refresh
        self._servers = [servers] if isinstance(servers, str) else list(servers)
        self._on_lost = on_lost
        self._want_replicas = replicas
        self.server_version = ""
        """The version of the server this store connected to."""
        self.cluster_size = 1
        """Servers in the connected server's cluster when the store connected (1: none)."""
        self.replicas = 0
        """Copies of the bucket kept by the cluster."""
        self._timeout = timeout
        self._leases: dict[str, _Lease] = {}  # touched only on the loop thread
        self._closed = False
        self._nc: Client | None = None
        self._kv: KeyValue | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"nats-liveness-{team}", daemon=True
        )
        self._thread.start()
        try:
            self._run(self._connect())
        except BaseException:
            self.close()
            raise

    # --- Liveness -----------------------------------------------------------------------------

    @contextmanager
    def hold(self, agent: str) -> Iterator[None]:
        """Hold ``agent``'s lease while the context is open, refreshing it in the background.
        Raises ``LeaseHeld`` if a live holder (here or in any other process) has it."""
        key = _key(agent)
        self._check_open()
        lease = self._run(self._acquire(agent, key))
        try:
            yield
        finally:
            if not self._closed:
                self._run(self._release(key, lease))

    def is_alive(self, agent: str) -> bool:
        """True while some holder's lease on ``agent`` has not expired. An unreachable server is
        ``LivenessUnavailable`` (a ``MailboxesError``: ``actors.board.rules.alive`` then treats
        the owner as alive, so nothing is released on a guess)."""
        key = _key(agent)
        self._check_open()
        return self._reachable(lambda: self._run(self._exists(key), timeout=self._timeout))

    def alive(self) -> list[str]:
        """Agents whose lease is held right now, sorted (``LivenessUnavailable`` as above)."""
        self._check_open()
        keys = self._reachable(lambda: self._run(self._keys(), timeout=self._timeout))
        return sorted(a for a in map(_agent, keys) if a is not None)

    def _reachable(self, read: Callable[[], T]) -> T:
        from nats.errors import Error as NatsError

        try:
            return read()
        except (NatsError, TimeoutError) as exc:
            raise LivenessUnavailable(
                f"liveness store {self.bucket} cannot be reached: {exc or type(exc).__name__}"
            ) from exc

    # --- beyond the protocol ------------------------------------------------------------------

    def held(self, agent: str) -> bool:
        """True while a ``hold`` of this store has ``agent``'s lease and has not lost it."""
        key = _key(agent)

        async def check() -> bool:
            lease = self._leases.get(key)
            return lease is not None and not lease.lost

        return not self._closed and self._run(check())

    def close(self) -> None:
        """Stop refreshing, close the connection and stop the loop thread; idempotent. Leases
        still held are not deleted: they expire after the TTL."""
        if self._closed:
            return
        self._closed = True
        if self._loop.is_running():
            with contextlib.suppress(Exception):  # a stuck loop: the thread is a daemon
                self._run(self._shutdown(), timeout=2 * self._timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=self._timeout)
        if not self._thread.is_alive():
            self._loop.close()

    # --- coroutines (run on the store's loop) -------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise

    async def _connect(self) -> None:
        from nats.js.api import KeyValueConfig, StorageType
        from nats.js.errors import BadRequestError

        from mailboxes.journal.nats import (
            OPEN_DEADLINE,
            cluster_size,
            connect,
            server_version,
            until_answered,
            wanted_replicas,
            warn_few_replicas,
        )

        # Bounded: an unreachable server is NatsUnavailable, not a retry for ever.
        self._nc = await connect(
            self._servers, timeout=self._timeout, name=f"teamctl-liveness-{self.team}"
        )
        js = self._nc.jetstream(timeout=self._timeout)
        self.server_version = server_version(self._nc)
        self.cluster_size = cluster_size(self._nc)
        config = KeyValueConfig(
            bucket=self.bucket,
            history=1,
            ttl=self.ttl,
            storage=StorageType.FILE,
            replicas=wanted_replicas(self.cluster_size, self._want_replicas),
        )
        what = f"liveness bucket {self.bucket}"
        try:  # the same config twice is no error
            self._kv = await until_answered(
                lambda: js.create_key_value(config), what, OPEN_DEADLINE
            )
        except BadRequestError:  # exists with another configuration
            self._kv = await until_answered(lambda: js.key_value(self.bucket), what, OPEN_DEADLINE)
            existing = (await self._kv.status()).ttl
            if existing is None or abs(existing - self.ttl) > 1e-6:
                raise ValueError(
                    f"liveness bucket {self.bucket} has a lease TTL of {existing}s, not {self.ttl}s"
                ) from None
        kv = self._kv
        status = await until_answered(kv.status, what, OPEN_DEADLINE)
        self.replicas = status.stream_info.config.num_replicas or 1
        warn_few_replicas("bucket", self.bucket, self.replicas, self.cluster_size)

    def _holder(self) -> bytes:
        """A new lease's value: who holds it, for people (liveness is the key itself), and an id
        unique to the lease (how a holder recognises its own write)."""
        return json.dumps(
            {"host": socket.gethostname(), "pid": os.getpid(), "lease": uuid.uuid4().hex}
        ).encode()

    async def _acquire(self, agent: str, key: str) -> _Lease:
        from nats.js.errors import KeyWrongLastSequenceError

        assert self._kv is not None
        value = self._holder()
        sent = time.monotonic()
        try:
            revision = await self._kv.create(key, value)
        except KeyWrongLastSequenceError:
            raise LeaseHeld(agent) from None
        lease = _Lease(agent, value, revision, confirmed=sent)
        lease.task = asyncio.ensure_future(self._keep(key, lease))
        self._leases[key] = lease
        return lease

    async def _keep(self, key: str, lease: _Lease) -> None:
        """Refresh ``lease`` every ``refresh`` seconds until it is released or lost."""
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        assert self._kv is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lease.stop.wait(), self.refresh)
            if lease.stop.is_set():
                return
            sent = time.monotonic()
            try:
                try:
                    lease.revision = await self._kv.update(key, lease.value, last=lease.revision)
                except KeyWrongLastSequenceError:
                    # Ours still, if an earlier refresh with an unclear outcome landed (the value
                    # is unique to this lease); else expired or deleted, perhaps taken: lost.
                    entry = await self._kv.get(key)
                    if entry.value != lease.value:
                        raise
                    lease.revision = entry.revision or lease.revision
                    continue
                lease.confirmed = sent
                continue
            except (KeyWrongLastSequenceError, KeyNotFoundError):
                pass
            except Exception:  # unreachable server: lost once the key may have expired
                if time.monotonic() - lease.confirmed < self.ttl:
                    continue
            self._lose(lease)
            return

    def _lose(self, lease: _Lease) -> None:
        lease.lost = True
        if self._on_lost is not None:
            self._loop.run_in_executor(None, self._on_lost, lease.agent)

    async def _release(self, key: str, lease: _Lease) -> None:
        assert self._kv is not None
        lease.stop.set()
        if lease.task is not None:
            with contextlib.suppress(Exception):
                await lease.task
        if self._leases.get(key) is lease:
            del self._leases[key]
        if not lease.lost:
            with contextlib.suppress(Exception):  # else it expires after the TTL
                await self._delete_own(key, lease)

    async def _delete_own(self, key: str, lease: _Lease) -> None:
        """Delete ``lease``'s key, only at a revision it wrote: another holder's key is theirs."""
        from nats.js.errors import KeyWrongLastSequenceError

        assert self._kv is not None
        try:
            await self._kv.delete(key, last=lease.revision)
        except KeyWrongLastSequenceError:
            entry = await self._kv.get(key)  # a refresh with an unclear outcome landed?
            if entry.value == lease.value and entry.revision:
                await self._kv.delete(key, last=entry.revision)

    async def _exists(self, key: str) -> bool:
        from nats.js.errors import KeyNotFoundError

        assert self._kv is not None
        try:
            await self._kv.get(key)
        except KeyNotFoundError:  # never written, deleted, or expired
            return False
        return True

    async def _keys(self) -> list[str]:
        """Keys of live leases: the bucket stream's subjects as its leader counts them (one
        request, no consumer: the bucket's key listing runs an ordered consumer that, right after
        a whole cluster restarted, listed nothing for a key just put), each confirmed the way
        ``is_alive`` reads it (a listed key may be a delete marker or have just expired)."""
        assert self._kv is not None and self._nc is not None
        js = self._nc.jetstream(timeout=self._timeout)
        prefix = f"$KV.{self.bucket}."
        info = await js.stream_info(f"KV_{self.bucket}", subjects_filter=f"{prefix}>")
        listed = [s.removeprefix(prefix) for s in (info.state.subjects or {})]
        live = await asyncio.gather(*(self._exists(key) for key in listed))
        return [key for key, ok in zip(listed, live, strict=True) if ok]

    async def _shutdown(self) -> None:
        for lease in list(self._leases.values()):
            if lease.task is not None:
                lease.task.cancel()
        self._leases.clear()
        if self._nc is not None:
            # A connection lost on the way out (say, while reconnecting) has nothing to flush.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._nc.close(), self._timeout)
        # Whatever the client left running ends here, not when the closed loop is collected.
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"liveness store {self.bucket} is closed")
