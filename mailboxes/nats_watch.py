"""Wake-up hints from NATS subscriptions (docs/SCALE-OUT.md, "Wake-ups").

The JetStream ``Watcher`` of ``mailboxes.ports``: plain (core) subscriptions on the team's
subjects, so a change made by any process on any host connected to the cluster wakes this one
within a network round trip.

- ``teamctl.<team>.journal`` (every journal commit, mailboxes/journal/nats.py) → ``JournalAdvanced``;
- ``teamctl.<team>.mail.<agent>.<id>`` (every delivery, mailboxes/nats_mailbox.py) and
  ``teamctl.<team>.acked.<agent>`` (announced after every ack) → ``InboxChanged(agent)``;
- a ``Tick`` at least every ``rescan_s``: a core message is not stored, so one sent while this
  watcher was disconnected is lost and the tick bounds what that costs.

Hints reach ``on_hints`` in batches on the watcher's own thread (never on the client's loop),
coalesced while a callback runs.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mailboxes.journal.nats import subject_name as journal_subject
from mailboxes.nats_loop import NatsLoop, check_team
from mailboxes.nats_mailbox import acked_subject, agent_of, mail_subject
from mailboxes.ports import Hint, InboxChanged, JournalAdvanced, OnHints, Tick

if TYPE_CHECKING:
    from nats.aio.msg import Msg

__all__ = ["NatsWatcher"]

log = logging.getLogger(__name__)

_STOP = object()


class NatsWatcher:
    """Hints for team ``team`` at ``servers``: the journal's, and with ``inboxes`` the
    mailboxes'."""

    def __init__(
        self,
        servers: str | Sequence[str],
        team: str,
        on_hints: OnHints,
        *,
        rescan_s: float = 2.0,
        journal: bool = True,
        inboxes: bool = True,
        timeout: float = 5.0,
    ) -> None:
        self.team = check_team(team)
        self._servers = servers
        self._on_hints = on_hints
        self._rescan_s = rescan_s
        self._journal = journal
        self._inboxes = inboxes
        self._timeout = timeout
        self._queue: queue.SimpleQueue[Hint | object] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._io: NatsLoop | None = None

    def start(self) -> None:
        """Subscribe (the server has the subscriptions when this returns) and start the
        thread; idempotent. An unreachable server raises ``MailboxUnavailable``."""
        from nats.errors import Error as NatsError

        from mailboxes.errors import MailboxUnavailable

        with self._lock:
            if self._thread is not None:
                return
            io = NatsLoop(f"nats-watch-{self.team}", timeout=self._timeout)
            try:
                io.run(self._subscribe(io), timeout=4 * self._timeout)
            except (NatsError, TimeoutError, OSError) as exc:
                io.close()
                raise MailboxUnavailable(
                    f"watching team {self.team} on {self._servers}: {str(exc) or type(exc).__name__}"
                ) from exc
            self._io = io
            self._thread = threading.Thread(target=self._run, name="teamctl-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Unsubscribe, close the connection and join the thread (idempotent). Called from a
        callback, it stops the thread without joining it."""
        with self._lock:
            thread, self._thread = self._thread, None
            io, self._io = self._io, None
        if thread is None:
            return
        self._queue.put(_STOP)
        if io is not None:
            io.close()
        if thread is not threading.current_thread():
            thread.join()

    def __enter__(self) -> NatsWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _subscribe(self, io: NatsLoop) -> None:
        nc = await io.open(self._servers, name=f"teamctl-watch-{self.team}")
        if self._journal:
            await nc.subscribe(journal_subject(self.team), cb=self._on_journal)
        if self._inboxes:
            await nc.subscribe(mail_subject(self.team), cb=self._on_mail)
            await nc.subscribe(acked_subject(self.team), cb=self._on_mail)
        await nc.flush(timeout=max(1, round(self._timeout)))

    async def _on_journal(self, msg: Msg) -> None:
        self._queue.put(JournalAdvanced())

    async def _on_mail(self, msg: Msg) -> None:
        # teamctl.<team>.mail.<agent>.<id> or teamctl.<team>.acked.<agent>
        parts = msg.subject.split(".")
        agent = agent_of(parts[3]) if len(parts) > 3 else None
        if agent is not None:
            self._queue.put(InboxChanged(agent))

    def _run(self) -> None:
        next_tick = time.monotonic() + self._rescan_s
        while True:
            hints: set[Hint] = set()
            try:
                item = self._queue.get(timeout=max(0.0, next_tick - time.monotonic()))
            except queue.Empty:
                item = Tick()
            while True:  # coalesce whatever else is queued
                if item is _STOP:
                    return
                if isinstance(item, JournalAdvanced | InboxChanged | Tick):
                    hints.add(item)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if time.monotonic() >= next_tick:
                hints.add(Tick())
            if Tick() in hints:
                next_tick = time.monotonic() + self._rescan_s
            if self._thread is None:
                return
            try:
                self._on_hints(frozenset(hints))
            except Exception:
                log.exception("watcher callback failed on %d hints", len(hints))
