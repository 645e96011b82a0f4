"""The runtime's timers and helper threads (actors/runtime/process.py): arming a timer or
handing a call to a waiting helper starts no thread, so neither costs a thread start on the
path to a model call."""

from __future__ import annotations

import threading
from typing import Any

from actors.runtime.process import run_beside, thread_timer

DEADLINE_S = 30.0


def test_a_timer_calls_back_once_its_delay_has_passed() -> None:
    fired = threading.Event()
    thread_timer(0.01, fired.set)
    assert fired.wait(DEADLINE_S)


def test_a_cancelled_timer_never_calls_back() -> None:
    calls: list[str] = []
    later = threading.Event()
    cancel = thread_timer(0.02, lambda: calls.append("cancelled"))
    cancel()
    cancel()  # twice is harmless
    # Due after it: once this one has fired, the cancelled one's time has passed too.
    thread_timer(0.2, later.set)
    assert later.wait(DEADLINE_S)
    assert calls == []


def test_arming_timers_starts_no_thread_per_timer() -> None:
    thread_timer(0.0, lambda: None)  # the shared thread is running from here on
    before = threading.active_count()
    cancels = [thread_timer(600.0, lambda: None) for _ in range(50)]
    assert threading.active_count() <= before + 1  # at most a callback of the first
    for cancel in cancels:
        cancel()


def test_a_callback_that_blocks_does_not_hold_up_the_next_timer() -> None:
    release = threading.Event()
    blocked = threading.Event()
    second = threading.Event()

    def block() -> None:
        blocked.set()
        release.wait(DEADLINE_S)

    thread_timer(0.0, block)
    assert blocked.wait(DEADLINE_S)
    thread_timer(0.0, second.set)
    try:
        assert second.wait(DEADLINE_S), "a blocked callback held up the timers"
    finally:
        release.set()


def test_a_call_run_beside_runs_on_another_thread() -> None:
    ran: list[int] = []
    done = run_beside(lambda: ran.append(threading.get_ident()))
    assert done.wait(DEADLINE_S)
    assert ran and ran[0] != threading.get_ident()


def test_a_helper_that_waits_takes_the_next_call_without_a_thread_start() -> None:
    first: list[int] = []
    assert run_beside(lambda: first.append(threading.get_ident())).wait(DEADLINE_S)
    # That helper counts as waiting before its call is reported done: the next call is its.
    existing = {t.ident for t in threading.enumerate()}
    second: list[Any] = []
    assert run_beside(lambda: second.append(threading.get_ident())).wait(DEADLINE_S)
    assert second[0] in existing


def test_a_call_that_raises_is_reported_done_and_the_helper_goes_on() -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    assert run_beside(boom).wait(DEADLINE_S)
    after: list[int] = []
    assert run_beside(lambda: after.append(1)).wait(DEADLINE_S)
    assert after == [1]


def test_calls_handed_over_together_all_run() -> None:
    gate = threading.Event()
    started = threading.Semaphore(0)

    def wait_for_gate() -> None:
        started.release()
        gate.wait(DEADLINE_S)

    events = [run_beside(wait_for_gate) for _ in range(5)]
    for _ in range(5):  # all five at once: none waits for another to end
        assert started.acquire(timeout=DEADLINE_S)
    gate.set()
    assert all(e.wait(DEADLINE_S) for e in events)
