"""What every ``EventStore`` implementation shares: the append result, draft stamping with
``op_id`` idempotency."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mailboxes.errors import InvalidEvent
from mailboxes.events import Event, EventDraft, validate_draft
from mailboxes.journal.frame import canonical_json, encode, parse_json


@dataclass(frozen=True)
class Appended:
    """The result of one append (implements ``mailboxes.ports.AppendResult``)."""

    seen: tuple[Event, ...]
    """Events with seq > ``after`` that were stored before ``decide`` ran."""
    appended: tuple[Event, ...]
    """One event per draft, in draft order: new, or the stored one for a known ``op_id``."""


def check_after(after: int, last_seq: int) -> None:
    """``after`` must name a stored seq (or 0)."""
    if not 0 <= after <= last_seq:
        raise ValueError(f"after={after} is outside the stored range 0..{last_seq}")


def stamp(
    drafts: Sequence[EventDraft],
    *,
    next_seq: int,
    ts: float,
    lookup: Callable[[str], Event | None],
    lines: list[bytes] | None = None,
) -> tuple[list[Event], list[Event]]:
    """Turn ``drafts`` into events: returns ``(new events to store, result per draft)``.

    Every draft is validated first (``InvalidEvent``), so a bad batch stores nothing. A draft
    whose ``op_id`` is already stored (``lookup``) or earlier in the batch yields that event.
    ``lines``: receives the framed journal line of each new event (``frame.encode``), made
    from the JSON its ``data`` was normalised through rather than serialised again.
    """
    drafts = list(drafts)  # decide may hand back any iterable; it is walked twice
    for candidate in drafts:
        if not isinstance(candidate, EventDraft):
            raise TypeError(f"decide must return EventDrafts, got {type(candidate).__name__}")
        validate_draft(candidate)
    new: list[Event] = []
    result: list[Event] = []
    batch: dict[str, Event] = {}
    for candidate in drafts:
        op_id = candidate.op_id
        existing = None if op_id is None else (batch.get(op_id) or lookup(op_id))
        if existing is not None:
            result.append(existing)
            continue
        data, text = _as_json(candidate)
        event = Event(
            seq=next_seq + len(new),
            ts=ts,
            type=candidate.type,
            actor=candidate.actor,
            op_id=op_id,
            data=data,
            v=candidate.v,
        )
        if lines is not None:
            lines.append(encode(event, text))
        new.append(event)
        result.append(event)
        if op_id is not None:
            batch[op_id] = event
    return new, result


def _as_json(candidate: EventDraft) -> tuple[dict[str, Any], bytes]:
    """``data`` exactly as it reads back from disk (tuples become lists; NaN is refused:
    parsed as ``frame.decode_event`` parses a line), and its canonical JSON (UTF-8)."""
    try:
        text = canonical_json(candidate.data).encode("utf-8")
        plain: dict[str, Any] = parse_json(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidEvent(f"{candidate.type} data is not plain JSON: {exc}") from None
    return plain, text
