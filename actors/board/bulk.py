"""Bulk task import: ``teamctl task import FILE`` (docs/ARCHITECTURE.md, "The task board").

A file holds one JSON object per line: ``subject`` (required), ``description``, ``blocked_by``
(a list of task ids already on the board, or subjects of tasks on the board or earlier or later
in the same file) and ``verify``. ``parse_lines`` checks every line against the state and the
rest of the file and reports every bad line; ``Board.create_many`` then adds them all in one
journal commit, re-checking against the state it decides on, so nothing or everything is added.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from actors.board.rules import check_subject
from actors.board.state import TeamState, task_number
from actors.errors import TeamError, UnknownTask

__all__ = ["BadImport", "NewTask", "parse_lines", "resolve_cycles"]

_KEYS = frozenset({"subject", "description", "blocked_by", "verify"})


@dataclass(frozen=True, slots=True)
class NewTask:
    """One task to add. ``blocked_by``: ids of tasks already on the board; ``after``: indexes
    (0-based, in the batch) of tasks of the same batch it waits for."""

    subject: str
    description: str = ""
    blocked_by: tuple[str, ...] = ()
    after: tuple[int, ...] = ()
    verify: str | None = None
    line: int = 0
    """Where it came from (1-based line of the import file; 0 = not from a file)."""


class BadImport(TeamError):
    """Bad lines of an import: nothing was added. ``problems``: one ``line N: …`` each."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        shown = "; ".join(self.problems[:5]) + (f"; … {count - 5} more" if count > 5 else "")
        super().__init__(f"{count} bad line{'s' if count != 1 else ''}, nothing imported: {shown}")


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def parse_lines(lines: Iterable[str], state: TeamState) -> list[NewTask]:
    """The tasks of an import file (``BadImport`` listing every bad line, if any)."""
    problems: list[str] = []
    raw: list[tuple[int, dict[str, Any]]] = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            try:
                obj = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"not JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            unknown = sorted(set(obj) - _KEYS)
            if unknown:
                raise ValueError(
                    f"unknown key {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
                )
            subject = _text(obj.get("subject"), "subject")
            if not subject.strip():
                raise ValueError("a task needs a subject")
            check_subject(subject)
            _text(obj.get("description", ""), "description")
            verify = obj.get("verify")
            if verify is not None and not _text(verify, "verify").strip():
                raise ValueError("a task's verify command cannot be empty")
            deps = obj.get("blocked_by", [])
            if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
                raise ValueError("blocked_by must be a list of task ids or subjects")
        except (ValueError, TeamError) as exc:
            problems.append(f"line {number}: {exc}")
            continue
        raw.append((number, obj))
    # Subjects of the file (a reference to one repeated subject is ambiguous).
    in_file: dict[str, list[int]] = {}
    for index, (_, obj) in enumerate(raw):
        in_file.setdefault(obj["subject"], []).append(index)
    on_board: dict[str, list[str]] = {}
    for task in state.tasks.values():
        if task.status != "deleted":
            on_board.setdefault(task.subject, []).append(task.id)
    out: list[NewTask] = []
    for index, (number, obj) in enumerate(raw):
        ids: list[str] = []
        after: list[int] = []
        for ref in obj.get("blocked_by", []):
            found = _resolve(ref, state, in_file, on_board)
            if isinstance(found, str) and found.startswith("!"):
                problems.append(f"line {number}: blocked_by {ref!r}: {found[1:]}")
            elif isinstance(found, int):
                if found == index:
                    problems.append(f"line {number}: a task cannot wait for itself")
                after.append(found)
            else:
                ids.append(found)
        out.append(
            NewTask(
                subject=obj["subject"],
                description=obj.get("description", ""),
                blocked_by=tuple(dict.fromkeys(ids)),
                after=tuple(dict.fromkeys(after)),
                verify=obj.get("verify"),
                line=number,
            )
        )
    problems += resolve_cycles(out)
    if problems:
        raise BadImport(sorted(problems, key=lambda p: int(p.split(":")[0][5:])))
    return out


def _resolve(
    ref: str, state: TeamState, in_file: dict[str, list[int]], on_board: dict[str, list[str]]
) -> str | int:
    """An existing task id, an index in the file, or ``"!reason"``."""
    if ref.startswith("task_"):
        try:
            task_number(ref)
        except UnknownTask:
            pass
        else:
            task = state.tasks.get(ref)
            if task is None:
                return "!no such task"
            if task.status == "deleted":
                return "!that task is deleted"
            return ref
    here = in_file.get(ref, [])
    there = on_board.get(ref, [])
    if len(here) + len(there) > 1:
        return "!more than one task has this subject: use its id"
    if here:
        return here[0]
    if there:
        return there[0]
    return "!no task has this id or subject"


def resolve_cycles(tasks: Sequence[NewTask]) -> list[str]:
    """A problem line for each task of the batch on or behind a dependency cycle (empty: none).
    Tasks on the board cannot wait for new ones, so a cycle lies inside the batch."""
    waiting = [len(t.after) for t in tasks]
    dependents: list[list[int]] = [[] for _ in tasks]
    for index, task in enumerate(tasks):
        for dep in task.after:
            dependents[dep].append(index)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    while ready:
        done = ready.pop()
        for dependent in dependents[done]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    return [
        f"line {tasks[i].line}: on or behind a dependency cycle ({tasks[i].subject!r})"
        for i, n in enumerate(waiting)
        if n > 0
    ]
