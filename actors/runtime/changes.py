"""What the runtime does when the team changes: its one ``Watcher`` and the routing of its hints.

The watcher (``Team.watch``) covers every inbox and the journal, whoever wrote them (this
process, ``teamctl send`` or another runtime's members), and reports typed hints, never paths
(docs/ARCHITECTURE.md, "Backends and seams"). ``InboxChanged(agent)`` wakes that agent's actor;
the periodic ``Tick`` wakes only who has unread mail. ``JournalAdvanced`` (and every tick) is
followed: a forced stop request (``teamctl stop --force``) stops the member it names, each new
event goes out as a ``team_event``, permission waits see their decisions, claims of dead owners
are reaped, and the teammates hear that the board changed.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import pykka

from actors.board.rules import first_claimable
from actors.messages import BoardChanged
from actors.runtime.stop import FORCE_PREFIX
from mailboxes.ports import Hint, InboxChanged, JournalAdvanced, Tick

if TYPE_CHECKING:
    from actors.board.state import TeamState
    from actors.factory import Team
    from actors.runtime.hosting import MemberHosting
    from actors.runtime.permission_requests import JournalDecisions
    from actors.runtime.process import EventSink
    from actors.runtime.roster import Roster
    from mailboxes.events import Event
    from mailboxes.ports import Watcher

log = logging.getLogger(__name__)

__all__ = ["Changes"]


class Changes:
    """Routes the watcher's hints to the hosted members (one watcher thread calls in)."""

    def __init__(
        self,
        team: Team,
        members: MemberHosting,
        roster: Roster,
        *,
        events: EventSink,
        decisions: JournalDecisions,
        rescan_s: float,
    ) -> None:
        self._team = team
        self._members = members
        self._roster = roster
        self._events = events
        self._decisions = decisions
        self._rescan_s = rescan_s
        self._seen_seq = 0
        self._emitted_seq = 0
        self._nudged: set[tuple[str, str]] = set()
        self._watcher: Watcher | None = None

    def start(self, seen_seq: int) -> None:
        """Watch the inboxes and the journal; journal events up to ``seen_seq`` are known."""
        self._seen_seq = self._emitted_seq = seen_seq
        self._watcher = self._team.watch(self._on_hints, self._rescan_s)
        self._watcher.start()

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._emit_unseen()

    def _emit_unseen(self) -> None:
        """The journal events appended since the last change seen still go out as
        ``team_event``s (a run ending at once must not lose its last events)."""
        if not self._events.wanted:
            return
        try:
            for event in self._team.journal.read_from(max(self._seen_seq, self._emitted_seq) + 1):
                self._emit(event)
                self._seen_seq = self._emitted_seq = event.seq
        except Exception:  # the stream is best effort; the journal has them all
            return

    def _emit(self, event: Event) -> None:
        self._events.emit(
            {
                "type": "team_event",
                "seq": event.seq,
                "event": event.type,
                "actor": event.actor,
                "data": event.data,
            }
        )

    def _on_hints(self, hints: frozenset[Hint]) -> None:
        members, roster, mailbox = self._members, self._roster, self._team.mailbox
        if roster.stopping:
            return
        tick = Tick() in hints
        for hint in hints:
            if isinstance(hint, InboxChanged):
                members.wake(hint.agent)
        if tick:  # the safety net: wake only who has unread mail (cheap: no parsing)
            for name in roster.names():
                if mailbox.has_unread(name):
                    members.wake(name, "tick")
        if tick or JournalAdvanced() in hints:
            self._on_journal(tick=tick)
        roster.notify()

    def _on_journal(self, *, tick: bool = False) -> None:
        board = self._team.board
        state = board.refresh()
        changed = state.seq != self._seen_seq or not self._seen_seq
        if not changed and not tick:
            return
        for event in self._team.journal.read_from(self._seen_seq + 1):
            rid = str(event.data.get("request_id", ""))
            if event.type == "shutdown.requested" and rid.startswith(FORCE_PREFIX):
                self._members.member_done(str(event.data.get("name")), "forced")
            if self._events.wanted and event.seq > self._emitted_seq:
                # The read may go past the refreshed state (others appended meanwhile): the
                # next read starts at the state's seq again, and must not emit these twice.
                self._emit(event)
                self._emitted_seq = event.seq
        self._seen_seq = state.seq
        if changed:
            self._decisions.scan()
        liveness = self._team.liveness  # a process hosting a member may have died (SIGKILL)
        hosts = self._members.hosts  # ours are alive: this process holds their leases
        # A paused member's claim waits for `resume` and is never reaped, so it must not keep the
        # other members from hearing about the change.
        if (
            any(
                not state.tasks[tid].human and not hosts(owner) and not liveness.is_alive(owner)
                for owner, tid in state.holdings.items()
            )
            and board.reap_dead_owners()
        ):
            return  # a journal change: the watcher comes back with it
        if changed:
            self._members.board_changed()
        elif tick:
            self._nudge_quiet_teammates(state)

    def _nudge_quiet_teammates(self, state: TeamState) -> None:
        """The rescan tick's safety net for a lost wake: a teammate with nothing to do beside a
        ready task it may take is told the board changed, as the change itself would have told
        it (it then claims on the journal as usual). Costs nothing while every teammate works or
        nothing is ready; otherwise one search per quiet teammate, from the first pending task."""
        for name, role, ref, abandoned in self._roster.quiet_teammates():
            if state.holding(name) is not None:
                continue
            task = first_claimable(state, role, taken=abandoned)
            if task is not None:
                if (name, task.id) not in self._nudged:  # once each: it may decline the task
                    self._nudged.add((name, task.id))
                    log.info("teammate %s was idle beside ready task %s: told again", name, task.id)
                with contextlib.suppress(pykka.ActorDeadError):
                    ref.tell(BoardChanged())
