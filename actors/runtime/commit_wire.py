"""The writes ``SharedCommits`` can send to the host's commit service, as plain JSON
(``actors.runtime.commit_service``): a spec names the write and its arguments (``parse`` checks
them), and both ends build the same ``Decide`` from it (``actors.runtime.commits.wired``), so a
write decided by the service is decided exactly as it would be here; the answers travel as JSON
too (``encode_value``, ``decode_value``).

Three writes travel: a teammate's claim of its next task, a completion and a status change (what
a runtime process commits over and over)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from actors.board.rules import Completion
from actors.board.state import Task, TaskPlan
from actors.errors import TeamError
from mailboxes.events import EventDraft, payload

if TYPE_CHECKING:
    from mailboxes.events import Payload

__all__ = [
    "Spec",
    "claim_spec",
    "complete_spec",
    "decode_value",
    "encode_value",
    "parse",
    "status_spec",
    "task_from_wire",
    "task_to_wire",
]

Spec = Mapping[str, Any]


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


def parse(spec: Spec) -> tuple[str, dict[str, Any]]:
    """The write ``spec`` names and its arguments, checked (``TeamError`` for a spec that
    names no write or carries bad ones): ``claim_next`` (owner, role, exclude, also),
    ``complete`` (tid, owner, epoch, summary, commit, remote) or ``status`` (name, status,
    reason)."""
    try:
        op = spec["op"]
        if op == "claim_next":
            owner = _str(spec["owner"])
            return op, {
                "owner": owner,
                "role": _opt_str(spec["role"]),
                "exclude": frozenset(_str(t) for t in spec["exclude"]),
                "also": tuple(_payload(owner, item) for item in spec["also"]),
            }
        if op == "complete":
            epoch = spec["epoch"]
            if type(epoch) is not int:
                raise TypeError(f"epoch {epoch!r} is not an integer")
            return op, {
                "tid": _str(spec["task_id"]),
                "owner": _str(spec["owner"]),
                "epoch": epoch,
                "summary": _str(spec["summary"]),
                "commit": _opt_str(spec["commit"]),
                "remote": _opt_str(spec["remote"]),
            }
        if op == "status":
            return op, {
                "name": _str(spec["name"]),
                "status": _str(spec["status"]),
                "reason": _str(spec["reason"]),
            }
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


# --- values on the wire ----------------------------------------------------------------------


_PLAN = Task._fields.index("plan")
_TUPLES = tuple(Task._fields.index(name) for name in ("blocked_by", "blocks"))
_METADATA = Task._fields.index("metadata")
_FLOATS = tuple(Task._fields.index(name) for name in ("created_at", "updated_at"))


def task_to_wire(task: Task) -> list[Any]:
    """``task`` as a JSON list (``task_from_wire`` reads it back equal)."""
    fields: list[Any] = list(task)
    fields[_PLAN] = list(task.plan)
    fields[_METADATA] = dict(task.metadata)
    return fields


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
