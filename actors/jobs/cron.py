"""Pure cron logic: parse and validate 5-field expressions, time zones, slots, the cron table
folded from the journal, and the missed-slot policy
(docs/ARCHITECTURE.md, "Jobs and cron").

Nothing here touches a clock, a thread or a file: callers pass ``now`` (seconds since the
epoch). A *slot* is one scheduled instant of a job, named by its ISO time in the job's zone
(``2026-01-05T09:00:00+01:00``); ``(cron_id, slot)`` identifies a firing.

Ownership: the ``actor`` of a ``cron.scheduled`` event is the job's owner (whose mailbox gets
``cron_fired``); host actors (``cli``, ``runtime``, ``scheduler``) schedule for the lead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from actors.errors import TeamError
from mailboxes.events import CronCancelled, CronFired, CronScheduled, Event, payload
from mailboxes.messages import MessageDraft

HOST_ACTORS = frozenset({"cli", "runtime", "scheduler"})
"""Actors that schedule on behalf of the lead (their jobs are owned by ``lead``)."""
MAX_COUNTED_SLOTS = 10_000
"""Missed slots are counted one by one up to this many; beyond, ``missed`` is this bound."""

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS: tuple[tuple[str, int, int, Mapping[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    ("day-of-week", 0, 7, {d: i for i, d in enumerate(_DAYS)}),
)
_PART = re.compile(r"^(?P<range>\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(?P<step>\d+))?$")


class CronError(TeamError):
    """A cron expression, time zone or cron id that cannot be used; says what and why."""


CronStatus = Literal["active", "cancelled", "done"]


class CronEntry(NamedTuple):
    """One cron job as folded from the journal."""

    cron_id: str
    cron: str
    prompt: str
    recurring: bool
    tz: str | None
    owner: str
    created_at: float
    status: CronStatus = "active"
    last_slot: str | None = None
    """The last fired slot (ISO), or None if it never fired."""
    fired: int = 0
    """How many ``cron.fired`` events it has."""
    last_fired_at: float | None = None
    """Journal time of the last ``cron.fired`` event."""
    last_missed: int = 0
    """The ``missed`` count of the last ``cron.fired`` event."""


CronTable = Mapping[str, CronEntry]
EMPTY_TABLE: CronTable = MappingProxyType({})


class Firing(NamedTuple):
    """A decision to fire ``cron_id`` at ``slot`` after skipping ``missed`` slots."""

    cron_id: str
    slot: str
    missed: int


# --- expressions and zones ---------------------------------------------------------------------


def _value(text: str, name: str, lo: int, hi: int, names: Mapping[str, int]) -> int:
    if text.isdigit():
        number = int(text)
    elif text in names:
        number = names[text]
    else:
        raise CronError(f"{name} field: {text!r} is not a number")
    if not lo <= number <= hi:
        raise CronError(f"{name} field: {number} is out of range {lo}-{hi}")
    return number


def _check_field(text: str, name: str, lo: int, hi: int, names: Mapping[str, int]) -> None:
    for part in text.lower().split(","):
        match = _PART.match(part)
        if match is None:
            raise CronError(f"{name} field: cannot read {part!r}")
        step = match.group("step")
        if step is not None and int(step) == 0:
            raise CronError(f"{name} field: step 0 in {part!r}")
        if match.group("range") == "*":
            continue
        bounds = [_value(v, name, lo, hi, names) for v in match.group("range").split("-")]
        if len(bounds) == 2 and bounds[0] > bounds[1]:
            raise CronError(f"{name} field: range {part!r} runs backwards")


def parse_cron(expr: str) -> str:
    """The normalised 5-field expression, or ``CronError`` naming the bad field.

    Fields: minute (0-59), hour (0-23), day-of-month (1-31), month (1-12 or jan-dec),
    day-of-week (0-7 or sun-sat). Each is ``*``, a value, a range ``a-b``, a list, with an
    optional ``/step``. An expression that can never fire (``0 0 31 2 *``) is refused too.
    """
    fields = expr.split()
    if len(fields) != 5:
        raise CronError(
            f"cron expression {expr!r} has {len(fields)} fields; expected 5 "
            "(minute hour day-of-month month day-of-week)"
        )
    for text, (name, lo, hi, names) in zip(fields, _FIELDS, strict=True):
        _check_field(text, name, lo, hi, names)
    normalised = " ".join(fields)
    try:
        croniter(normalised, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterError as exc:
        raise CronError(f"cron expression {expr!r} is not usable: {exc}") from None
    return normalised


def local_zone() -> tzinfo:
    """The machine's zone: ``$TZ`` if it names a zone, else ``/etc/localtime``, else UTC."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    try:
        with Path("/etc/localtime").open("rb") as fh:
            return ZoneInfo.from_file(fh, key="localtime")
    except (OSError, ValueError):
        return UTC


def zone(tz: str | None, local: tzinfo | None = None) -> tzinfo:
    """The zone named ``tz`` (IANA name or ``UTC``); ``None`` is ``local`` (default: the
    machine's). Unknown names → ``CronError``."""
    if tz is None:
        return local if local is not None else local_zone()
    if tz.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(
            f"unknown time zone {tz!r} (use an IANA name like Europe/Paris, or UTC)"
        ) from None


def slot_time(slot: str) -> float:
    """Seconds since the epoch of an ISO slot name."""
    return datetime.fromisoformat(slot).timestamp()


def slots_after(expr: str, tz: tzinfo, after: float) -> Iterable[datetime]:
    """The slots strictly after ``after``, in order, as aware datetimes in ``tz`` (endless)."""
    it = croniter(expr, datetime.fromtimestamp(after, tz))
    while True:
        yield it.get_next(datetime)


