"""Draw a ``Snapshot`` with rich: ``render(snapshot)`` returns one renderable.

Used by ``teamctl watch``; ``teamctl run``'s console and ``teamctl demo`` reuse it (put it in a
``rich.live.Live`` or print it once). It only reads the snapshot, so it can be called from any
thread. Times are absolute (HH:MM:SS), never "3 s ago": the picture changes only when the team
does, which is what lets the live view redraw on events alone.
"""

from __future__ import annotations

import time

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from actors.live.snapshot import Column, MemberRow, Snapshot, TaskRow
from actors.live.text import SafeTable
from teamctl_base.text import safe

__all__ = ["render"]

_STATUS_STYLE = {
    "working": "green",
    "idle": "cyan",
    "starting": "blue",
    "stopping": "magenta",
    "waiting_plan_approval": "yellow",
    "waiting_permission": "yellow",
    "crashed": "bold red",
    "stalled": "bold yellow",
    "stopped": "dim",
    "active": "green",
}
_COLUMN_TITLE: dict[Column, str] = {
    "in_progress": "in progress",
    "ready": "ready",
    "blocked": "blocked",
    "completed": "completed",
    "deleted": "deleted",
}
_COLUMN_STYLE: dict[Column, str] = {
    "in_progress": "green",
    "ready": "cyan",
    "blocked": "yellow",
    "completed": "dim",
    "deleted": "dim strike",
}
_SHOWN_COLUMNS: tuple[Column, ...] = ("in_progress", "ready", "blocked", "completed")
_ID_COLUMNS = frozenset({"id", "name", "job", "cron", "request", "branch"})
"""Columns that never wrap: an id is copied whole into the next command."""
_CELL_CHARS = 60
"""The live view cuts longer agent texts (subjects, prompts, commands) with an ellipsis."""


