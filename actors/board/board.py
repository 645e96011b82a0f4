"""The task board: commands checked under the journal's lock against caught-up state
(docs/ARCHITECTURE.md, "The task board").

Every command goes through ``EventStore.append``: ``decide`` folds the events other threads or
processes appended since our last look, validates the command against that state, and returns the
drafts. So a claim is a compare-and-swap across processes, and fencing (owner + epoch) is checked
against the truth. The append is the acknowledgement. After it, outside the journal's lock, the
projections are synced (``Projections.sync``): a command's own projection is written before it
returns unless another writer is syncing, in which case that writer writes it before releasing
the projection lock.

A refused claim is a normal answer (``ClaimResult.ok`` is False, ``reason`` says why). Commands
that cannot be carried out raise a ``TeamError`` (``UnknownTask``, ``CycleError``,
``HasDependents``, ``NotOwner``, ``StaleEpoch``, ``InvalidTransition``).

``op_id`` makes a retried command a no-op: if an event with that ``op_id`` is already in the
journal, nothing is written and the result describes the stored event.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from actors.board import snapshot
from actors.board.fold import fold_all
from actors.board.projections import Projections
from actors.board.rules import (
    ALREADY_YOURS,
    LEAD,
    MAX_SUBJECT_CHARS,
    ClaimResult,
    Completion,
    alive,
    check_new_member,
    check_subject,
    fence,
    first_claimable,
    live,
    refusal,
    unique,
)
from actors.board.state import EMPTY, Task, TeamState, task_id
from actors.errors import CycleError, DuplicateMember, HasDependents, InvalidTransition, TeamError
from mailboxes.errors import JournalCorrupt, WriteFailed
from mailboxes.events import Event, EventDraft, draft
from mailboxes.names import check_agent_name
from mailboxes.ports import BlobStore, EventStore, Liveness
from teamctl_base.crashpoints import crash_point

if TYPE_CHECKING:
    from actors.board.bulk import NewTask
    from mailboxes.payloads import MemberSpawned, Payload, TaskCreated, TaskVerified

__all__ = ["MAX_SUBJECT_CHARS", "Board", "ClaimResult", "Completion", "Decision", "check_subject"]

TaskList = list[Task]
CreatedList = list["TaskCreated"]
Lines = list[str]
Decision = Callable[[TeamState], Sequence[EventDraft]]
"""Given the caught-up state, the drafts to append (or raise a ``TeamError`` to refuse)."""


@dataclass(frozen=True, slots=True)
class _Refused:
    """A task command's normal "no": nothing is written and the answer carries ``reason``."""

    reason: str


