"""Journal events: the stored envelope (``Event``), a draft of one (``EventDraft``), and the
typed payload of each event type.

The envelope fields are the on-disk contract (docs/ARCHITECTURE.md, "Event catalogue").
``data`` holds the payload as plain JSON; ``payload(event)`` parses it into the frozen model
registered for the event's type (``mailboxes.payloads``), first upgrading older shapes.

The envelopes are plain frozen classes, not pydantic models: reading the journal and folding it
(``teamctl tasks``, ``teamctl status``) never imports pydantic. The payload models and the
registry are re-exported here (``from mailboxes.events import TaskCreated`` works) but loaded on
first use only, by whoever builds or parses a payload (docs/ARCHITECTURE.md, "Start-up and
benchmarks").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from mailboxes.errors import InvalidEvent

if TYPE_CHECKING:
    from mailboxes.payloads import (
        PAYLOADS as PAYLOADS,
    )
    from mailboxes.payloads import (
        CronCancelled as CronCancelled,
    )
    from mailboxes.payloads import (
        CronFired as CronFired,
    )
    from mailboxes.payloads import (
        CronScheduled as CronScheduled,
    )
    from mailboxes.payloads import (
        GoalCleared as GoalCleared,
    )
    from mailboxes.payloads import (
        GoalEvaluated as GoalEvaluated,
    )
    from mailboxes.payloads import (
        GoalSet as GoalSet,
    )
    from mailboxes.payloads import (
        InboxAcknowledged as InboxAcknowledged,
    )
    from mailboxes.payloads import (
        JobFinished as JobFinished,
    )
    from mailboxes.payloads import (
        JobStarted as JobStarted,
    )
    from mailboxes.payloads import (
        JournalTailRepaired as JournalTailRepaired,
    )
    from mailboxes.payloads import (
        MemberSpawned as MemberSpawned,
    )
    from mailboxes.payloads import (
        MemberStatusChanged as MemberStatusChanged,
    )
    from mailboxes.payloads import (
        MemberStopped as MemberStopped,
    )
    from mailboxes.payloads import (
        Payload as Payload,
    )
    from mailboxes.payloads import (
        PermissionDecided as PermissionDecided,
    )
    from mailboxes.payloads import (
        PermissionRequested as PermissionRequested,
    )
    from mailboxes.payloads import (
        PlanRequested as PlanRequested,
    )
    from mailboxes.payloads import (
        PlanReviewed as PlanReviewed,
    )
    from mailboxes.payloads import (
        PlanSubmitted as PlanSubmitted,
    )
    from mailboxes.payloads import (
        ShutdownAcknowledged as ShutdownAcknowledged,
    )
    from mailboxes.payloads import (
        ShutdownRequested as ShutdownRequested,
    )
    from mailboxes.payloads import (
        TaskClaimed as TaskClaimed,
    )
    from mailboxes.payloads import (
        TaskCompleted as TaskCompleted,
    )
    from mailboxes.payloads import (
        TaskCreated as TaskCreated,
    )
    from mailboxes.payloads import (
        TaskDeleted as TaskDeleted,
    )
    from mailboxes.payloads import (
        TaskReleased as TaskReleased,
    )
    from mailboxes.payloads import (
        TaskUpdated as TaskUpdated,
    )
    from mailboxes.payloads import (
        TaskVerified as TaskVerified,
    )
    from mailboxes.payloads import (
        TeamCreated as TeamCreated,
    )
    from mailboxes.payloads import (
        Upgrade as Upgrade,
    )
    from mailboxes.payloads import (
        UsageRecorded as UsageRecorded,
    )
    from mailboxes.payloads import (
        WorkflowFinished as WorkflowFinished,
    )
    from mailboxes.payloads import (
        WorkflowLog as WorkflowLog,
    )
    from mailboxes.payloads import (
        WorkflowPhase as WorkflowPhase,
    )
    from mailboxes.payloads import (
        WorkflowResumed as WorkflowResumed,
    )
    from mailboxes.payloads import (
        WorkflowStarted as WorkflowStarted,
    )
    from mailboxes.payloads import (
        WorkflowStepCached as WorkflowStepCached,
    )
    from mailboxes.payloads import (
        WorkflowStepCompleted as WorkflowStepCompleted,
    )
    from mailboxes.payloads import (
        WorkflowStepStarted as WorkflowStepStarted,
    )
    from mailboxes.payloads import (
        WorktreeBound as WorktreeBound,
    )
    from mailboxes.payloads import (
        WorktreeCreated as WorktreeCreated,
    )
    from mailboxes.payloads import (
        WorktreeMerged as WorktreeMerged,
    )
    from mailboxes.payloads import (
        WorktreeRemoved as WorktreeRemoved,
    )
    from mailboxes.payloads import (
        parse_payload as parse_payload,
    )
    from mailboxes.payloads import (
        upgrade as upgrade,
    )
    from mailboxes.payloads import (
        upgrade_data as upgrade_data,
    )

_FIELDS = ("seq", "ts", "type", "actor", "op_id", "data", "v")
_DRAFT_FIELDS = ("type", "actor", "data", "op_id", "v")
_KEYS = frozenset(_FIELDS)


def _as_dict(data: object) -> Any:
    """``data`` as a plain dict (None: empty; another mapping: copied); anything else as it is,
    for the type check to refuse."""
    if data is None:
        return {}
    if data.__class__ is not dict and isinstance(data, Mapping):
        return dict(data)
    return data


_set = object.__setattr__


def _refuse(what: str, name: str, value: object) -> NoReturn:
    raise InvalidEvent(f"{what} {name}: {value!r} is not a valid {_KINDS[name]}")


_KINDS = {
    "seq": "integer",
    "ts": "number",
    "type": "string",
    "actor": "string",
    "op_id": "string or null",
    "data": "JSON object",
    "v": "integer",
}


def _checked(
    what: str, type: object, actor: object, op_id: object, data: object, v: object
) -> None:
    if type.__class__ is not str:
        _refuse(what, "type", type)
    if actor.__class__ is not str:
        _refuse(what, "actor", actor)
    if op_id is not None and op_id.__class__ is not str:
        _refuse(what, "op_id", op_id)
    if not isinstance(data, dict) or not all(k.__class__ is str for k in data):
        _refuse(what, "data", data)
    if v.__class__ is not int:
        _refuse(what, "v", v)


class EventDraft:
    """An event before it is stored: the store assigns ``seq`` and ``ts``. Frozen; equal when
    every field is."""

    __slots__ = _DRAFT_FIELDS

    type: str
    actor: str
    data: dict[str, Any]
    op_id: str | None
    v: int

    def __init__(
        self,
        *,
        type: str,
        actor: str,
        data: Mapping[str, Any] | None = None,
        op_id: str | None = None,
        v: int = 1,
    ) -> None:
        data = _as_dict(data)
        _checked("event draft", type, actor, op_id, data, v)
        _set(self, "type", type)
        _set(self, "actor", actor)
        _set(self, "data", data)
        _set(self, "op_id", op_id)
        _set(self, "v", v)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"EventDraft is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"EventDraft is frozen: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not EventDraft:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _DRAFT_FIELDS)

    __hash__ = None  # type: ignore[assignment]  # data is a dict

    def __repr__(self) -> str:
        return "EventDraft(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _DRAFT_FIELDS) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_draft_from_tuple, tuple(getattr(self, f) for f in _DRAFT_FIELDS))

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """The fields as a dict (``data`` copied; ``mode="json"``: as JSON would give it back)."""
        dumped = {f: getattr(self, f) for f in _DRAFT_FIELDS}
        dumped["data"] = _plain(self.data) if mode == "json" else dict(self.data)
        return dumped


def _draft_from_tuple(
    type: str, actor: str, data: dict[str, Any], op_id: str | None, v: int
) -> EventDraft:
    return EventDraft(type=type, actor=actor, data=data, op_id=op_id, v=v)


class _EventSlots:
    """The storage of an ``Event``: ``Event.from_json`` fills a bare one (plain slot stores, a
    quarter of the cost of going around ``Event.__setattr__``) and then makes it an ``Event``."""

    __slots__ = _FIELDS

    seq: int
    ts: float
    type: str
    actor: str
    op_id: str | None
    data: dict[str, Any]
    v: int


class Event(_EventSlots):
    """A stored event. ``seq`` is dense from 1; ``ts`` is seconds since the epoch. Frozen; equal
    when every field is."""

    __slots__ = ()

    def __init__(
        self,
        *,
        seq: int,
        ts: float,
        type: str,
        actor: str,
        op_id: str | None = None,
        data: Mapping[str, Any] | None = None,
        v: int = 1,
    ) -> None:
        data = _as_dict(data)
        if seq.__class__ is not int:
            _refuse("event", "seq", seq)
        if ts.__class__ is int:
            ts = float(ts)
        elif ts.__class__ is not float:
            _refuse("event", "ts", ts)
        _checked("event", type, actor, op_id, data, v)
        _set(self, "seq", seq)
        _set(self, "ts", ts)
        _set(self, "type", type)
        _set(self, "actor", actor)
        _set(self, "op_id", op_id)
        _set(self, "data", data)
        _set(self, "v", v)

    @classmethod
    def from_json(cls, obj: object) -> Event:
        """The event a parsed journal line holds, checked: exactly the envelope keys (``op_id``,
        ``data`` and ``v`` may be left out) with their JSON types. Raises ``InvalidEvent``."""
        if obj.__class__ is not dict:
            raise InvalidEvent(f"an event is a JSON object, not {obj.__class__.__name__}")
        got: dict[str, Any] = obj
        if len(got) == 7:
            try:
                seq, ts, type_ = got["seq"], got["ts"], got["type"]
                actor, op_id, data, v = got["actor"], got["op_id"], got["data"], got["v"]
            except KeyError:
                return cls._odd(got)
            if (
                seq.__class__ is int
                and ts.__class__ is float
                and type_.__class__ is str
                and actor.__class__ is str
                and (op_id is None or op_id.__class__ is str)
                and data.__class__ is dict
                and v.__class__ is int
            ):
                event = _new(_EventSlots)
                event.seq = seq
                event.ts = ts
                event.type = type_
                event.actor = actor
                event.op_id = op_id
                event.data = data
                event.v = v
                event.__class__ = Event
                return event  # type: ignore[return-value]
        return cls._odd(got)

    @classmethod
    def _odd(cls, got: dict[str, Any]) -> Event:
        """``from_json`` for anything but the exact shape the journal writes."""
        extra = sorted(got.keys() - _KEYS)
        if extra:
            raise InvalidEvent(f"unknown field {extra[0]!r}")
        missing = [k for k in ("seq", "ts", "type", "actor") if k not in got]
        if missing:
            raise InvalidEvent(f"field {missing[0]!r} is missing")
        return cls(
            seq=got["seq"],
            ts=got["ts"],
            type=got["type"],
            actor=got["actor"],
            op_id=got.get("op_id"),
            data=_json_object(got.get("data", {})),
            v=got.get("v", 1),
        )

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Event is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Event is frozen: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Event:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    __hash__ = None  # type: ignore[assignment]  # data is a dict

    def __repr__(self) -> str:
        return "Event(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _FIELDS) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_event_from_tuple, tuple(getattr(self, f) for f in _FIELDS))

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """The fields as a dict (``data`` copied; ``mode="json"``: as JSON would give it back)."""
        dumped = {f: getattr(self, f) for f in _FIELDS}
        dumped["data"] = _plain(self.data) if mode == "json" else dict(self.data)
        return dumped


_new = object.__new__


def _json_object(data: object) -> dict[str, Any]:
    if data.__class__ is not dict:
        _refuse("event", "data", data)
    return data


def _event_from_tuple(
    seq: int, ts: float, type: str, actor: str, op_id: str | None, data: dict[str, Any], v: int
) -> Event:
    return Event(seq=seq, ts=ts, type=type, actor=actor, op_id=op_id, data=data, v=v)


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as JSON reads it back (tuples become lists), a deep copy."""
    import json

    plain: dict[str, Any] = json.loads(json.dumps(data))
    return plain