def _clock(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def _table(title: str, *columns: str) -> Table:
    """A table whose cells are plain, escaped agent text (``SafeTable``)."""
    grid = SafeTable(
        title=title, title_justify="left", title_style="bold", expand=False, max_cell=_CELL_CHARS
    )
    grid.show_edge = False
    grid.pad_edge = False
    for name in columns:
        if name in _ID_COLUMNS:
            grid.add_column(name, no_wrap=True)
        else:
            grid.add_column(name, overflow="fold")
    return grid


def _header(snap: Snapshot) -> Text:
    counts = snap.task_counts()
    parts = [f"{_COLUMN_TITLE[c]} {counts[c]}" for c in _SHOWN_COLUMNS]
    head = Text()
    head.append(f"team {safe(snap.team or '?')}", style="bold")
    head.append(f"  journal seq {snap.seq}  ")
    head.append("tasks: " + ", ".join(parts))
    head.append(f"  (as of {_clock(snap.taken_at)})", style="dim")
    return head


def _member_status(m: MemberRow) -> Text:
    text = Text(m.status, style=_STATUS_STYLE.get(m.status, ""))
    if m.kind == "human":
        text.append(" (human)", style="dim")
    elif m.orphaned:
        text.append(" (no process)", style="bold red")
    if m.reason and m.status in ("crashed", "stalled", "stopped", "stopping"):
        text.append(f": {safe(m.reason)}", style="dim")
    return text


def _members(snap: Snapshot) -> RenderableType:
    if not snap.members:
        return Text("members: none yet", style="dim")
    grid = _table(
        "members", "name", "role", "state", "task", "worktree", "unread", "tokens", "cost"
    )
    for m in snap.members:
        task = "-" if m.task_id is None else f"{m.task_id} {m.task_subject or ''}".strip()
        grid.add_row(
            m.name,
            m.role or "-",
            _member_status(m),
            task,
            m.worktree or "-",
            str(m.unread),
            f"{m.tokens:,}",
            f"${m.cost_usd:.4f}",
        )
    return grid


def _owner(task: TaskRow) -> str:
    if task.owner is None:
        return "-"
    return f"{task.owner} (human)" if task.human else task.owner


def _deps(task: TaskRow) -> Text:
    if not task.blocked_by:
        return Text("-")
    text = Text()
    for i, dep in enumerate(task.blocked_by):
        if i:
            text.append(", ")
        text.append(safe(dep), style="yellow" if dep in task.waiting_on else "dim")
    return text


def _cut(column: Column, rows: tuple[TaskRow, ...], limit: int) -> tuple[tuple[TaskRow, ...], str]:
    """At most ``limit`` rows of a column and what the cut left out ("" = nothing). In progress
    is never cut; completed keeps the latest, the others the first (the next to run)."""
    if column == "in_progress" or len(rows) <= limit:
        return rows, ""
    hidden = len(rows) - limit
    if column == "completed":
        return rows[-limit:], f"and {hidden} earlier"
    return rows[:limit], f"and {hidden} more"


def _tasks(snap: Snapshot, max_rows: int, max_completed: int) -> RenderableType:
    if not any(t.column != "deleted" for t in snap.tasks):
        return Text("tasks: none yet", style="dim")
    grid = _table("tasks", "status", "id", "subject", "owner", "blocked by", "worktree", "plan")
    for column in _SHOWN_COLUMNS:
        limit = max_completed if column == "completed" else max_rows
        rows, note = _cut(column, snap.column(column), limit)
        title = Text(_COLUMN_TITLE[column], style=_COLUMN_STYLE[column])
        for t in rows:
            plan = "-" if t.plan == "none" else t.plan
            grid.add_row(title, t.id, t.subject, _owner(t), _deps(t), t.worktree or "-", plan)
        if note:
            grid.add_row(title, "…", note, "", "", "", "")
    return grid


def _inboxes(snap: Snapshot) -> RenderableType:
    text = Text("inboxes (unread): ", style="bold")
    if not snap.inboxes:
        text.append("none", style="dim")
    for i, row in enumerate(snap.inboxes):
        if i:
            text.append("  ")
        text.append(f"{safe(row.agent)} ")
        text.append(str(row.unread), style="bold yellow" if row.unread else "dim")
    return text


def _jobs(snap: Snapshot) -> RenderableType:
    if not snap.jobs:
        return Text("jobs: none", style="dim")
    grid = _table("jobs", "job", "owner", "status", "exit", "started", "command")
    for j in snap.jobs:
        status = Text(j.status, style="green" if j.status == "running" else "dim")
        if j.gone:
            status.append(" (process gone)", style="bold red")
        code = "-" if j.exit_code is None else str(j.exit_code)
        grid.add_row(j.job_id, j.owner, status, code, _clock(j.started_at), j.command)
    return grid


def _crons(snap: Snapshot) -> RenderableType:
    if not snap.crons:
        return Text("cron: none", style="dim")
    grid = _table("cron (next firings)", "cron", "schedule", "next", "owner", "prompt")
    for c in snap.crons:
        kind = c.cron if c.recurring else f"{c.cron} (once)"
        grid.add_row(c.cron_id, kind, c.next_fire or "-", c.owner, c.prompt)
    return grid


def _worktrees(snap: Snapshot) -> RenderableType:
    if not snap.worktrees:
        return Text("worktrees: none", style="dim")
    grid = _table("worktrees", "name", "branch", "task", "merged")
    for w in snap.worktrees:
        task = "-"
        if w.task_id is not None:
            task = f"{w.task_id} ({w.task_status or '?'}" + (
                f", {w.task_owner})" if w.task_owner else ")"
            )
        merged = Text(f"yes {(w.merged_commit or '')[:8]}", style="green") if w.merged else "no"
        grid.add_row(w.name, w.branch, task, merged)
    return grid


def _workflows(snap: Snapshot) -> RenderableType | None:
    if not snap.workflows:
        return None
    grid = _table("workflow runs", "run", "workflow", "status", "phase", "steps", "latest")
    for w in snap.workflows:
        steps = f"{w.done} done, {w.running} running" + (f", {w.cached} cached" if w.cached else "")
        latest = w.progress[-1][1] if w.progress else "-"
        status = Text(
            w.status, style={"running": "green", "failed": "bold red"}.get(w.status, "dim")
        )
        grid.add_row(w.run_id, w.name, status, w.phase or "-", steps, latest)
    return grid


def _approvals(snap: Snapshot) -> RenderableType | None:
    if not snap.approvals:
        return None
    grid = _table("waiting for an answer", "kind", "request", "from", "about", "status")
    for a in snap.approvals:
        grid.add_row(a.kind, a.request_id, a.agent, a.about, Text(a.status, style="yellow"))
    return grid


def render(snapshot: Snapshot, *, max_rows: int = 15, max_completed: int = 8) -> RenderableType:
    """The whole live view of ``snapshot`` as one rich renderable (a ``Group``).

    Tasks in progress are all shown; ready and blocked ones up to ``max_rows`` each (lowest ids
    first), completed ones the latest ``max_completed``; a row says how many were left out.
    """
    parts: list[RenderableType] = [
        _header(snapshot),
        _members(snapshot),
        _tasks(snapshot, max_rows, max_completed),
        _inboxes(snapshot),
    ]
    approvals = _approvals(snapshot)
    if approvals is not None:
        parts.append(approvals)
    workflows = _workflows(snapshot)
    if workflows is not None:
        parts.append(workflows)
    parts += [_jobs(snapshot), _crons(snapshot), _worktrees(snapshot)]
    return Group(*parts)