_Step: TypeAlias = "Payload | tuple[Payload, ...] | _Refused | None"
"""What a task command decides against caught-up state: the body of its event (or bodies, in
order: the ``op_id`` goes on the first), a refusal, or None when there is nothing to write (it
is already so)."""


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What a task command did: the state after it, the event it appended (none when it wrote
    nothing: a retry, a no-op or a refusal), and the refusal reason (None if not refused)."""

    state: TeamState
    events: tuple[Event, ...]
    refused: str | None


_ACTING_AS: ContextVar[str | None] = ContextVar("teamctl_acting_as", default=None)


@contextmanager
def acting_as(agent: str) -> Iterator[None]:
    """Record the board commands issued inside the block as caused by ``agent`` (the journal's
    ``actor``), whatever the board's default actor is. One board serves every agent of a
    runtime, so the team tools say who is acting; a context variable keeps threads apart."""
    token = _ACTING_AS.set(agent)
    try:
        yield
    finally:
        _ACTING_AS.reset(token)


class Board:
    """The task board of one team, over any ``EventStore``. Thread-safe.

    Reads (``state``, ``get``, ``list``, ``ready``) answer from the state as of the last command
    or ``refresh()``; commands always decide against the journal's latest state.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        projections: Projections | None = None,
        liveness: Liveness | None = None,
        actor: str = "cli",
        snapshots: BlobStore | None = None,
        snapshot_every: int = snapshot.SNAPSHOT_EVERY,
    ) -> None:
        self._store = store
        self._projections = projections
        self._liveness = liveness
        self._actor = actor
        self._lock = threading.RLock()
        self._state = EMPTY
        self._elsewhere = 0
        self._snapshots = snapshots
        self._snapshot_every = snapshot_every
        self._snapshot_lock = threading.Lock()
        if snapshots is not None:
            # Start from the last snapshot that checks out: only the events after it are folded.
            self._state = snapshot.load(snapshots, store) or EMPTY
        self._snapshot_seq = self._state.seq
        self.refresh()
        if projections is not None:
            self.repair_projections()

    # --- reads ---------------------------------------------------------------------------------

    @property
    def state(self) -> TeamState:
        """The folded team state as of the last command or refresh (or later: a command
        committed elsewhere for this board, ``committed_elsewhere``, is folded in on first read)."""
        if self._elsewhere > self._state.seq:
            return self.refresh()
        return self._state

    def committed_elsewhere(self, seq: int) -> None:
        """A command of this board's was committed by another process (the host's commit
        service), up to ``seq``: the next read folds the journal up to there at least."""
        if seq > self._elsewhere:
            self._elsewhere = seq

    @property
    def store(self) -> EventStore:
        """The event store this board decides on (the team's journal)."""
        return self._store

    @property
    def actor(self) -> str:
        """Who this board's events are recorded as caused by."""
        return self._actor

    def refresh(self) -> TeamState:
        """Catch up with events appended by others; returns the new state."""
        with self._lock:
            state = self._state
            self._state = state = fold_all(state, self._store.read_from(state.seq + 1))
        self._maybe_snapshot(state)
        return state

    def get(self, tid: str) -> Task:
        """One task (``UnknownTask`` if absent)."""
        return self.state.task(tid)

    def list(self, *, include_deleted: bool = False) -> TaskList:
        """Every task in id order (deleted ones only when asked)."""
        return [t for t in self.state.tasks.values() if include_deleted or t.status != "deleted"]

    def ready(self, role: str | None = None, *, any_role: bool = True) -> TaskList:
        """Ready tasks in id order (see ``TeamState.ready``)."""
        return self.state.ready(role, any_role=any_role)

    # --- the one write path --------------------------------------------------------------------

    def execute(self, decision: Decision) -> tuple[TeamState, tuple[Event, ...]]:
        """Run ``decision`` under the store's lock against caught-up state and append its drafts.

        Returns the state after the append and the appended (or, for a known ``op_id``, the
        stored) events. When it returns, the projections show at least that state, unless another
        writer holds the projection lock (then it writes them before releasing it). Other
        modules use this for commands of their own (members, plans).
        """
        with self._lock:
            before = self._state.seq
            base = self._state
            caught: list[TeamState] = []
            # What others appended, read and folded while this append is queued for the journal's
            # lock (outside it, next in line while another process holds it), and the state
            # after those events: the critical section then folds only what the holder wrote.
            # (Not also before asking for the lock: with 16 processes racing for claims that
            # extra read and fold cost more CPU than it took off the critical section.)
            ahead: list[Event] = []
            folded = [base]

            def while_queued() -> None:
                try:
                    more = tuple(self._store.read_from(folded[0].seq + 1))
                    state = fold_all(folded[0], more)
                except (JournalCorrupt, OSError, TeamError):
                    return  # only a head start: the catch-up under the lock reports or repairs it
                folded[0] = state
                ahead.extend(more)

            def decide(seen: Sequence[Event]) -> Sequence[EventDraft]:
                state, rest = base, seen
                # Only if the events read ahead are the very events stored (a rollback may
                # have removed some since): the journal hands back the same decoded objects.
                n = len(ahead)
                if (
                    n
                    and len(seen) >= n
                    and all(a is b or a == b for a, b in zip(ahead, seen[:n], strict=True))
                ):
                    state, rest = folded[0], seen[n:]
                caught.append(fold_all(state, rest))
                return decision(caught[-1])

            try:
                result = self._store.append(decide, after=base.seq, while_queued=while_queued)
            except WriteFailed:
                # A failed fdatasync rolls back every append not yet durable, others' included,
                # so the state may hold events that are gone (docs/RELIABILITY.md): fold again.
                caught.clear()
                loaded = snapshot.load(self._snapshots, self._store) if self._snapshots else None
                self._state = loaded or EMPTY
                raise
            finally:
                if caught:
                    self._state = caught[-1]
            appended = tuple(result.appended)
            state = self._state = fold_all(self._state, appended)
        self._maybe_snapshot(state)
        if self._projections is not None and any(e.seq > before for e in appended):
            # Outside the journal lock: projection I/O must not lengthen the critical section.
            crash_point("board.before_projection")
            self._projections.sync(self.refresh, own=max(e.seq for e in appended))
        return state, appended

    def _maybe_snapshot(self, state: TeamState) -> None:
        """Save ``state`` as the snapshot when it is ``snapshot_every`` events past the last one
        (outside the journal's and the board's locks; one thread at a time, others skip)."""
        if self._snapshots is None or state.seq - self._snapshot_seq < self._snapshot_every:
            return
        if not self._snapshot_lock.acquire(blocking=False):
            return
        try:
            if state.seq - self._snapshot_seq < self._snapshot_every:
                return
            at = next(iter(self._store.read_from(state.seq)), None)
            if at is not None and at.seq == state.seq:
                snapshot.save(self._snapshots, state, at)
                self._snapshot_seq = state.seq
        finally:
            self._snapshot_lock.release()

    def repair_projections(self) -> Lines:
        """Rewrite every projection that is missing, stale or hand-edited; returns one line
        per file repaired (each also logged as a warning)."""
        if self._projections is None:
            return []
        return self._projections.repair_all(self.refresh)

    def _draft(self, body: Payload, op_id: str | None) -> EventDraft:
        return draft(body.TYPE, _ACTING_AS.get() or self._actor, body, op_id)

    def _command(self, op_id: str | None, step: Callable[[TeamState], _Step]) -> _Outcome:
        """The one path of the task commands, through ``execute``: a known ``op_id`` (a retried
        command) writes nothing; otherwise ``step`` decides against caught-up state and its
        event body is appended under ``op_id``, or its refusal is kept for the answer."""
        refused: list[str | None] = [None]

        def decision(st: TeamState) -> Sequence[EventDraft]:
            refused[0] = None  # only the last run counts (a backend may call decide again)
            if op_id is not None and op_id in st.ops:
                return ()
            decided = step(st)
            if isinstance(decided, _Refused):
                refused[0] = decided.reason
                return ()
            if decided is None:
                return ()
            bodies = decided if isinstance(decided, tuple) else (decided,)
            return tuple(
                self._draft(body, op_id if i == 0 else None) for i, body in enumerate(bodies)
            )

        state, events = self.execute(decision)
        return _Outcome(state, events, refused[0])

    def _event(self, done: _Outcome, op_id: str | None) -> Event:
        """The event of a command that was carried out: appended just now, or stored by the
        first run of its ``op_id``."""
        if done.events:
            return done.events[0]
        assert op_id is not None and op_id in done.state.ops, "the command wrote no event"
        return next(iter(self._store.read_from(done.state.ops[op_id])))

    # --- members -------------------------------------------------------------------------------

    def add_member(self, body: MemberSpawned, *, lead: str = LEAD) -> bool:
        """Journal ``member.spawned`` for ``body.name``, decided under the journal lock against
        the name rules (``actors.board.rules.check_new_member``: safe, not reserved, unique
        ignoring case), so two racing spawns of ``Alice`` and ``alice`` cannot both win.

        An agent may take the name of a stopped agent again; a live one is ``DuplicateMember``.
        A person already on the team is left as is (returns False); an agent's name is not a
        person's. Returns True when the event was written.
        """
        name = body.name
        wrote = [False]

        def decision(st: TeamState) -> Sequence[EventDraft]:
            wrote[0] = False
            if not self._joins(st, name, body.kind, lead):
                return ()
            wrote[0] = True
            return (self._draft(body, None),)

        self.execute(decision)
        return wrote[0]

    @staticmethod
    def _joins(st: TeamState, name: str, kind: str, lead: str) -> bool:
        """Whether ``name`` joins as a new ``kind`` member (False: it is already one); raises
        when it may not."""
        if kind == "human" or name != lead:
            # Only the lead agent may be called ``lead``; a person never.
            check_new_member(st, name, lead=lead if kind == "agent" else None)
        existing = st.members.get(name)
        if existing is None:
            return True
        if kind == "human" and existing.kind == "human":
            return False
        if kind == "human":
            raise TeamError(f"{name} is an agent of the team, not a person: pick another name")
        if existing.kind == "agent" and existing.status == "stopped":
            return True
        raise DuplicateMember(name)

    # --- task commands -------------------------------------------------------------------------

    def create(
        self,
        subject: str,
        description: str = "",
        *,
        blocked_by: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        plan_required: bool = False,
        role: str | None = None,
        verify: str | None = None,
        op_id: str | None = None,
    ) -> Task:
        """Add a pending task; every ``blocked_by`` id must exist and not be deleted.
        ``verify``: a shell command that must exit 0 before the task may be completed."""
        if not subject.strip():
            raise TeamError("a task needs a subject")
        check_subject(subject)
        if verify is not None and not verify.strip():
            raise TeamError("a task's verify command cannot be empty")
        from mailboxes.payloads import TaskCreated

        def step(st: TeamState) -> _Step:
            deps = unique(blocked_by)
            for dep in deps:
                live(st, dep, "depend on")
            return TaskCreated(
                task_id=task_id(st.next_task),
                subject=subject,
                description=description,
                blocked_by=deps,
                metadata=dict(metadata or {}),
                plan_required=plan_required,
                role=role,
                verify=verify,
            )

        done = self._command(op_id, step)
        return done.state.task(str(self._event(done, op_id).data["task_id"]))

    def create_many(self, tasks: Sequence[NewTask], *, op_id: str | None = None) -> TaskList:
        """Add every task of ``tasks`` in one journal commit (``teamctl task import``), each as
        ``create`` would, or none: a ``blocked_by`` id that is unknown or deleted when the
        commit is decided refuses the whole batch. ``after`` indexes are tasks of the batch."""
        if not tasks:
            return []
        from mailboxes.payloads import TaskCreated

        def decision(st: TeamState) -> Sequence[EventDraft]:
            if op_id is not None and op_id in st.ops:
                return ()
            first = st.next_task
            bodies: CreatedList = []
            for task in tasks:
                for dep in task.blocked_by:
                    live(st, dep, "depend on")
                after = tuple(task_id(first + i) for i in task.after)
                bodies.append(
                    TaskCreated(
                        task_id=task_id(first + len(bodies)),
                        subject=task.subject,
                        description=task.description,
                        blocked_by=unique((*task.blocked_by, *after)),
                        verify=task.verify,
                    )
                )
            return tuple(
                self._draft(body, op_id if i == 0 else None) for i, body in enumerate(bodies)
            )

        state, events = self.execute(decision)
        if events and events[0].seq > 0 and len(events) == len(tasks):
            return [state.task(str(e.data["task_id"])) for e in events]
        # A retried op_id: the first stored event and the ones after it.
        assert op_id is not None and op_id in state.ops
        first = int(state.ops[op_id])
        stored = list(itertools.islice(self._store.read_from(first), len(tasks)))
        return [state.task(str(e.data["task_id"])) for e in stored]

    def update(
        self,
        tid: str,
        *,
        subject: str | None = None,
        description: str | None = None,
        add_blocked_by: Sequence[str] = (),
        remove_blocked_by: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        op_id: str | None = None,
    ) -> Task:
        """Edit a task; new edges are checked for existence and cycles. No change, no event."""
        if subject is not None:
            check_subject(subject)

        if subject is not None and not subject.strip():
            raise TeamError("a task needs a subject")
        from mailboxes.payloads import TaskUpdated

        def step(st: TeamState) -> _Step:
            task = live(st, tid, "edit")
            add = tuple(d for d in unique(add_blocked_by) if d not in task.blocked_by)
            remove = tuple(d for d in unique(remove_blocked_by) if d in task.blocked_by)
            for dep in add:
                live(st, dep, "depend on")
            cycle = st.find_cycle(tid, add)
            if cycle is not None:
                raise CycleError(cycle)
            changed = (
                (subject is not None and subject != task.subject)
                or (description is not None and description != task.description)
                or add
                or remove
                or metadata
            )
            if not changed:
                return None
            return TaskUpdated(
                task_id=tid,
                subject=subject,
                description=description,
                add_blocked_by=add,
                remove_blocked_by=remove,
                metadata=dict(metadata) if metadata else None,
            )

        return self._command(op_id, step).state.task(tid)

    def delete(self, tid: str, *, force: bool = False, op_id: str | None = None) -> Task:
        """Mark deleted. Refused while unfinished tasks depend on it or it is claimed, unless
        ``force`` (which frees the owner and drops the edges). Deleting twice is a no-op."""
        from mailboxes.payloads import TaskDeleted

        def step(st: TeamState) -> _Step:
            task = st.task(tid)
            if task.status == "deleted":
                return None
            if not force:
                dependents = st.live_dependents(tid)
                if dependents:
                    raise HasDependents(tid, dependents)
                if task.status == "in_progress":
                    raise InvalidTransition(tid, f"claimed by {task.owner}", "delete")
            return TaskDeleted(task_id=tid, force=force)

        return self._command(op_id, step).state.task(tid)

    def claim(
        self, tid: str, owner: str, *, human: bool = False, op_id: str | None = None
    ) -> ClaimResult:
        """Compare-and-swap: a ready task becomes ``owner``'s (epoch + 1). ``human`` claims (from
        a terminal, ``--as NAME``) hold no lease and are never reaped; a person's first claim
        also journals ``member.spawned`` (kind human) in the same append, under the name rules
        of ``add_member``."""
        check_agent_name(owner)
        from mailboxes.payloads import MemberSpawned, TaskClaimed

        def step(st: TeamState) -> _Step:
            joins = human and self._joins(st, owner, "human", LEAD)
            task = st.task(tid)
            reason = refusal(st, task, owner)
            if reason == ALREADY_YOURS:
                return None
            if reason:
                return _Refused(reason)
            claimed = TaskClaimed(task_id=tid, owner=owner, epoch=task.epoch + 1, human=human)
            if joins:
                return (MemberSpawned(name=owner, role="human", kind="human"), claimed)
            return claimed

        done = self._command(op_id, step)
        if done.refused is not None:
            return ClaimResult(False, done.state.task(tid), done.refused)
        return ClaimResult(True, done.state.task(tid))

    def claim_next(
        self,
        owner: str,
        *,
        role: str | None = None,
        accept: Callable[[Task], bool] | None = None,
        op_id: str | None = None,
        also: Sequence[Payload] = (),
    ) -> ClaimResult:
        """Atomically claim the lowest-id ready task ``owner`` may take: tasks without a role,
        or with ``role``, that ``accept`` (a pure filter, e.g. on tools; run under the lock)
        agrees to. At most one; refused if ``owner`` already holds a task. ``also``: events
        appended after the claim in the same commit, only if it is made (e.g. the owner's
        status turning ``working``)."""
        check_agent_name(owner)
        from mailboxes.payloads import TaskClaimed

        def step(st: TeamState) -> _Step:
            held = st.holding(owner)
            if held is not None:
                return _Refused(f"{owner} already holds {held.id}")
            task = first_claimable(st, role, accept)
            if task is None:
                return _Refused("no ready task")
            claimed = TaskClaimed(task_id=task.id, owner=owner, epoch=task.epoch + 1)
            return (claimed, *also) if also else claimed

        done = self._command(op_id, step)
        if done.refused is not None:
            return ClaimResult(False, None, done.refused)
        return ClaimResult(True, done.state.task(str(self._event(done, op_id).data["task_id"])))

    def release(
        self,
        tid: str,
        owner: str,
        epoch: int,
        reason: str = "released",
        *,
        forced_by: str | None = None,
        op_id: str | None = None,
    ) -> Task:
        """Give a claimed task back (pending again). Fenced by ``owner`` and ``epoch``.
        ``forced_by``: the person who released a live agent's task by hand."""
        from mailboxes.payloads import TaskReleased

        def step(st: TeamState) -> _Step:
            fence(st, tid, owner, epoch)
            return TaskReleased(
                task_id=tid, owner=owner, epoch=epoch, reason=reason, forced_by=forced_by
            )

        return self._command(op_id, step).state.task(tid)

    def complete(
        self,
        tid: str,
        owner: str,
        epoch: int,
        summary: str = "",
        *,
        forced_by: str | None = None,
        op_id: str | None = None,
        commit: str | None = None,
        remote: str | None = None,
    ) -> Completion:
        """Finish a claimed task. Fenced by ``owner`` and ``epoch``; the event carries the ids
        of the tasks that became ready, and ``forced_by``: the person who completed a live
        agent's task by hand; ``commit``/``remote``: its worktree branch's tip and the git
        remote it was pushed to (docs/SCALE-OUT.md, "Code across hosts")."""
        from mailboxes.payloads import TaskCompleted

        def step(st: TeamState) -> _Step:
            fence(st, tid, owner, epoch)
            return TaskCompleted(
                task_id=tid,
                owner=owner,
                epoch=epoch,
                summary=summary,
                unblocked=st.newly_ready_after(tid),
                forced_by=forced_by,
                commit=commit,
                remote=remote,
            )

        done = self._command(op_id, step)
        return Completion(done.state.task(tid), tuple(self._event(done, op_id).data["unblocked"]))

    def record_verification(self, body: TaskVerified) -> Task:
        """Journal one run of a task's ``verify`` command (passed or not); the task must exist."""

        def step(st: TeamState) -> _Step:
            st.task(body.task_id)
            return body

        return self._command(None, step).state.task(body.task_id)

    def reap_dead_owners(self) -> TaskList:
        """Release (reason ``owner_dead``) every agent claim whose owner's lease is free.

        Checked under the store's lock, so two processes reaping at once release each claim once.
        Human claims are never reaped, nor those of a ``paused`` member (its runtime stopped
        politely: the claim waits for ``teamctl resume``, docs/RELIABILITY.md "Stop and
        resume"). Without a ``Liveness`` this does nothing.
        """
        liveness = self._liveness
        if liveness is None:
            return []
        from mailboxes.payloads import TaskReleased

        def decision(st: TeamState) -> Sequence[EventDraft]:
            drafts = []
            for owner, tid in st.holdings.items():
                task = st.tasks[tid]
                member = st.members.get(owner)
                if member is not None and member.status == "paused":
                    continue
                if not task.human and not alive(liveness, owner):
                    body = TaskReleased(
                        task_id=tid, owner=owner, epoch=task.epoch, reason="owner_dead"
                    )
                    drafts.append(self._draft(body, None))
            return drafts

        state, events = self.execute(decision)
        return [state.task(str(e.data["task_id"])) for e in events]
