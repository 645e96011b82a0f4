"""Every seam of the durable layer to the outside world, on one screen.

The file implementations (journal, Maildir, flock liveness, watchfiles watcher, blobs,
transcripts) live beside this module; nothing outside ``mailboxes/`` touches ``.team/journal.jsonl``
or a Maildir folder directly. The JetStream backend (docs/SCALE-OUT.md) implements the same
protocols; docs/ARCHITECTURE.md, "Backends and seams", has the table of ports and backends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from mailboxes.events import Event, EventDraft
    from mailboxes.messages import Envelope, MessageDraft


class Clock(Protocol):
    """Wall and monotonic time. Tests pass a fake they advance by hand."""

    def now(self) -> float:
        """Seconds since the epoch (wall clock, used for timestamps)."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds (used for timeouts and durations)."""
        ...


class IdSource(Protocol):
    """Unique ids (message ids, request ids, op ids)."""

    def new_id(self) -> str:
        """A fresh id, unique across processes (uuid4 hex in production)."""
        ...


Decide = Callable[[Sequence["Event"]], Sequence["EventDraft"]]
"""Called under the store's serialisation with the events appended after the caller's ``after``
seq (the caller folds them into its state), returns the drafts to append (possibly none), or raises
to abort without writing. A backend with optimistic concurrency may call it more than once, so it
must depend only on its argument and the caller's state as of ``after``."""


class AppendResult(Protocol):
    """What an append saw and wrote."""

    @property
    def seen(self) -> Sequence[Event]:
        """Events with seq > ``after`` that were already stored when ``decide`` ran."""
        ...

    @property
    def appended(self) -> Sequence[Event]:
        """The events for the drafts, in order. A draft whose ``op_id`` was already stored yields
        the stored event (idempotent no-op) instead of a new one."""
        ...


@runtime_checkable
class EventStore(Protocol):
    """The journal: an append-only, totally ordered log of events with dense seqs from 1.

    Ordering: ``seq`` is dense and strictly increasing; every reader sees the same order.
    Idempotency: an append whose draft ``op_id`` is already stored writes nothing for that draft
    and returns the stored event. Durability: when ``append`` returns, the events are on stable
    storage (fsync) and the ``on_commit`` callback has run. Concurrency: appends from any number of
    threads and processes are serialised; ``decide`` runs inside that serialisation against every
    event stored before it, which is what makes claims linearizable.
    """

    def append(
        self,
        decide: Decide,
        *,
        after: int,
        on_commit: Callable[[Sequence[Event]], None] | None = None,
        while_queued: Callable[[], None] | None = None,
    ) -> AppendResult:
        """Catch up from ``after``, ask ``decide`` for drafts, store them durably, then run
        ``on_commit(all events with seq > after)`` while still serialised (projection writes).
        ``while_queued``: a hint, called outside the serialisation while this append waits for
        another writer (e.g. to fold, ahead of ``decide``, what others appended); a store that
        does not wait that way never calls it."""
        ...

    def read_from(self, seq: int) -> Iterator[Event]:
        """Events with ``seq >= seq`` in order (a snapshot: later appends may or may not show)."""
        ...

    def last_seq(self) -> int:
        """The highest stored seq (0 for an empty store)."""
        ...

    def close(self) -> None:
        """Release file handles; idempotent."""
        ...


@runtime_checkable
class Mailbox(Protocol):
    """Durable per-agent inboxes: at-least-once delivery, effectively-once processing.

    Delivery is durable when ``deliver`` returns. Messages are read oldest first and stay in
    ``new`` until acked; ack moves them to ``cur``. A message id is in exactly one place.
    """

    def deliver(self, sender: str, draft: MessageDraft) -> list[Envelope]:
        """Deliver to ``draft.to`` (``*`` = every known agent but the sender: one copy each).
        ``sender`` is set by the transport, never taken from the message. Unknown recipient →
        ``UnknownRecipient``."""
        ...

    def deliver_keyed(self, sender: str, draft: MessageDraft, message_id: str) -> bool:
        """Deliver ``draft`` to one agent under ``message_id`` unless it already holds that id
        (acked or not): a sender that may have delivered before a restart delivers once. True
        if delivered now."""
        ...

    def pending(
        self, agent: str, *, max_messages: int = 50, max_bytes: int = 256_000
    ) -> list[Envelope]:
        """Unacked messages for ``agent``, oldest first, bounded; duplicates by id dropped."""
        ...

    def ack(self, agent: str, message_ids: Sequence[str]) -> None:
        """Mark processed: move from new to cur. Unknown or already-acked ids are ignored."""
        ...

    def agents(self) -> list[str]:
        """Known agents (those with an inbox), sorted."""
        ...

    def ensure_inbox(self, agent: str) -> None:
        """Create ``agent``'s inbox if it does not exist (idempotent)."""
        ...

    def unread(self, agent: str) -> int:
        """How many messages ``agent`` has not acked yet (``UnknownRecipient`` if no inbox)."""
        ...

    def has_unread(self, agent: str) -> bool:
        """Whether ``agent`` has any unacked message (False when it has no inbox); cheaper than
        ``unread`` (the rescan tick asks it of every member)."""
        ...

    def holds(self, agent: str, message_id: str) -> bool:
        """Whether ``agent``'s inbox has the message of this id, acked or not (keyed
        re-delivery: a sender that may have delivered before a restart asks first)."""
        ...


