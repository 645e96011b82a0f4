"""The in-memory ``EventStore``: the reference implementation the conformance suite pins down.

Appends are serialised by one lock per store; ``decide`` and ``on_commit`` run under it. Nothing
survives the process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

from mailboxes.events import Event
from mailboxes.journal.base import Appended, check_after, stamp
from mailboxes.ports import Clock, Decide
from teamctl_base.clock import SystemClock


class MemoryEventStore:
    """An ``EventStore`` held in a list (tests, scratch replays)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._by_op_id: dict[str, Event] = {}
        self._closed = False

    def append(
        self,
        decide: Decide,
        *,
        after: int,
        on_commit: Callable[[Sequence[Event]], None] | None = None,
        while_queued: Callable[[], None] | None = None,  # never queued that way: not called
    ) -> Appended:
        """Serialised: catch up from ``after``, decide, store, run ``on_commit``."""
        with self._lock:
            self._check_open()
            check_after(after, len(self._events))
            seen = tuple(self._events[after:])
            drafts = decide(seen)
            new, result = stamp(
                drafts,
                next_seq=len(self._events) + 1,
                ts=self._clock.now(),
                lookup=self._by_op_id.get,
            )
            self._events.extend(new)
            for event in new:
                if event.op_id is not None:
                    self._by_op_id[event.op_id] = event
            if on_commit is not None:
                on_commit(seen + tuple(new))
            return Appended(seen=seen, appended=tuple(result))

    def read_from(self, seq: int) -> Iterator[Event]:
        """Events with ``seq >= seq`` as of this call."""
        with self._lock:
            self._check_open()
            snapshot = self._events[max(seq, 1) - 1 :]
        return iter(snapshot)

    def last_seq(self) -> int:
        with self._lock:
            return len(self._events)

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("event store is closed")
