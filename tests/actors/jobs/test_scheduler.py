"""The Scheduler actor over a real journal and real Maildir inboxes, with a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pykka
import pytest

from actors.jobs.cron import CronError
from actors.jobs.scheduler import KeyedDeliver, MaildirDelivery, SchedulerHandle, message_id
from mailboxes.events import Event
from mailboxes.journal.store import FileJournal
from mailboxes.maildir import Maildir
from mailboxes.messages import MessageDraft
from tests.actors.jobs.cron_support import FakeTimers, SeqIds, stop_actors
from tests.support.fakes import FakeClock

__all__ = ["stop_actors"]

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
HOUR = 3600.0


class Env:
    def __init__(self, root: Path) -> None:
        self.clock = FakeClock(T0)
        team = root / ".team"
        team.mkdir()
        self.journal = FileJournal(team, self.clock)
        self.maildir = Maildir(team / "mailboxes", self.clock)
        self.maildir.ensure_inbox("lead")
        self.deliver = MaildirDelivery(team / "mailboxes", self.clock)
        self.ids = SeqIds()
        self.timers = FakeTimers()

    def start(self, deliver: KeyedDeliver | None = None) -> SchedulerHandle:
        return SchedulerHandle.start(
            self.journal,
            deliver or self.deliver,
            clock=self.clock,
            ids=self.ids,
            timer=self.timers,
            local_tz=UTC,
        )

    def events(self, type_: str) -> list[Event]:
        return [e for e in self.journal.read_from(1) if e.type == type_]

    def inbox(self) -> list[MessageDraft | object]:
        return list(self.maildir.pending("lead"))


@pytest.fixture
def env(tmp_path: Path, stop_actors: None) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    pykka.ActorRegistry.stop_all()
    e.journal.close()


def test_schedule_lists_next_firing_and_arms_one_timer(env: Env) -> None:
    sched = env.start()
    cron_id = sched.schedule("30 9 * * *", "daily standup", tz="Europe/Paris")
    [view] = sched.list()
    assert view.cron_id == cron_id
    assert view.next_fire == "2026-03-02T09:30:00+01:00"  # 08:30 UTC
    assert view.owner == "lead"
    [scheduled] = env.events("cron.scheduled")
    assert scheduled.data["cron"] == "30 9 * * *"
    live = env.timers.live()
    assert len(live) == 1
    assert live[0].delay_s == 30.0  # capped: the slot is 30 minutes away


def test_out_of_range_expression_is_refused(env: Env) -> None:
    sched = env.start()
    with pytest.raises(CronError, match="hour field: 25 is out of range 0-23"):
        sched.schedule("0 25 * * *", "never")
    assert env.events("cron.scheduled") == []


def test_firing_journals_then_delivers_with_a_deterministic_id(env: Env) -> None:
    sched = env.start()
    cron_id = sched.schedule("0 9 * * *", "check the build", tz="UTC")
    assert sched.fire_due() == ()
    env.clock.advance(HOUR)
    slot = "2026-03-02T09:00:00+00:00"
    assert sched.fire_due() == ((cron_id, slot),)
    [fired] = env.events("cron.fired")
    assert fired.op_id == f"cron:{cron_id}:{slot}"
    assert fired.data == {"cron_id": cron_id, "slot": slot, "missed": 0}
    [msg] = env.maildir.pending("lead")
    assert msg.id == message_id(cron_id, slot)
    assert msg.type == "cron_fired"
    assert msg.sender == "scheduler"
    assert (msg.body["cron_id"], msg.body["slot"], msg.body["prompt"]) == (
        cron_id,
        slot,
        "check the build",
    )
    assert sched.fire_due() == ()  # the same slot again: nothing
    assert len(env.events("cron.fired")) == 1
    assert sched.list()[0].next_fire == "2026-03-03T09:00:00+00:00"


def test_two_schedulers_racing_fire_a_slot_once(env: Env) -> None:
    first = env.start()
    second = env.start()
    cron_id = first.schedule("0 9 * * *", "once per slot", tz="UTC")
    env.clock.advance(HOUR)
    results = [first.fire_due(), second.fire_due(), first.fire_due()]
    assert sum(len(r) for r in results) == 1
    assert [e.data["cron_id"] for e in env.events("cron.fired")] == [cron_id]
    assert len(env.maildir.pending("lead")) == 1


def test_timer_wake_fires_through_the_actor(env: Env) -> None:
    sched = env.start()
    sched.schedule("0 9 * * *", "wake", tz="UTC")
    env.clock.advance(HOUR)
    env.timers.live()[-1].callback()  # what the real timer does: tell FireDue
    sched.list()  # processed after the FireDue above
    assert len(env.events("cron.fired")) == 1
    assert env.timers.live()[-1].delay_s == 30.0


def test_recurring_missed_slots_skip_to_the_next_and_record_missed(env: Env) -> None:
    sched = env.start()
    cron_id = sched.schedule("0 * * * *", "hourly", tz="UTC")
    sched.stop()
    env.clock.advance(5 * HOUR + 30)  # 13:00:30; 09..13 were due while down
    sched = env.start()
    [fired] = env.events("cron.fired")
    assert fired.data == {"cron_id": cron_id, "slot": "2026-03-02T13:00:00+00:00", "missed": 4}
    [msg] = env.maildir.pending("lead")
    assert msg.body["missed"] == 4
    assert sched.list()[0].next_fire == "2026-03-02T14:00:00+00:00"


def test_one_shot_fires_once_on_start_then_is_done(env: Env) -> None:
    sched = env.start()
    cron_id = sched.schedule("0 9 * * *", "remind me", recurring=False, tz="UTC")
    sched.stop()
    env.clock.advance(3 * 24 * HOUR)
    sched = env.start()
    assert [e.data["slot"] for e in env.events("cron.fired")] == ["2026-03-02T09:00:00+00:00"]
    assert sched.list() == ()
    [done] = sched.list(include_done=True)
    assert (done.cron_id, done.status, done.next_fire) == (cron_id, "done", None)
    env.clock.advance(24 * HOUR)
    assert sched.fire_due() == ()


def test_cancel_stops_firing(env: Env) -> None:
    sched = env.start()
    cron_id = sched.schedule("0 9 * * *", "x", tz="UTC")
    assert sched.cancel(cron_id) is True
    assert sched.cancel(cron_id) is False
    with pytest.raises(CronError, match="unknown cron job 'nope'"):
        sched.cancel("nope")
    env.clock.advance(HOUR)
    assert sched.fire_due() == ()
    assert sched.list() == ()


class CrashingDelivery:
    """Fails every delivery, like a process that dies right after the journal append."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, sender: str, draft: MessageDraft, message_id: str) -> None:
        self.calls += 1
        raise OSError("simulated crash before delivery")


