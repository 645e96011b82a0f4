"""The runtime's record book, with plain data: stale reports are dropped, idleness reads the
flags, a stalled member keeps its inputs for the next incarnation, waiters are woken."""

from __future__ import annotations

import threading
from contextlib import ExitStack

from actors.runtime.members import MemberPlan
from actors.runtime.roster import Hosted, Roster


def _roster(*names: str) -> tuple[Roster, dict[str, Hosted]]:
    roster = Roster("lead")
    hosted = {}
    for name in ("lead", *names):
        kind = "lead" if name == "lead" else "teammate"
        plan = MemberPlan(name, kind, "m", role="parser" if kind == "teammate" else None)
        hosted[name] = roster.add(plan, ExitStack())
    return roster, hosted


def test_a_member_is_not_at_rest_until_it_reported_and_has_an_actor() -> None:
    roster, _ = _roster("w1")
    assert roster.at_rest() is None  # both still starting
    assert roster.touch("lead") and roster.touch("w1")
    assert roster.at_rest() == ([], [])  # no actor yet: nobody to count
    roster.set_busy("w1", True)
    assert roster.at_rest() is None
    roster.set_busy("w1", False)
    assert roster.flags() == ((False, False, 0, False, False), (False, False, 0, False, False))


def test_a_report_of_an_old_incarnation_is_stale() -> None:
    roster, hosted = _roster("w1")
    assert roster.retire("w1", generation=0) is hosted["w1"]
    assert roster.retire("w1", generation=0) is None  # already handled
    assert not roster.stall("w1", generation=0)
    assert roster.stall("w1", generation=1)


def test_a_stalled_member_keeps_inputs_for_its_next_incarnation() -> None:
    roster, hosted = _roster("w1")
    assert roster.stall("lead", generation=0)
    roster.hold("lead", "status?")
    assert roster.held("lead") == ["status?"]
    [stalled] = roster.take_stalled()
    assert stalled is hosted["lead"] and stalled.generation == 1 and stalled.starting
    assert roster.unstall(stalled)
    assert roster.take_held(stalled) == ["status?"] and roster.held("lead") == []


def test_a_stopped_member_is_gone_and_the_lead_stops_last() -> None:
    roster, _ = _roster("w1", "w2")
    assert roster.live_names() == ["w1", "w2", "lead"]
    assert roster.end("w1") is not None
    assert roster.end("w1") is None
    assert roster.gone("w1") and roster.gone("nobody") and not roster.gone("w2")
    assert roster.live_names() == ["w2", "lead"]
    assert roster.names() == ["lead", "w1", "w2"]


def test_waiters_wake_on_a_change_and_stop_waiting_when_the_runtime_stops() -> None:
    roster, _ = _roster()
    done = threading.Event()

    def flip() -> None:
        done.set()
        roster.notify()

    threading.Thread(target=flip).start()
    assert roster.wait_until(done.is_set, timeout=30)
    assert roster.begin_stop() and not roster.begin_stop()
    assert not roster.wait_until(lambda: False, timeout=30)  # returns at once: stopping


def test_a_waiters_check_runs_outside_the_lock_and_never_misses_a_change() -> None:
    # The check may read the board and the inboxes: the members reporting a change meanwhile
    # (busy flags, statuses) must not wait for it, and what they report is seen.
    roster, _ = _roster("w1")
    reported = threading.Event()
    checks: list[bool] = []

    def report() -> None:
        roster.set_busy("w1", True)  # takes the roster's lock
        reported.set()

    def check() -> bool:
        if not checks:  # the first check: a member reports while it runs
            threading.Thread(target=report).start()
            checks.append(reported.wait(10))
            return False  # as if it had read the state just before the report
        checks.append(True)
        return True

    assert roster.wait_until(check, timeout=30)
    assert checks[0] is True, "the report waited for the check to finish"
    assert len(checks) == 2, "the change during the first check was checked again at once"
