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

A write that nobody waits for (a model call's usage record, ``actors.runtime.usage``) is
``defer``-red: queued without waiting, it goes out with the next write of any thread (typically
its agent's own next one: the completion or status change its turn ends with), or is committed by
the process's timer thread ``DEFER_S`` later if no write came first; ``settle`` (before the
agent's next model call) and ``flush`` (when the runtime stops) wait until it is durable.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actors.board.rules import Completion, claimable, fence, first_claimable
from actors.errors import NotOwner, TeamError
from actors.runtime.commit_service import AnswerLost, CommitClient, ServiceUnavailable
from actors.runtime.commit_wire import (
    Spec,
    claim_spec,
    complete_spec,
    decode_value,
    encode_value,
    parse,
    status_spec,
)
from mailboxes.events import MemberStatusChanged, draft

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import Task, TeamState
    from actors.runtime.process import Timer
    from mailboxes.events import Event, EventDraft, Payload

__all__ = [
    "DEFER_S",
    "Batch",
    "Decide",
    "Deferred",
    "SharedCommits",
    "claim_next",
    "complete",
    "status_change",
]

log = logging.getLogger(__name__)

DEFER_S = 0.05
"""The longest a deferred write waits for another write to carry it before the timer commits it
(what a reader of the journal, e.g. ``teamctl cost``, may lag behind a model call)."""


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
    __slots__ = ("answer", "cancel", "decide", "done", "error", "events", "spec", "state", "value")

    def __init__(
        self, decide: Decide, spec: Spec | None = None, answer: Answer | None = None
    ) -> None:
        self.decide = decide
        self.done = False
        self.error: BaseException | None = None
        self.events: tuple[Event, ...] = ()
        self.state: TeamState | None = None
        self.cancel: Callable[[], None] | None = None  # a deferred write's timer
        self.spec = spec  # a write the host's commit service can make (commit_wire)
        self.answer = answer
        self.value: Any = None  # what ``answer`` said, here or in the service


class Deferred:
    """A write queued by ``SharedCommits.defer``: ``settle`` it to wait until it is durable."""

    __slots__ = ("_write",)

    def __init__(self, write: _Write) -> None:
        self._write = write

    @property
    def done(self) -> bool:
        """Committed (or failed)."""
        return self._write.done


class SharedCommits:
    """Writes of any thread of this process to ``board``, committed together when they meet.
    ``timer`` (the process's, ``actors.runtime.process.thread_timer``) commits deferred writes
    that no other write carried within ``DEFER_S``; without one, ``defer`` commits at once."""

    def __init__(
        self, board: Board, *, timer: Timer | None = None, remote: CommitClient | None = None
    ) -> None:
        self.board = board
        self._timer = timer
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Write] = []
        self._committing = False
        self.remote = remote
        """The host's commit service, when another process serves it (``commit_service``):
        claims, completions and status changes are committed there, the rest here."""

    # -- the writes the commit service can make ------------------------------------------------

    def claim_next(
        self,
        owner: str,
        *,
        role: str | None = None,
        exclude: Collection[str] = (),
        also: Sequence[Payload] = (),
    ) -> Task | None:
        """``owner`` claims its next task (``claim_next``); the task, or None."""
        spec = self._wire(lambda: claim_spec(owner, role=role, exclude=exclude, also=also))
        decide = claim_next(owner, role=role, exclude=exclude, also=also)
        result: Task | None = self._ask(decide, _claimed(owner, adopt=False), spec)
        return result

    def complete(
        self,
        tid: str,
        owner: str,
        epoch: int,
        summary: str,
        *,
        commit: str | None = None,
        remote: str | None = None,
    ) -> Completion:
        """``owner`` completes ``tid`` (``complete``)."""
        spec = self._wire(
            lambda: complete_spec(tid, owner, epoch, summary, commit=commit, remote=remote)
        )
        decide = complete(tid, owner, epoch, summary, commit=commit, remote=remote)
        result: Completion = self._ask(decide, _completed(tid, owner, epoch), spec)
        return result

    def set_status(self, name: str, status: str, reason: str = "") -> bool:
        """``name``'s status becomes ``status`` (``status_change``); True when journaled."""
        spec = self._wire(lambda: status_spec(name, status, reason))
        decide = status_change(name, status, reason)
        return bool(self._ask(decide, _status_set(name, status, False), spec))

    def _wire(self, make: Callable[[], Spec]) -> Spec | None:
        """The write's spec when there is a service to send it to (``remote``), else None: a
        write without one is committed here, and made without the JSON round trip."""
        return make() if self.remote is not None else None

    def _ask(self, decide: Decide, answer: Answer, spec: Spec | None) -> Any:
        mine = _Write(decide, spec, answer)
        with self._cond:
            self._queue.append(mine)
        self._until_done(mine)
        if mine.error is not None:
            raise mine.error
        return mine.value

    def serve(self, specs: Sequence[Spec]) -> dict[str, Any]:
        """Commit the writes ``specs`` name (sent by other processes), with any of this process
        that wait, in one commit; the service's answer (``commit_service``)."""
        writes: list[_Write | None] = []  # None: a spec that names no write
        answers: list[Any] = []
        for spec in specs:
            try:
                writes.append(_wired_write(spec))
                answers.append(None)
            except TeamError as exc:
                writes.append(None)
                answers.append({"error": str(exc)})
        queued = [w for w in writes if w is not None]
        with self._cond:
            self._queue += queued
        for done in queued:
            self._until_done(done)
        seq = 0
        for i, (write, spec) in enumerate(zip(writes, specs, strict=True)):
            if write is None:
                continue
            if write.error is not None:
                # Refused, or its commit failed (then nothing of it was written): the client
                # decides it again itself, and raises what it raises there.
                answers[i] = {"error": str(write.error) or type(write.error).__name__}
            else:
                answers[i] = {"ok": encode_value(spec, write.value)}
                if write.state is not None:
                    seq = max(seq, write.state.seq)
        return {"seq": seq, "answers": answers}

    def write(self, decide: Decide) -> tuple[TeamState, tuple[Event, ...]]:
        """Commit ``decide``'s drafts, maybe in one commit with other threads' writes; returns the
        state after that commit and this write's own events (none when it decided nothing)."""
        mine = _Write(decide)
        with self._cond:
            self._queue.append(mine)
        self._until_done(mine)
        if mine.error is not None:
            raise mine.error
        assert mine.state is not None
        return mine.state, mine.events

    def defer(self, decide: Decide) -> Deferred:
        """Queue ``decide`` without waiting for it: it is committed with the next write of any
        thread, by ``settle``/``flush``, or ``DEFER_S`` from now, whichever comes first. Not
        durable until then: a crash before loses it (the caller says what that costs)."""
        mine = _Write(decide)
        with self._cond:
            self._queue.append(mine)
        if self._timer is None:
            self._until_done(mine)
            return Deferred(mine)

        def due() -> None:
            try:
                self._until_done(mine)
            except Exception:  # a timer thread must not die; the next settle raises
                log.exception("a deferred journal write failed")
            if mine.error is not None:
                log.warning("a deferred journal write failed: %s", mine.error)

        cancel = self._timer(DEFER_S, due)
        with self._cond:
            if mine.done:
                cancel()
            else:
                mine.cancel = cancel
        return Deferred(mine)

    def settle(self, deferred: Deferred) -> None:
        """Wait until ``deferred`` is durable (committing it now if nobody is); raises what its
        write or its commit raised."""
        write = deferred._write
        self._until_done(write)
        if write.error is not None:
            raise write.error

    def flush(self) -> None:
        """Commit every write queued so far (deferred ones included) and wait for it."""
        with self._cond:
            last = self._queue[-1] if self._queue else None
        if last is not None:
            self._until_done(last)

    def _until_done(self, mine: _Write) -> None:
        """Return once ``mine`` is committed: by the thread committing now (wait for it), or by
        this one, committing everything queued when nobody else is."""
        with self._cond:
            while self._committing and not mine.done:
                self._cond.wait()
            batch: list[_Write] = []
            if not mine.done:  # nobody commits: this thread commits everything queued
                self._committing = True
                batch, self._queue = self._queue, []
        if not batch:
            return
        try:
            self._commit(batch)
        finally:
            with self._cond:
                for write in batch:
                    write.done = True
                    if write.cancel is not None:
                        write.cancel()
                        write.cancel = None
                self._committing = False
                self._cond.notify_all()

    def _commit(self, batch: list[_Write]) -> None:
        remote = self.remote
        if remote is not None and any(w.spec is not None for w in batch):
            here = [w for w in batch if w.spec is None]
            if here:
                self._commit_here(here)
            self._commit_remote(remote, [w for w in batch if w.spec is not None])
        else:
            self._commit_here(batch)

    def _commit_remote(self, remote: CommitClient, batch: list[_Write]) -> None:
        """Send ``batch`` to the service; what it cannot make is committed here."""
        try:
            reply = remote.call([w.spec for w in batch if w.spec is not None])
        except ServiceUnavailable:
            self._commit_here(batch)
            return
        except AnswerLost as exc:
            self._recover_here(batch, f"{exc}; deciding its writes again here")
            return
        answers = reply.get("answers")
        if not isinstance(answers, list) or len(answers) != len(batch):
            self._recover_here(batch, "the commit service answered out of turn; deciding here")
            return
        again: list[_Write] = []
        for write, answer in zip(batch, answers, strict=True):
            assert write.spec is not None
            try:
                write.value = decode_value(write.spec, answer["ok"])
            except (KeyError, TypeError, ValueError):
                again.append(write)  # refused there: here it raises the same error
        seq = reply.get("seq")
        if type(seq) is int:
            self.board.committed_elsewhere(seq)
        if again:
            self._commit_here(again)

    def _recover_here(self, batch: list[_Write], why: str) -> None:
        """Commit ``batch`` here, each write decided in recovery (``wired``): the service may
        or may not have made it."""
        log.warning("%s", why)
        for write in batch:
            assert write.spec is not None
            write.decide, write.answer = wired(write.spec, recover=True)
        self._commit_here(batch)

    def _commit_here(self, batch: list[_Write]) -> None:
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
                if write.answer is not None:
                    write.value = write.answer(self.board, state, write.events)


def _wired_write(spec: Spec) -> _Write:
    """The write ``spec`` names, as queued here (``TeamError`` if it names none)."""
    decide, answer = wired(spec)
    return _Write(decide, spec, answer)


Answer = Callable[["Board", "TeamState", "tuple[Event, ...]"], Any]
"""What a committed write answers, from the board, the state after its commit and its events."""


def wired(spec: Spec, *, recover: bool = False) -> tuple[Decide, Answer]:
    """The write ``spec`` names (``commit_wire.parse``; ``TeamError`` if bad): what it decides
    and what it answers. ``recover``: decided again after a request whose answer was lost (the
    service went away): the write then recognises its own earlier commit, if there was one, by
    the fencing it has anyway (the task its owner now holds: a member holds at most one, and only
    its hosting process claims for it; a completion by its owner at its epoch; a status already
    set), so nothing is done twice and no operation id has to be journaled for it."""
    op, args = parse(spec)
    if op == "claim_next":
        owner = args["owner"]
        return claim_next(**args), _claimed(owner, adopt=recover)
    if op == "complete":
        tid, owner, epoch = args["tid"], args["owner"], args["epoch"]
        return complete(**args, again=recover), _completed(tid, owner, epoch)
    return status_change(**args), _status_set(args["name"], args["status"], recover)


def _claimed(owner: str, *, adopt: bool) -> Answer:
    def answer(_board: Board, state: TeamState, events: tuple[Event, ...]) -> Task | None:
        if events:
            return state.task(str(events[0].data["task_id"]))
        return state.holding(owner) if adopt else None

    return answer


def _completed(tid: str, owner: str, epoch: int) -> Answer:
    def answer(board: Board, state: TeamState, events: tuple[Event, ...]) -> Completion:
        task = state.task(tid)
        if events:
            return Completion(task, tuple(events[0].data["unblocked"]))
        # Completed by this very write before its answer was lost: its event is the task's last.
        stored = next(iter(board.store.read_from(task.seq)), None)
        ours = (
            stored is not None
            and stored.type == "task.completed"
            and stored.data.get("task_id") == tid
            and stored.data.get("owner") == owner
            and stored.data.get("epoch") == epoch
        )
        unblocked = tuple(stored.data.get("unblocked", ())) if ours and stored else ()
        return Completion(task, unblocked)

    return answer


def _status_set(name: str, status: str, recover: bool) -> Answer:
    def answer(_board: Board, state: TeamState, events: tuple[Event, ...]) -> bool:
        if events:
            return True
        member = state.members.get(name)
        # After a lost answer, a status that is set may have been set by this write: say so
        # (the caller then tells the lead once more, which costs nothing).
        return recover and member is not None and member.status == status

    return answer


def claim_next(
    owner: str,
    *,
    role: str | None = None,
    accept: Callable[[Task], bool] | None = None,
    exclude: Collection[str] = (),
    also: Sequence[Payload] = (),
) -> Decide:
    """``Board.claim_next`` as a write: the lowest-id ready task ``owner`` may take (no role or
    ``role``, not in ``exclude``, not a workflow step still waiting for its worktree, and
    ``accept`` agrees) that no earlier write of the commit claimed; nothing when ``owner``
    already holds one. ``also``: ``owner``'s events appended after the claim, only if it is
    made."""
    from mailboxes.payloads import TaskClaimed

    def allowed(task: Task) -> bool:
        return task.id not in exclude and claimable(task) and (accept is None or accept(task))

    def decide(state: TeamState, batch: Batch) -> list[EventDraft]:
        if owner in batch.holders or state.holding(owner) is not None:
            return []
        task = first_claimable(state, role, allowed, batch.claimed)
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
    again: bool = False,
) -> Decide:
    """``Board.complete`` as a write (journaled by ``owner``): fenced by ``owner`` and ``epoch``
    (an earlier write of the commit that completed ``tid`` ends the claim: ``NotOwner``); the
    event's ``unblocked`` counts the tasks the commit's earlier writes completed as completed,
    as if each write were its own commit in the same order (a task blocked by two tasks
    completed in one commit is unblocked by the later one). ``again``: decided again after a
    lost answer, so a task already completed by ``owner`` at ``epoch`` is this write's own
    completion: nothing more is written."""
    from mailboxes.payloads import TaskCompleted

    def decide(state: TeamState, batch: Batch) -> list[EventDraft]:
        if tid in batch.completed:
            raise NotOwner(tid, owner, None)
        if again:
            task = state.tasks.get(tid)
            if (
                task is not None
                and task.status == "completed"
                and (task.owner, task.epoch) == (owner, epoch)
            ):
                return []
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
