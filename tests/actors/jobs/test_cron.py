"""Pure cron logic: validation, zones, slots, the table fold and the missed-slot policy."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from actors.jobs.cron import (
    MAX_COUNTED_SLOTS,
    CronEntry,
    CronError,
    due,
    fold_crons,
    next_fire,
    next_slot,
    next_wake,
    parse_cron,
    slot_time,
    zone,
)
from mailboxes.events import CronCancelled, CronFired, CronScheduled, Event

PARIS = ZoneInfo("Europe/Paris")
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC).timestamp()  # a Monday


def entry(cron: str = "0 9 * * *", *, recurring: bool = True, tz: str | None = "UTC") -> CronEntry:
    return CronEntry("c1", cron, "p", recurring, tz, "lead", created_at=T0)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("61 * * * *", "minute field: 61 is out of range 0-59"),
        ("* 24 * * *", "hour field: 24 is out of range 0-23"),
        ("* * 0 * *", "day-of-month field: 0 is out of range 1-31"),
        ("* * * 13 *", "month field: 13 is out of range 1-12"),
        ("* * * * 8", "day-of-week field: 8 is out of range 0-7"),
        ("* * * *", "has 4 fields; expected 5"),
        ("* * * * * *", "has 6 fields; expected 5"),
        ("*/0 * * * *", "step 0"),
        ("5-1 * * * *", "runs backwards"),
        ("x * * * *", "'x' is not a number"),
        ("0 0 31 2 *", "not usable"),
    ],
)
def test_invalid_expressions_name_the_problem(expr: str, message: str) -> None:
    with pytest.raises(CronError, match=message.replace("*", r"\*")):
        parse_cron(expr)


@pytest.mark.parametrize(
    "expr", ["*/5 * * * *", "0 9 * * mon-fri", "0 0 1 jan,jul *", "15,45 8-18/2 * * 0"]
)
def test_valid_expressions_are_normalised(expr: str) -> None:
    assert parse_cron(f"  {expr}  ") == expr


def test_zones() -> None:
    assert zone("UTC") is UTC
    assert zone("Europe/Paris") == PARIS
    assert zone(None, local=PARIS) == PARIS
    with pytest.raises(CronError, match="unknown time zone 'Mars/Olympus'"):
        zone("Mars/Olympus")


def test_next_slot_respects_the_zone() -> None:
    # 09:00 in Paris (UTC+1 in March before DST) is 08:00 UTC.
    after = datetime(2026, 3, 2, 0, 0, tzinfo=UTC).timestamp()
    paris = next_slot("0 9 * * *", PARIS, after)
    utc = next_slot("0 9 * * *", UTC, after)
    assert paris.isoformat() == "2026-03-02T09:00:00+01:00"
    assert utc.isoformat() == "2026-03-02T09:00:00+00:00"
    assert utc.timestamp() - paris.timestamp() == 3600


def test_next_slot_across_dst_keeps_local_wall_time() -> None:
    after = datetime(2026, 3, 28, 12, 0, tzinfo=UTC).timestamp()  # DST starts Mar 29 in Paris
    first = next_slot("0 9 * * *", PARIS, after)
    second = next_slot("0 9 * * *", PARIS, first.timestamp())
    assert first.isoformat() == "2026-03-29T09:00:00+02:00"
    assert second.isoformat() == "2026-03-30T09:00:00+02:00"


def test_next_slot_is_strictly_after() -> None:
    at_slot = datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp()
    assert next_slot("0 9 * * *", UTC, at_slot).timestamp() == at_slot + 86400


def test_nothing_due_before_the_first_slot() -> None:
    e = entry()
    assert due(e, T0 + 3599, UTC) is None
    firing = due(e, T0 + 3600, UTC)
    assert firing is not None
    assert (firing.slot, firing.missed) == ("2026-03-02T09:00:00+00:00", 0)


def test_recurring_with_missed_slots_fires_latest_once() -> None:
    e = entry("0 * * * *")  # hourly; created 08:00
    firing = due(e, T0 + 5 * 3600 + 30, UTC)  # 13:00:30 → 09..13 are due
    assert firing is not None
    assert firing.slot == "2026-03-02T13:00:00+00:00"
    assert firing.missed == 4
    fired = e._replace(last_slot=firing.slot, fired=1)
    assert due(fired, T0 + 5 * 3600 + 60, UTC) is None
    assert next_fire(fired, UTC) == datetime(2026, 3, 2, 14, 0, tzinfo=UTC)


def test_one_shot_fires_its_slot_once_however_late() -> None:
    e = entry("0 9 * * *", recurring=False)
    firing = due(e, T0 + 3 * 86400, UTC)
    assert firing is not None
    assert (firing.slot, firing.missed) == ("2026-03-02T09:00:00+00:00", 0)
    assert due(e._replace(status="done"), T0 + 4 * 86400, UTC) is None


def test_very_many_missed_slots_are_counted_without_walking_them_all() -> None:
    e = entry("* * * * *")
    firing = due(e, T0 + 200 * 86400, UTC)  # 288,000 minutes later
    assert firing is not None
    assert slot_time(firing.slot) == T0 + 200 * 86400
    assert firing.missed == MAX_COUNTED_SLOTS - 1


def ev(seq: int, body: CronScheduled | CronCancelled | CronFired, actor: str = "lead") -> Event:
    return Event(
        seq=seq, ts=T0 + seq, type=body.TYPE, actor=actor, data=body.model_dump(mode="json")
    )


def test_fold_tracks_status_last_slot_and_owner() -> None:
    events = [
        ev(1, CronScheduled(cron_id="a", cron="0 * * * *", prompt="p", recurring=True)),
        ev(2, CronScheduled(cron_id="b", cron="0 * * * *", prompt="q", recurring=False), "cli"),
        ev(3, CronScheduled(cron_id="c", cron="0 * * * *", prompt="r", recurring=True), "alice"),
        ev(4, CronFired(cron_id="a", slot="2026-03-02T09:00:00+00:00", missed=2), "scheduler"),
        ev(5, CronFired(cron_id="b", slot="2026-03-02T09:00:00+00:00"), "scheduler"),
        ev(6, CronCancelled(cron_id="c"), "cli"),
    ]
    table = fold_crons({}, events)
    assert table["a"].status == "active"
    assert (table["a"].last_slot, table["a"].fired, table["a"].last_missed) == (
        "2026-03-02T09:00:00+00:00",
        1,
        2,
    )
    assert table["b"].status == "done"
    assert table["b"].owner == "lead"  # scheduled from the CLI: the lead owns it
    assert table["c"].status == "cancelled"
    assert table["c"].owner == "alice"
    assert next_wake(table, T0, UTC) == 2 * 3600  # only a (next at 10:00) is active


def test_fold_is_pure() -> None:
    base = fold_crons(
        {}, [ev(1, CronScheduled(cron_id="a", cron="0 * * * *", prompt="p", recurring=True))]
    )
    after = fold_crons(base, [ev(2, CronCancelled(cron_id="a"))])
    assert base["a"].status == "active"
    assert after["a"].status == "cancelled"
    assert fold_crons(after, []) is after