def next_slot(expr: str, tz: tzinfo, after: float) -> datetime:
    """The first slot strictly after ``after``."""
    return next(iter(slots_after(expr, tz, after)))


# --- the table ---------------------------------------------------------------------------------


def owner_of(event: Event) -> str:
    """Whose mailbox a job scheduled by ``event`` notifies."""
    return "lead" if event.actor in HOST_ACTORS else event.actor


def fold_crons(table: CronTable, events: Iterable[Event]) -> CronTable:
    """``table`` with the cron events among ``events`` applied (others are ignored); pure."""
    out: dict[str, CronEntry] | None = None
    for event in events:
        if not event.type.startswith("cron."):
            continue
        if out is None:
            out = dict(table)
        body = payload(event)
        if isinstance(body, CronScheduled):
            out[body.cron_id] = CronEntry(
                cron_id=body.cron_id,
                cron=body.cron,
                prompt=body.prompt,
                recurring=body.recurring,
                tz=body.tz,
                owner=owner_of(event),
                created_at=event.ts,
            )
        elif isinstance(body, CronCancelled) and body.cron_id in out:
            out[body.cron_id] = out[body.cron_id]._replace(status="cancelled")
        elif isinstance(body, CronFired) and body.cron_id in out:
            entry = out[body.cron_id]
            status: CronStatus = "done" if not entry.recurring else entry.status
            out[body.cron_id] = entry._replace(
                status=status,
                last_slot=body.slot,
                fired=entry.fired + 1,
                last_fired_at=event.ts,
                last_missed=body.missed,
            )
    return table if out is None else MappingProxyType(out)


def cursor(entry: CronEntry) -> float:
    """The time after which ``entry``'s next slot is looked for."""
    return slot_time(entry.last_slot) if entry.last_slot is not None else entry.created_at


def next_fire(entry: CronEntry, local: tzinfo | None = None) -> datetime | None:
    """When ``entry`` fires next (possibly already due), or None if it is finished."""
    if entry.status != "active":
        return None
    return next_slot(entry.cron, zone(entry.tz, local), cursor(entry))


def due(entry: CronEntry, now: float, local: tzinfo | None = None) -> Firing | None:
    """The missed-slot policy: what to fire for ``entry`` at ``now`` (None: nothing is due).

    A one-shot job fires its slot once, however late. A recurring job with several slots due
    (the scheduler was down) fires only the latest and records the ``missed`` ones before it,
    then goes on with the next future slot.
    """
    if entry.status != "active":
        return None
    tz = zone(entry.tz, local)
    latest: datetime | None = None
    count = 0
    for slot in slots_after(entry.cron, tz, cursor(entry)):
        if slot.timestamp() > now:
            break
        latest = slot
        count += 1
        if not entry.recurring or count >= MAX_COUNTED_SLOTS:
            break
    if latest is None:
        return None
    if count >= MAX_COUNTED_SLOTS:
        # Too many to walk one by one: jump to the last slot before now.
        latest = _last_slot_before(entry.cron, tz, now, latest)
        count = MAX_COUNTED_SLOTS
    return Firing(entry.cron_id, latest.isoformat(), count - 1)


def _last_slot_before(expr: str, tz: tzinfo, now: float, fallback: datetime) -> datetime:
    it = croniter(expr, datetime.fromtimestamp(now + 1, tz))  # + 1: a slot at now counts
    found = it.get_prev(datetime)
    return found if isinstance(found, datetime) and found > fallback else fallback


def next_wake(table: CronTable, now: float, local: tzinfo | None = None) -> float | None:
    """Seconds from ``now`` until the earliest active slot (0 if one is due), or None."""
    times = [nf.timestamp() for e in table.values() if (nf := next_fire(e, local)) is not None]
    return max(0.0, min(times) - now) if times else None


# --- views and messages -----------------------------------------------------------------------


@dataclass(frozen=True)
class CronView:
    """One job as ``list`` shows it (``teamctl crons``, the live view, the lead's
    ``list_crons`` through ``TeamServices``)."""

    cron_id: str
    cron: str
    prompt: str
    recurring: bool
    tz: str | None
    owner: str
    status: str
    next_fire: str | None
    last_slot: str | None
    fired: int

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def views(
    table: CronTable, *, include_done: bool = False, local: tzinfo | None = None
) -> tuple[CronView, ...]:
    """The jobs of ``table`` (active ones only unless ``include_done``) in creation order."""
    local = local or local_zone()
    out = []
    for entry in table.values():
        if entry.status != "active" and not include_done:
            continue
        nxt = next_fire(entry, local)
        out.append(
            CronView(
                cron_id=entry.cron_id,
                cron=entry.cron,
                prompt=entry.prompt,
                recurring=entry.recurring,
                tz=entry.tz,
                owner=entry.owner,
                status=entry.status,
                next_fire=None if nxt is None else nxt.isoformat(),
                last_slot=entry.last_slot,
                fired=entry.fired,
            )
        )
    return tuple(out)


def fired_draft(entry: CronEntry, missed: int, slot: str) -> MessageDraft:
    """The ``cron_fired`` message for a firing of ``entry``."""
    text = f"Cron job {entry.cron_id} ({entry.cron}) fired for {slot}: {entry.prompt}"
    if missed:
        text += f" ({missed} earlier slot(s) were missed while the team was down)"
    return MessageDraft(
        to=entry.owner,
        type="cron_fired",
        body={
            "cron_id": entry.cron_id,
            "slot": slot,
            "prompt": entry.prompt,
            "missed": missed,
            "recurring": entry.recurring,
            "text": text,
        },
    )