@runtime_checkable
class MailArchive(Protocol):
    """Read-only audit of inboxes (scenario checks, the nothing-lost oracle): what a ``Mailbox``
    still stores, acked or not. Both backends' mailboxes have it beside the ``Mailbox``
    protocol."""

    def history(self, agent: str) -> list[Envelope]:
        """Every message still stored for ``agent`` (acked ones until pruned, unacked ones),
        oldest first, each stored copy once: a message id stored twice appears twice.
        ``UnknownRecipient`` without an inbox."""
        ...

    def close(self) -> None:
        """Release what it holds (connections, threads); idempotent. A file Maildir holds nothing."""
        ...


@runtime_checkable
class BlobStore(Protocol):
    """Named byte blobs a team keeps beside its journal (state snapshots): a cache, never the
    truth. ``put`` replaces a blob atomically (a reader sees the old or the new bytes, whole);
    nothing promises it survives a crash, so readers check what they get."""

    def get(self, name: str) -> bytes | None:
        """The blob ``name`` (None if there is none)."""
        ...

    def put(self, name: str, data: bytes) -> None:
        """Store ``data`` as ``name``, replacing any earlier blob of that name."""
        ...

    def close(self) -> None:
        """Release what it holds (connections, threads); idempotent. Files hold nothing."""
        ...


@runtime_checkable
class TranscriptStore(Protocol):
    """What hosted agents and their background jobs leave as text: each agent's transcript (the
    JSONL lines of ``harness/transcript.py``) and each job's output log. Written by the process
    hosting them; read through this port by anyone who shows them (the web dashboard, scenario
    checks), so a reader never opens ``.team/`` paths itself."""

    def agents(self) -> list[str]:
        """Agents that have a transcript, sorted."""
        ...

    def transcript(self, agent: str) -> bytes | None:
        """``agent``'s whole transcript (its JSONL lines; None: it has none)."""
        ...

    def job_output(self, job_id: str, *, tail: int) -> tuple[bytes, int] | None:
        """The last ``tail`` bytes of job ``job_id``'s output and its whole size in bytes
        (None: no output recorded for it)."""
        ...

    def close(self) -> None:
        """Release what it holds (connections, threads); idempotent. Files hold nothing."""
        ...


@runtime_checkable
class Liveness(Protocol):
    """Member liveness: a held lease per hosted agent, released by the OS when its holder dies."""

    def hold(self, agent: str) -> AbstractContextManager[None]:
        """Hold ``agent``'s lease for the lifetime of the context. Raises ``LeaseHeld`` if another
        live holder has it."""
        ...

    def is_alive(self, agent: str) -> bool:
        """True while some live process (or thread in this one) holds ``agent``'s lease."""
        ...

    def close(self) -> None:
        """Release what it holds (connections, threads); idempotent. Leases still held are not
        given up by it (a lease on a cluster expires after its TTL); flock leases hold nothing."""
        ...


@dataclass(frozen=True, slots=True)
class JournalAdvanced:
    """Wake-up hint: the journal may have new events (re-read from your cursor)."""


@dataclass(frozen=True, slots=True)
class InboxChanged:
    """Wake-up hint: ``agent``'s inbox changed (a message arrived or was acked)."""

    agent: str


@dataclass(frozen=True, slots=True)
class Tick:
    """Wake-up hint: the periodic rescan; re-check everything (a hint may have been dropped)."""


Hint = JournalAdvanced | InboxChanged | Tick
"""What a ``Watcher`` reports. Consumers match on these types only, never on paths."""

OnHints = Callable[[frozenset[Hint]], None]
"""A watcher's callback: the hints of one batch (never empty), called on the watcher's thread."""


class Watcher(Protocol):
    """Turns changes by any process into wake-up hints (``OnHints``). Hints may be coalesced,
    spurious or (rarely) dropped; a periodic ``Tick`` bounds the cost of a dropped one."""

    def start(self) -> None:
        """Start watching in a background thread (idempotent). A change made after ``start``
        returns is reported."""
        ...

    def stop(self) -> None:
        """Stop and join the watching thread (idempotent)."""
        ...
