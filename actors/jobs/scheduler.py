"""The cron Scheduler actor and the journal commands it shares with the CLI
(docs/ARCHITECTURE.md, "Jobs and cron").

Firing a slot is two steps: journal ``cron.fired`` with op_id ``cron:<id>:<slot>`` (idempotent
per job and slot, decided under the journal lock against caught-up state), THEN deliver a
``cron_fired`` message to the owner's mailbox with an id derived from ``(cron_id, slot)``. A crash
between the two is repaired on start: the last firing of every job fired within
``redeliver_window_s`` is delivered again under the same id, and the Maildir drops duplicates by
id, so delivery is at-least-once and processing once (the ack is the owner's model call).

No sleep-poll: the actor arms one timer for the earliest due slot (capped at ``max_wake_s`` so
jobs added by another process are noticed; the runtime may also send ``FireDue`` on journal
change hints) and re-arms it after every message. Tests pass a fake clock and a fake timer and
send ``FireDue`` themselves.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import tzinfo
from pathlib import Path
from typing import Any, Protocol

import pykka

from actors.jobs.cron import (
    EMPTY_TABLE,
    CronEntry,
    CronError,
    CronTable,
    CronView,
    Firing,
    due,
    fired_draft,
    fold_crons,
    local_zone,
    next_wake,
    parse_cron,
    slot_time,
    views,
    zone,
)
from actors.messages import CancelCron, FireDue, ListCrons, ScheduleCron
from mailboxes.errors import UnknownRecipient
from mailboxes.events import CronCancelled, CronFired, CronScheduled, Event, EventDraft, draft
from mailboxes.maildir import Maildir
from mailboxes.messages import MessageDraft, check_agent_name
from mailboxes.ports import Clock, EventStore, IdSource, Mailbox
from teamctl_base.crashpoints import crash_point

log = logging.getLogger(__name__)

SENDER = "scheduler"
KeyedDeliver = Callable[[str, MessageDraft, str], None]
"""``deliver(sender, draft, message_id)``: durable delivery under a caller-chosen id, so a
re-delivery is dropped as a duplicate by the receiver."""


def message_id(*parts: str) -> str:
    """A deterministic message id for the thing named by ``parts``."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32]


class MailboxDelivery:
    """``KeyedDeliver`` over a ``Mailbox``: delivered before a restart, once is enough."""

    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox

    def __call__(self, sender: str, draft: MessageDraft, message_id: str) -> None:
        self.mailbox.deliver_keyed(sender, draft, message_id)


class MaildirDelivery(MailboxDelivery):
    """``KeyedDeliver`` over the Maildir inboxes under ``root`` (tests and tools without a team)."""

    def __init__(self, root: Path, clock: Clock | None = None) -> None:
        super().__init__(Maildir(root, clock))
        self.root = Path(root)


class Timer(Protocol):
    def cancel(self) -> None: ...


TimerFactory = Callable[[float, Callable[[], None]], Timer]
"""Calls the callback once after the delay (seconds) unless cancelled first."""


def thread_timer(delay_s: float, callback: Callable[[], None]) -> Timer:
    """A daemon ``threading.Timer`` (the production ``TimerFactory``)."""
    timer = threading.Timer(delay_s, callback)
    timer.daemon = True
    timer.start()
    return timer


# --- journal commands (used by the actor and by the CLI in another process) --------------------


def read_crons(store: EventStore, table: CronTable = EMPTY_TABLE, after: int = 0) -> CronTable:
    """``table`` caught up with the store's events after ``after``."""
    return fold_crons(table, store.read_from(after + 1))


def schedule_cron(
    store: EventStore,
    ids: IdSource,
    *,
    cron: str,
    prompt: str,
    recurring: bool = True,
    tz: str | None = None,
    owner: str = "lead",
) -> str:
    """Validate and journal ``cron.scheduled`` (actor = ``owner``); returns the new cron id."""
    expr = parse_cron(cron)
    zone(tz)
    check_agent_name(owner)
    if not prompt.strip():
        raise CronError("a cron job needs a prompt")
    cron_id = f"cron_{ids.new_id()[:8]}"
    body = CronScheduled(cron_id=cron_id, cron=expr, prompt=prompt, recurring=recurring, tz=tz)

    def decide(seen: Sequence[Event]) -> list[EventDraft]:
        if any(e.type == "cron.scheduled" and e.data.get("cron_id") == cron_id for e in seen):
            raise CronError(f"cron id {cron_id} already exists; try again")
        return [draft(body.TYPE, owner, body, op_id=f"cron.scheduled:{cron_id}")]

    store.append(decide, after=0)
    return cron_id