def payload(event: Event | EventDraft) -> Payload:
    """The typed payload of ``event`` (upgraded to the current shape). Raises ``InvalidEvent``."""
    from mailboxes.payloads import parse_payload

    return parse_payload(event.type, event.v, event.data)


def draft(type: str, actor: str, body: Payload, op_id: str | None = None) -> EventDraft:
    """An ``EventDraft`` carrying ``body`` at its current version.

    ``type`` must be the body's registered type (a cheap guard against mixing them up).
    """
    if type != body.TYPE:
        raise InvalidEvent(f"payload {body.__class__.__name__} is for {body.TYPE!r}, not {type!r}")
    return EventDraft(
        type=type,
        actor=actor,
        data=body.model_dump(mode="json"),
        op_id=op_id,
        v=body.VERSION,
    )


def validate_draft(candidate: EventDraft) -> EventDraft:
    """Check that ``candidate`` has a known type and a payload that parses; returns it."""
    payload(candidate)
    return candidate


_LAZY = frozenset(
    (
        "CronCancelled",
        "CronFired",
        "CronScheduled",
        "GoalCleared",
        "GoalEvaluated",
        "GoalSet",
        "InboxAcknowledged",
        "JobFinished",
        "JobStarted",
        "JournalTailRepaired",
        "MemberSpawned",
        "MemberStatusChanged",
        "MemberStopped",
        "PAYLOADS",
        "Payload",
        "PermissionDecided",
        "PermissionRequested",
        "PlanRequested",
        "PlanReviewed",
        "PlanSubmitted",
        "ShutdownAcknowledged",
        "ShutdownRequested",
        "TaskClaimed",
        "TaskCompleted",
        "TaskCreated",
        "TaskDeleted",
        "TaskReleased",
        "TaskUpdated",
        "TaskVerified",
        "TeamCreated",
        "Upgrade",
        "UsageRecorded",
        "WorkflowFinished",
        "WorkflowLog",
        "WorkflowPhase",
        "WorkflowResumed",
        "WorkflowStarted",
        "WorkflowStepCached",
        "WorkflowStepCompleted",
        "WorkflowStepStarted",
        "WorktreeBound",
        "WorktreeCreated",
        "WorktreeMerged",
        "WorktreeRemoved",
        "parse_payload",
        "upgrade",
        "upgrade_data",
    )
)
"""The names of ``mailboxes.payloads`` this module re-exports, loaded on first use."""

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from mailboxes import payloads

        value = getattr(payloads, name)
        globals()[name] = value
        return value
