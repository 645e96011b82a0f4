"""``SharedCommits``: the runtime's own journal writes, from many threads, sharing commits
(docs/ARCHITECTURE.md, "The runtime's parts"; docs/RELIABILITY.md, "What is guaranteed").

The board makes one append at a time, and each waits for its own ``fdatasync`` under the board's
lock. When teammates finish together (their usage records, their status changes) or a batch of
tasks lands while several are idle (their claims), their writes queue behind each other for
that lock, one ``fdatasync`` each; so do their completions (``complete``, asked by the
``complete_task`` tool through ``TeamServices.complete_task``). Here, a write asked for while
another thread's is being committed waits, and the next thread to go commits every write queued
by then in ONE ``Board.execute``: one journal lock, one ``fdatasync``, one projection sync.
Nothing else changes: each write is decided under the journal lock against the caught-up state,
with what the writes before it in the same commit decided (``Batch``: two claims of one commit
never take the same task), and it returns only once that commit is durable, so acknowledged
still means fsynced. A write whose decision raises fails alone; a commit that fails fails every
write in it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actors.board.rules import fence, first_claimable
from actors.errors import NotOwner
from mailboxes.events import MemberStatusChanged, draft

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import Task, TeamState
    from mailboxes.events import Event, EventDraft, Payload

__all__ = ["Batch", "Decide", "SharedCommits", "claim_next", "complete", "status_change"]


@dataclass
class Batch:
    """What the writes before this one in the same commit decided."""

    claimed: set[str] = field(default_factory=set)
    """Tasks claimed."""
    holders: set[str] = field(default_factory=set)
    """Members that claimed a task."""
    statuses: dict[str, str] = field(default_factory=dict)
    """Member statuses set."""
    completed: set[str] = field(default_factory=set)
    """Tasks completed."""


Decide = Callable[["TeamState", Batch], Sequence["EventDraft"]]
"""A write: its drafts, decided against the caught-up state and the ``Batch`` so far (pure: a
backend may ask again, with a newer state and a fresh batch)."""


class _Write:
    __slots__ = ("decide", "done", "error", "events", "state")

    def __init__(self, decide: Decide) -> None:
        self.decide = decide
        self.done = False
        self.error: BaseException | None = None
        self.events: tuple[Event, ...] = ()
        self.state: TeamState | None = None


class SharedCommits:
    """Writes of any thread of this process to ``board``, committed together when they meet."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Write] = []
        self._committing = False

    def write(self, decide: Decide) -> tuple[TeamState, tuple[Event, ...]]:
        """Commit ``decide``'s drafts, maybe in one commit with other threads' writes; returns the
        state after that commit and this write's own events (none when it decided nothing)."""
        mine = _Write(decide)
        with self._cond:
            self._queue.append(mine)
            while self._committing and not mine.done:
                self._cond.wait()
            batch: list[_Write] = []
            if not mine.done:  # nobody commits: this thread commits everything queued
                self._committing = True
                batch, self._queue = self._queue, []
        if batch:
            try:
                self._commit(batch)
            finally:
                with self._cond:
                    for write in batch:
                        write.done = True
                    self._committing = False
                    self._cond.notify_all()
        if mine.error is not None:
            raise mine.error
        assert mine.state is not None
        return mine.state, mine.events

    def _commit(self, batch: list[_Write]) -> None:
        spans: list[tuple[int, int]] = []

        def decision(state: TeamState) -> list[EventDraft]:
            spans.clear()
            drafts: list[EventDraft] = []
            decided = Batch()
            for write in batch:
                write.error = None
                try:
                    own = list(write.decide(state, decided))
                except Exception as exc:  # that write fails alone
                    write.error, own = exc, []
                spans.append((len(drafts), len(own)))
                drafts += own
            return drafts

        try:
            state, appended = self.board.execute(decision)
        except BaseException as exc:
            for write in batch:
                write.error = exc
            return
        for write, (start, count) in zip(batch, spans, strict=True):
            write.state = state
            if write.error is None:
                write.events = tuple(appended[start : start + count])


def claim_next(
    owner: str,
    *,
    role: str | None = None,
    accept: Callable[[Task], bool] | None = None,
    also: Sequence[Payload] = (),
) -> Decide:
    """``Board.claim_next`` as a write: the lowest-id ready task ``owner`` may take (no role or
    ``role``, and ``accept`` agrees) that no earlier write of the commit claimed; nothing when
    ``owner`` already holds one. ``also``: ``owner``'s events appended after the claim, only if
    it is made."""
    from mailboxes.payloads import TaskClaimed

    def decide(state: TeamState, batch: Batch) -> list[EventDraft]:
        if owner in batch.holders or state.holding(owner) is not None:
            return []
        task = first_claimable(state, role, accept, batch.claimed)
        if task is None:
            return []
        batch.claimed.add(task.id)
        batch.holders.add(owner)
        claimed = TaskClaimed(task_id=task.id, owner=owner, epoch=task.epoch + 1)
        return [draft(body.TYPE, owner, body) for body in (claimed, *also)]

    return decide


def status_change(name: str, status: str, reason: str = "") -> Decide:
    """``name``'s status becomes ``status`` (journaled by ``name``), unless it already is."""

    def decide(state: TeamState, batch: Batch) -> list[EventDraft]:
        member = state.members.get(name)
        current = batch.statuses.get(name, member.status if member is not None else None)
        if current == status:
            return []
        batch.statuses[name] = status
        body = MemberStatusChanged(name=name, status=status, reason=reason)
        return [draft(body.TYPE, name, body)]

    return decide


def complete(
    tid: str,
    owner: str,
    epoch: int,
    summary: str,
    *,
    commit: str | None = None,
    remote: str | None = None,
) -> Decide:
    """``Board.complete`` as a write (journaled by ``owner``): fenced by ``owner`` and ``epoch``
    (an earlier write of the commit that completed ``tid`` ends the claim: ``NotOwner``); the
    event's ``unblocked`` counts the tasks the commit's earlier writes completed as completed,
    as if each write were its own commit in the same order (a task blocked by two tasks
    completed in one commit is unblocked by the later one)."""
    from mailboxes.payloads import TaskCompleted

    def decide(state: TeamState, batch: Batch) -> list[EventDraft]:
        if tid in batch.completed:
            raise NotOwner(tid, owner, None)
        fence(state, tid, owner, epoch)
        body = TaskCompleted(
            task_id=tid,
            owner=owner,
            epoch=epoch,
            summary=summary,
            unblocked=state.newly_ready_after(tid, batch.completed),
            commit=commit,
            remote=remote,
        )
        batch.completed.add(tid)
        return [draft(body.TYPE, owner, body)]

    return decide