def cancel_cron(store: EventStore, cron_id: str, *, actor: str = "cli") -> bool:
    """Journal ``cron.cancelled``; True if the job was active, False if already finished.
    Unknown id → ``CronError``."""
    outcome: list[bool] = []

    def decide(seen: Sequence[Event]) -> list[EventDraft]:
        outcome.clear()
        entry = fold_crons(EMPTY_TABLE, seen).get(cron_id)
        if entry is None:
            raise CronError(f"unknown cron job {cron_id!r}")
        outcome.append(entry.status == "active")
        if entry.status != "active":
            return []
        body = CronCancelled(cron_id=cron_id)
        return [draft(body.TYPE, actor, body)]

    store.append(decide, after=0)
    return outcome[0]


# --- the actor ---------------------------------------------------------------------------------


class Scheduler(pykka.ThreadingActor):
    """Fires cron jobs from the journal's cron table. Replies: see ``actors.messages``."""

    def __init__(
        self,
        store: EventStore,
        deliver: KeyedDeliver,
        *,
        clock: Clock,
        ids: IdSource,
        timer: TimerFactory = thread_timer,
        local_tz: tzinfo | None = None,
        redeliver_window_s: float = 86_400.0,
        max_wake_s: float = 30.0,
    ) -> None:
        super().__init__()
        self._store = store
        self._deliver = deliver
        self._clock = clock
        self._ids = ids
        self._timer_factory = timer
        self._local = local_tz or local_zone()
        self._redeliver_window_s = redeliver_window_s
        self._max_wake_s = max_wake_s
        self._table: CronTable = EMPTY_TABLE
        self._seq = 0
        self._timer: Timer | None = None
        self._undelivered: dict[tuple[str, str], int] = {}

    # --- hooks ---------------------------------------------------------------------------------

    def on_start(self) -> None:
        self._catch_up()
        self._redeliver_recent()
        self._fire_due()
        self._arm()

    def on_stop(self) -> None:
        self._disarm()

    def on_failure(self, *_: object) -> None:
        self._disarm()

    def on_receive(self, message: Any) -> Any:
        try:
            match message:
                case ScheduleCron():
                    return self._schedule(message)
                case CancelCron(cron_id=cron_id):
                    self._catch_up()
                    return cancel_cron(self._store, cron_id, actor=SENDER)
                case ListCrons(include_done=include_done):
                    self._catch_up()
                    return views(self._table, include_done=include_done, local=self._local)
                case FireDue():
                    return self._fire_due()
                case _:
                    raise TypeError(f"Scheduler cannot handle {message!r}")
        finally:
            self._arm()

    # --- commands ------------------------------------------------------------------------------

    def _schedule(self, msg: ScheduleCron) -> str:
        return schedule_cron(
            self._store,
            self._ids,
            cron=msg.cron,
            prompt=msg.prompt,
            recurring=msg.recurring,
            tz=msg.tz,
            owner=msg.owner,
        )

    def _fire_due(self) -> tuple[tuple[str, str], ...]:
        """Fire what is due; a journal or delivery failure is logged and retried next wake."""
        try:
            self._catch_up()
            self._retry_undelivered()
            now = self._clock.now()
            fired = []
            for entry in list(self._table.values()):
                firing = due(entry, now, self._local)
                if firing is not None and self._journal(firing):
                    crash_point("cron.before_delivery")
                    self._send(self._table[firing.cron_id], firing.missed, firing.slot)
                    fired.append((firing.cron_id, firing.slot))
            return tuple(fired)
        except Exception:
            log.exception("scheduler: firing due cron jobs failed; retrying at the next wake")
            return ()

    def _journal(self, firing: Firing) -> bool:
        """Journal the firing unless it is no longer due (cancelled, or fired by someone else);
        True if this call appended it."""
        table = self._table

        def decide(seen: Sequence[Event]) -> list[EventDraft]:
            entry = fold_crons(table, seen).get(firing.cron_id)
            if entry is None or entry.status != "active":
                return []
            if entry.last_slot is not None and slot_time(entry.last_slot) >= slot_time(firing.slot):
                return []
            body = CronFired(cron_id=firing.cron_id, slot=firing.slot, missed=firing.missed)
            return [draft(body.TYPE, SENDER, body, op_id=f"cron:{firing.cron_id}:{firing.slot}")]

        result = self._store.append(decide, after=self._seq)
        self._absorb([*result.seen, *result.appended])
        # decide only drafts a slot later than the last fired one, so a stored duplicate op_id
        # cannot come back here: anything appended is this call's new firing.
        return bool(result.appended)

    def _send(self, entry: CronEntry, missed: int, slot: str) -> None:
        key = (entry.cron_id, slot)
        try:
            self._deliver(SENDER, fired_draft(entry, missed, slot), message_id(*key))
        except UnknownRecipient:
            log.warning("cron job %s: owner %r has no inbox; dropped", entry.cron_id, entry.owner)
            self._undelivered.pop(key, None)
        except Exception:
            log.exception("cron job %s: delivery of %s failed; will retry", entry.cron_id, slot)
            self._undelivered[key] = missed
        else:
            self._undelivered.pop(key, None)

    def _retry_undelivered(self) -> None:
        for (cron_id, slot), missed in list(self._undelivered.items()):
            self._send(self._table[cron_id], missed, slot)

    def _redeliver_recent(self) -> None:
        """At-least-once after a crash: deliver again (same id) each job's last firing."""
        horizon = self._clock.now() - self._redeliver_window_s
        for entry in self._table.values():
            if entry.last_slot is not None and (entry.last_fired_at or 0.0) >= horizon:
                self._send(entry, entry.last_missed, entry.last_slot)

    # --- state and timer -----------------------------------------------------------------------

    def _catch_up(self) -> None:
        self._absorb(self._store.read_from(self._seq + 1))

    def _absorb(self, events: Iterable[Event]) -> None:
        fresh = sorted((e for e in events if e.seq > self._seq), key=lambda e: e.seq)
        if fresh:
            self._table = fold_crons(self._table, fresh)
            self._seq = fresh[-1].seq

    def _arm(self) -> None:
        self._disarm()
        try:
            wait = next_wake(self._table, self._clock.now(), self._local)
        except Exception:
            log.exception("scheduler: cannot compute the next wake")
            wait = None
        delay = self._max_wake_s if wait is None else min(wait, self._max_wake_s)
        ref = self.actor_ref

        def wake() -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(FireDue())

        self._timer = self._timer_factory(delay, wake)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class SchedulerHandle:
    """Typed calls to a running ``Scheduler`` (each waits for the reply)."""

    def __init__(self, ref: pykka.ActorRef[Scheduler], *, timeout_s: float = 30.0) -> None:
        self.ref = ref
        self.timeout_s = timeout_s

    @classmethod
    def start(cls, store: EventStore, deliver: KeyedDeliver, **kwargs: Any) -> SchedulerHandle:
        """Start a ``Scheduler`` actor (keyword arguments as for ``Scheduler``); returns once
        its start-up recovery (re-delivery, missed slots) is done."""
        handle = cls(Scheduler.start(store, deliver, **kwargs))
        handle.list()  # answered after on_start
        return handle

    def schedule(
        self,
        cron: str,
        prompt: str,
        *,
        recurring: bool = True,
        tz: str | None = None,
        owner: str = "lead",
    ) -> str:
        msg = ScheduleCron(cron=cron, prompt=prompt, recurring=recurring, tz=tz, owner=owner)
        return str(self._ask(msg))

    def cancel(self, cron_id: str) -> bool:
        return bool(self._ask(CancelCron(cron_id=cron_id)))

    def list(self, *, include_done: bool = False) -> tuple[CronView, ...]:
        return tuple(self._ask(ListCrons(include_done=include_done)))

    def fire_due(self) -> tuple[tuple[str, str], ...]:
        return tuple(self._ask(FireDue()))

    def _ask(self, message: object) -> Any:
        return self.ref.ask(message, timeout=self.timeout_s)

    def stop(self) -> None:
        with contextlib.suppress(pykka.ActorDeadError):
            self.ref.stop(timeout=self.timeout_s)