def test_crash_between_journal_and_delivery_is_redelivered_on_start(env: Env) -> None:
    crashing = CrashingDelivery()
    sched = env.start(crashing)
    cron_id = sched.schedule("0 9 * * *", "at least once", tz="UTC")
    env.clock.advance(HOUR)
    sched.fire_due()
    assert crashing.calls == 1
    assert len(env.events("cron.fired")) == 1
    assert env.maildir.pending("lead") == []
    sched.stop()  # the process "dies"; its retry list is gone
    env.start()
    [msg] = env.maildir.pending("lead")
    assert msg.id == message_id(cron_id, "2026-03-02T09:00:00+00:00")
    assert len(env.events("cron.fired")) == 1  # redelivery is not a new firing


def test_redelivery_of_a_delivered_firing_is_deduplicated_by_id(env: Env) -> None:
    sched = env.start()
    sched.schedule("0 9 * * *", "dedupe", tz="UTC")
    env.clock.advance(HOUR)
    sched.fire_due()
    [first] = env.maildir.pending("lead")
    sched.stop()
    env.start()  # re-delivers the last firing under the same id
    assert [m.id for m in env.maildir.pending("lead")] == [first.id]
    env.maildir.ack("lead", [first.id])
    env.start()  # and again after the ack: the copy is dropped as a duplicate
    assert env.maildir.pending("lead") == []


def test_firings_older_than_the_window_are_not_redelivered(env: Env) -> None:
    sched = env.start()
    sched.schedule("0 9 * * *", "old", recurring=False, tz="UTC")
    env.clock.advance(HOUR)
    sched.fire_due()
    [msg] = env.maildir.pending("lead")
    env.maildir.ack("lead", [msg.id])
    sched.stop()
    env.clock.advance(2 * 24 * HOUR)
    env.start()
    assert env.maildir.counts("lead") == (0, 1)


def test_jobs_scheduled_by_another_process_are_picked_up(env: Env, tmp_path: Path) -> None:
    from actors.jobs.scheduler import schedule_cron

    sched = env.start()
    other = FileJournal(tmp_path / ".team", env.clock)
    try:
        cron_id = schedule_cron(other, SeqIds(), cron="0 9 * * *", prompt="from cli", tz="UTC")
    finally:
        other.close()
    env.clock.advance(HOUR)
    assert [c for c, _ in sched.fire_due()] == [cron_id]
