"""The live view as an append-only log: one line per change between two snapshots.

On a terminal the live view redraws one panel in place; to a pipe or a file a redrawn panel
would repeat the whole team on every change. ``change_lines(before, after)`` says instead what
changed, one plain line each (``HH:MM:SS task_3 ready -> in progress (alice): subject``): members
joining or changing state, tasks added, moving column, changing owner or subject, questions
waiting for an answer and answered, jobs, cron jobs, worktrees, unread counts, and the progress of
workflow runs (phase changes, steps started, done or cached, log lines). The first snapshot
(``before`` is None) is told as a list of what is there. Agent text is escaped and cut
(``teamctl_base.text``); ids are never cut.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TypeVar

from actors.live.snapshot import MemberRow, Snapshot, TaskRow
from teamctl_base.text import one_line, safe

__all__ = ["LINE_CHARS", "ChangeLog", "change_lines"]

LINE_CHARS = 80
"""Agent text (a subject, a prompt, a command) is cut to this many characters in a log line."""

_R = TypeVar("_R")


def _by(rows: Iterable[_R], key: Callable[[_R], Hashable]) -> dict[Hashable, _R]:
    return {key(r): r for r in rows}


def _column(task: TaskRow) -> str:
    return task.column.replace("_", " ")


def _member(m: MemberRow) -> str:
    text = f"{safe(m.name)} {m.status}"
    if m.kind == "human":
        text += " (human)"
    elif m.orphaned:
        text += " (no process)"
    if m.task_id:
        text += f" on {safe(m.task_id)}"
        if m.worktree:
            text += f" in {safe(m.worktree)}"
    if m.reason and m.status in ("crashed", "stalled", "stopped", "stopping"):
        text += f": {one_line(m.reason, LINE_CHARS)}"
    return text


def _owner(task: TaskRow) -> str:
    if task.owner is None:
        return ""
    return f" ({safe(task.owner)}{', human' if task.human else ''})"


def _subject(task: TaskRow) -> str:
    return one_line(task.subject, LINE_CHARS)


def _members(before: Snapshot | None, after: Snapshot) -> Iterator[str]:
    old = _by(before.members if before else (), lambda m: m.name)
    for m in after.members:
        was = old.get(m.name)
        if was is None:
            role = f" as {safe(m.role)}" if m.role else ""
            yield f"member {_member(m)} (joined{role})"
        elif _member(was) != _member(m):
            yield f"member {_member(m)}"


def _tasks(before: Snapshot | None, after: Snapshot) -> Iterator[str]:
    old = _by(before.tasks if before else (), lambda t: t.id)
    for t in after.tasks:
        was = old.get(t.id)
        if was is None:
            if before is None and t.column == "deleted":
                continue
            verb = "" if before is None else " added"
            yield f"{t.id}{verb} [{_column(t)}]{_owner(t)}: {_subject(t)}"
            continue
        if was.column != t.column:
            yield f"{t.id} {_column(was)} -> {_column(t)}{_owner(t)}: {_subject(t)}"
        elif was.owner != t.owner:
            yield f"{t.id} owner {safe(was.owner or '-')} -> {safe(t.owner or '-')}"
        if was.subject != t.subject:
            yield f"{t.id} subject: {_subject(t)}"
        if was.plan != t.plan and t.plan != "none":
            yield f"{t.id} plan {t.plan}"
        if was.worktree != t.worktree and t.worktree:
            yield f"{t.id} bound to worktree {safe(t.worktree)}"


def _approvals(before: Snapshot | None, after: Snapshot) -> Iterator[str]:
    old = _by(before.approvals if before else (), lambda a: a.request_id)
    new = _by(after.approvals, lambda a: a.request_id)
    for key, a in new.items():
        was = old.get(key)
        if was is None or was.status != a.status:
            yield (
                f"waiting for an answer: {a.kind} {safe(a.request_id)} from {safe(a.agent)} "
                f"about {one_line(a.about, LINE_CHARS)} ({safe(a.status)})"
            )
    for key, a in old.items():
        if key not in new:
            yield f"answered: {a.kind} {safe(a.request_id)} from {safe(a.agent)}"


def _jobs(before: Snapshot | None, after: Snapshot) -> Iterator[str]:
    old = _by(before.jobs if before else (), lambda j: j.job_id)
    for j in after.jobs:
        was = old.get(j.job_id)
        if was is not None and (was.status, was.exit_code, was.gone) == (
            j.status,
            j.exit_code,
            j.gone,
        ):
            continue
        code = "" if j.exit_code is None else f" exit {j.exit_code}"
        gone = " (process gone)" if j.gone else ""
        yield (
            f"job {safe(j.job_id)} of {safe(j.owner)} {j.status}{code}{gone}: "
            f"{one_line(j.command, LINE_CHARS)}"
        )


def _crons(before: Snapshot | None, after: Snapshot) -> Iterator[str]:
    old = _by(before.crons if before else (), lambda c: c.cron_id)
    new = _by(after.crons, lambda c: c.cron_id)
    for key, c in new.items():
        if key not in old:
            once = "" if c.recurring else " once"
            yield (
                f"cron {safe(c.cron_id)} {safe(c.cron)}{once} for {safe(c.owner)}, next "
                f"{c.next_fire or '-'}: {one_line(c.prompt, LINE_CHARS)}"
            )
    for key, c in old.items():
        if key not in new:
            yield f"cron {safe(c.cron_id)} finished or cancelled"


def _worktrees(before: Snapshot | None, after: Snapshot) -> Iterator[str]:
    old = _by(before.worktrees if before else (), lambda w: w.name)
    new = _by(after.worktrees, lambda w: w.name)
    for key, w in new.items():
        was = old.get(key)
        task = f" for {safe(w.task_id)}" if w.task_id else ""
        if was is None:
            yield f"worktree {safe(w.name)} on {safe(w.branch)}{task}"
        elif w.merged and not was.merged:
            yield f"worktree {safe(w.name)} merged at {(w.merged_commit or '')[:12]}"
    for key in old:
        if key not in new:
            yield f"worktree {safe(key)} removed"


def _workflows(before: Snapshot | None, after: Snapshot) -> Iterator[str]:
    old = _by(before.workflows if before else (), lambda w: w.run_id)
    for w in after.workflows:
        was = old.get(w.run_id)
        if before is None:  # what is there: where each run is, not its history
            phase = f", phase {one_line(w.phase, LINE_CHARS)}" if w.phase else ""
            yield (
                f"workflow {safe(w.run_id)} ({one_line(w.name, LINE_CHARS)}) {w.status}: "
                f"{w.done} steps done, {w.running} running{phase}"
            )
            continue
        seen = max((seq for seq, _ in was.progress), default=0) if was is not None else 0
        for seq, line in w.progress:
            if seq > seen:
                yield one_line(line, 2 * LINE_CHARS)


def _inboxes(before: Snapshot | None, after: Snapshot) -> Iterator[str]:
    old = _by(before.inboxes if before else (), lambda i: i.agent)
    for row in after.inboxes:
        was = old.get(row.agent)
        if (was.unread if was is not None else 0) != row.unread:
            yield f"inbox {safe(row.agent)}: {row.unread} unread"


def change_lines(before: Snapshot | None, after: Snapshot) -> list[str]:
    """What changed from ``before`` to ``after``, one line each, stamped with ``after``'s time
    (empty: nothing a person would see). ``before`` None: everything in ``after``."""
    stamp = time.strftime("%H:%M:%S", time.localtime(after.taken_at))
    lines: list[str] = []
    if before is None:
        n = after.task_counts()
        lines.append(
            f"team {safe(after.team or '?')} at journal seq {after.seq}: tasks "
            f"{n['in_progress']} in progress, {n['ready']} ready, {n['blocked']} blocked, "
            f"{n['completed']} completed"
        )
    for part in (_members, _tasks, _approvals, _workflows, _jobs, _crons, _worktrees, _inboxes):
        lines.extend(part(before, after))
    return [f"{stamp} {line}" for line in lines]


class ChangeLog:
    """Turns each snapshot shown into its change lines for ``write`` (one call per line)."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write
        self.last: Snapshot | None = None

    def __call__(self, snap: Snapshot) -> None:
        lines = change_lines(self.last, snap)
        self.last = snap
        for line in lines:
            self._write(line)
