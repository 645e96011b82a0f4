"""The writes ``SharedCommits`` can send to the host's commit service, as plain JSON
(``actors.runtime.commit_service``): a spec names the write and its arguments, and both ends
build the same ``Decide`` from it, so a write decided by the service is decided exactly as it
would be here.

Three writes travel: a teammate's claim of its next task, a completion and a status change (what
a runtime process commits over and over). Each spec can be decided in *recovery*: after a request
whose answer was lost, the write is decided again locally and recognises its own earlier commit,
if there was one, by the fencing it already has: the task its owner now holds (a member holds at
most one, and only its hosting process claims for it), a completion with its owner and epoch,
a status already set. So nothing is done twice, and no operation id has to be journaled for it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from actors.board.rules import Completion
from actors.board.state import Task, TaskPlan
from actors.errors import TeamError
from mailboxes.events import EventDraft, payload

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import TeamState
    from actors.runtime.commits import Decide
    from mailboxes.events import Event, Payload

__all__ = [
    "Spec",
    "Wired",
    "claim_spec",
    "complete_spec",
    "decode_value",
    "encode_value",
    "status_spec",
    "task_from_wire",
    "task_to_wire",
    "wired",
]

Spec = Mapping[str, Any]
Answer = Callable[["Board", "TeamState", "tuple[Event, ...]"], Any]
"""What a committed write answers, from the board, the state after its commit and its events."""


class Wired(NamedTuple):
    """A write built from its spec: what it decides and what it answers."""

    decide: Decide
    answer: Answer


def claim_spec(
    owner: str, *, role: str | None, exclude: Collection[str] = (), also: Sequence[Payload] = ()
) -> Spec:
    return {
        "op": "claim_next",
        "owner": owner,
        "role": role,
        "exclude": sorted(exclude),
        "also": [[body.TYPE, body.VERSION, body.model_dump(mode="json")] for body in also],
    }


def complete_spec(
    tid: str,
    owner: str,
    epoch: int,
    summary: str,
    *,
    commit: str | None = None,
    remote: str | None = None,
) -> Spec:
    return {
        "op": "complete",
        "task_id": tid,
        "owner": owner,
        "epoch": epoch,
        "summary": summary,
        "commit": commit,
        "remote": remote,
    }


def status_spec(name: str, status: str, reason: str = "") -> Spec:
    return {"op": "status", "name": name, "status": status, "reason": reason}


def wired(spec: Spec, *, recover: bool = False) -> Wired:
    """The write ``spec`` names (``recover``: decided again after a lost answer). Raises
    ``TeamError`` for a spec that names no write or carries bad arguments."""
    from actors.runtime import commits

    try:
        op = spec["op"]
        if op == "claim_next":
            owner, role = _str(spec["owner"]), _opt_str(spec["role"])
            exclude = frozenset(_str(t) for t in spec["exclude"])
            also = tuple(_payload(owner, item) for item in spec["also"])
            return Wired(
                commits.claim_next(owner, role=role, exclude=exclude, also=also),
                _claimed(owner, adopt=recover),
            )
        if op == "complete":
            tid, owner, epoch = _str(spec["task_id"]), _str(spec["owner"]), spec["epoch"]
            if type(epoch) is not int:
                raise TypeError("epoch")
            decide = commits.complete(
                tid,
                owner,
                epoch,
                _str(spec["summary"]),
                commit=_opt_str(spec["commit"]),
                remote=_opt_str(spec["remote"]),
                again=recover,
            )
            return Wired(decide, _completed(tid, owner, epoch))
        if op == "status":
            name, status = _str(spec["name"]), _str(spec["status"])
            decide = commits.status_change(name, status, _str(spec["reason"]))
            return Wired(decide, _status_answer(name, status, recover))
    except (KeyError, TypeError, ValueError) as exc:
        raise TeamError(f"a bad write for the commit service ({exc})") from None
    raise TeamError(f"the commit service has no write {op!r}")


def _str(value: Any) -> str:
    if type(value) is not str:
        raise TypeError(f"{value!r} is not a string")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _payload(owner: str, item: Any) -> Payload:
    kind, version, data = item
    draft = EventDraft(type=_str(kind), actor=owner, data=data, v=version)
    return payload(draft)


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


def _status_answer(name: str, status: str, recover: bool) -> Answer:
    def answer(_board: Board, state: TeamState, events: tuple[Event, ...]) -> bool:
        if events:
            return True
        member = state.members.get(name)
        # After a lost answer, a status that is set may have been set by this write: say so
        # (the caller then tells the lead once more, which costs nothing).
        return recover and member is not None and member.status == status

    return answer


# --- values on the wire ----------------------------------------------------------------------


def task_to_wire(task: Task) -> list[Any]:
    """``task`` as a JSON list (``task_from_wire`` reads it back equal)."""
    fields: list[Any] = list(task)
    fields[Task._fields.index("plan")] = list(task.plan)
    fields[Task._fields.index("metadata")] = dict(task.metadata)
    return fields


_PLAN = Task._fields.index("plan")
_TUPLES = tuple(Task._fields.index(name) for name in ("blocked_by", "blocks"))
_METADATA = Task._fields.index("metadata")
_FLOATS = tuple(Task._fields.index(name) for name in ("created_at", "updated_at"))


def task_from_wire(fields: Any) -> Task:
    if not isinstance(fields, list) or len(fields) != len(Task._fields):
        raise ValueError("not a task")
    values = list(fields)
    values[_PLAN] = TaskPlan(*values[_PLAN])
    for i in _TUPLES:
        values[i] = tuple(values[i])
    for i in _FLOATS:
        values[i] = float(values[i])
    values[_METADATA] = MappingProxyType(dict(values[_METADATA]))  # read-only, as the fold's
    return Task(*values)


def encode_value(spec: Spec, value: Any) -> Any:
    """A write's answer as JSON (by the service)."""
    if spec["op"] == "claim_next":
        return None if value is None else task_to_wire(value)
    if spec["op"] == "complete":
        return {"task": task_to_wire(value.task), "unblocked": list(value.unblocked)}
    return bool(value)


def decode_value(spec: Spec, value: Any) -> Any:
    """A write's answer from the service's JSON (``ValueError``/``TypeError`` if malformed)."""
    if spec["op"] == "claim_next":
        return None if value is None else task_from_wire(value)
    if spec["op"] == "complete":
        return Completion(task_from_wire(value["task"]), tuple(value["unblocked"]))
    if type(value) is not bool:
        raise TypeError("not a bool")
    return value
