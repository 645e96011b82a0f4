"""The values a board command answers with, and the checks its decisions share.

Pure functions of a ``TeamState``: they run inside ``decide``, under the journal's lock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice

from actors.board.state import Task, TeamState, task_id
from actors.errors import (
    ClaimRefused,
    DuplicateMember,
    InvalidMemberName,
    InvalidTransition,
    NotOwner,
    StaleEpoch,
    TeamError,
)
from mailboxes.errors import MailboxesError
from mailboxes.ports import Liveness


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """The answer to a claim: ``ok`` with the claimed task, or refused with a ``reason``."""

    ok: bool
    task: Task | None = None
    reason: str = ""

    @property
    def epoch(self) -> int:
        """The claim's epoch (0 when refused): pass it to ``complete``/``release``."""
        return self.task.epoch if self.ok and self.task is not None else 0

    def unwrap(self) -> Task:
        """The claimed task, or raise ``ClaimRefused``."""
        if not self.ok or self.task is None:
            raise ClaimRefused(self.task.id if self.task else None, self.reason)
        return self.task


@dataclass(frozen=True, slots=True)
class Completion:
    """A completed task and the ids of the tasks that became ready because of it."""

    task: Task
    unblocked: tuple[str, ...]


ALREADY_YOURS = "already yours"

LEAD = "lead"
"""The lead's name (the only member that may be called ``lead``)."""

RESERVED_NAMES = frozenset(
    {
        LEAD,
        "user",  # a person at the console or `teamctl approve` (the default `--as` of `send`)
        "cli",  # events written by `teamctl` commands
        "runtime",  # events written by the runtime
        "scheduler",  # cron firings
        "jobs",  # background job notifications
        "supervisor",  # crash reports to the lead
        "all",
        "everyone",
        "team",
        "system",
    }
)
"""Names no new member may take, compared case-insensitively: the actors the journal and the
mailboxes already use for the program itself, and words that read as "everybody"."""

_MEMBER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def check_member_name(name: str, *, lead: str | None = LEAD) -> str:
    """``name`` if a new member may take it (``InvalidMemberName`` otherwise): 1-64 letters,
    digits, ``-``, ``_`` or ``.``, not starting with ``-`` or ``.``, and not reserved, ignoring
    case. Only the lead agent itself may be called ``lead`` (``lead=None``: nobody may, as for
    a person). Needs no state: see ``check_new_member``."""
    if not isinstance(name, str) or not _MEMBER_NAME.fullmatch(name):
        why = "use 1-64 letters, digits, '-', '_' or '.', not starting with '-' or '.'"
        raise InvalidMemberName(str(name), why)
    reserved = RESERVED_NAMES if lead is None else RESERVED_NAMES | {lead.casefold()}
    if name != lead and name.casefold() in reserved:
        raise InvalidMemberName(name, "the name is reserved for the program itself")
    return name


def check_new_member(st: TeamState, name: str, *, lead: str | None = LEAD) -> str:
    """``check_member_name``, and no other member's name equals ``name`` ignoring case
    (``DuplicateMember``). A member with exactly this name is the caller's to judge (a stopped
    agent may be spawned again; a person joins once). Pure: runs under the journal lock."""
    check_member_name(name, lead=lead)
    folded = name.casefold()
    for other in st.members:
        if other != name and other.casefold() == folded:
            raise DuplicateMember(name, taken=other)
    return name


def alive(liveness: Liveness, owner: str) -> bool:
    """A name the lease store cannot even check (not a valid agent name) is left alone."""
    try:
        return liveness.is_alive(owner)
    except MailboxesError:
        return True


MAX_SUBJECT_CHARS = 500
"""The longest task subject; the details belong in the description."""


def check_subject(subject: str) -> str:
    """``subject`` if it is at most ``MAX_SUBJECT_CHARS`` long (``TeamError`` otherwise)."""
    if len(subject) > MAX_SUBJECT_CHARS:
        raise TeamError(
            f"a task subject is at most {MAX_SUBJECT_CHARS} characters (this one has "
            f"{len(subject)}): put the details in the description"
        )
    return subject


def unique(ids: Sequence[str]) -> tuple[str, ...]:
    """``ids`` without repeats, first occurrence kept."""
    return tuple(dict.fromkeys(ids))


def live(st: TeamState, tid: str, action: str) -> Task:
    """The task, unless it is unknown (``UnknownTask``) or deleted (``InvalidTransition``)."""
    task = st.task(tid)
    if task.status == "deleted":
        raise InvalidTransition(tid, "deleted", action)
    return task


AWAITS_WORKTREE = "workflow_awaits_worktree"
"""Task metadata: a workflow step that waits for its worktree before anyone may claim it
(``actors.workflows.tools``)."""


def claimable(task: Task) -> bool:
    """False for a workflow step still waiting for its worktree to be bound."""
    return not (task.metadata.get(AWAITS_WORKTREE) and task.worktree is None)


def first_claimable(
    st: TeamState,
    role: str | None,
    accept: Callable[[Task], bool] | None = None,
    taken: Collection[str] = (),
) -> Task | None:
    """The lowest-id ready task a member of ``role`` may take: without a role or with
    ``role``, that ``accept`` agrees to and that is not in ``taken`` (claimed by an earlier
    decision of the same commit)."""
    tasks = st.tasks
    start = st.pending_from()
    found = None
    first = 0  # the number of the first pending task seen
    for task in _tasks_from(tasks, start):
        if task.status != "pending":  # most tasks are not: skip them cheaply
            continue
        if not first:
            first = task.number
        if (
            task.id not in taken
            and (task.role is None or task.role == role)
            and st.is_ready(task)
            and (accept is None or accept(task))
        ):
            found = task
            break
    st.note_pending_from(first or st.next_task)
    return found


def _tasks_from(tasks: Mapping[str, Task], number: int) -> Iterable[Task]:
    """The tasks numbered ``number`` and up, in id order: ids are dense from 1 in creation
    order, so ``task_<n>`` is the n-th value (skipped in C, not walked one by one); if the task
    found there is not ``task_<number>``, every task."""
    if number <= 1:
        return tasks.values()
    rest = islice(tasks.values(), number - 1, None)
    head = next(rest, None)
    if head is None:
        return ()
    if head.id != task_id(number):
        return tasks.values()
    return chain((head,), rest)


def refusal(st: TeamState, task: Task, owner: str) -> str:
    """Why ``owner`` may not claim ``task`` now ("" = it may)."""
    if task.status == "in_progress":
        return ALREADY_YOURS if task.owner == owner else f"already claimed by {task.owner}"
    if task.status != "pending":
        return f"task is {task.status}"
    held = st.holding(owner)
    if held is not None:
        return f"{owner} already holds {held.id}"
    if not st.is_ready(task):
        waiting = [b for b in task.blocked_by if st.tasks[b].status != "completed"]
        return "blocked by " + ", ".join(waiting)
    return ""


def fence(st: TeamState, tid: str, owner: str, epoch: int) -> Task:
    """The task, if ``owner`` holds it at ``epoch``; else ``StaleEpoch`` or ``NotOwner``."""
    task = st.task(tid)
    if epoch != task.epoch:
        raise StaleEpoch(tid, epoch, task.epoch)
    if task.status != "in_progress" or task.owner != owner:
        raise NotOwner(tid, owner, task.owner if task.status == "in_progress" else None)
    return task
