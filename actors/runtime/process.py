"""Small process-level pieces of the runtime: the runtime lock, member leases, the event sink,
the system clock, ids and timers."""

from __future__ import annotations

import fcntl
import heapq
import itertools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from actors.errors import TeamError
from mailboxes.errors import LeaseHeld
from mailboxes.ports import Liveness

__all__ = [
    "EventSink",
    "OnEvent",
    "RuntimeBusy",
    "Timer",
    "batch_scheduling",
    "hold_lease",
    "run_beside",
    "take_runtime_lock",
    "thread_timer",
]

log = logging.getLogger(__name__)

Timer = Callable[[float, Callable[[], None]], Callable[[], None]]
"""``timer(delay_s, callback)`` runs ``callback`` once after ``delay_s``; returns a cancel."""

OnEvent = Callable[[Mapping[str, Any]], None]
"""Where a runtime's output events go (stream-json, the live view)."""


class RuntimeBusy(TeamError):
    """Another runtime already runs this team (or the member is hosted by a live process)."""


def take_runtime_lock(path: Path) -> Callable[[], None]:
    """Hold ``path`` (flock) for this process; returns the release. ``RuntimeBusy`` if another
    live process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise RuntimeBusy(
            f"another teamctl runtime (pid {holder}) is running this team; stop it first, or "
            "host one teammate in this process with `teamctl join NAME`"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def release() -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    return release


def hold_lease(liveness: Liveness, name: str) -> ExitStack:
    """``name``'s liveness lease (``.team/members/<name>.lock``), held until the stack closes;
    ``RuntimeBusy`` when a live process holds it."""
    lease = ExitStack()
    try:
        lease.enter_context(liveness.hold(name))
    except LeaseHeld:
        raise RuntimeBusy(f"{name} is already hosted by a live process") from None
    return lease


class EventSink:
    """The runtime's output events, one at a time (actors emit from their own threads); a sink
    that raises is logged, never propagated."""

    def __init__(self, on_event: OnEvent | None) -> None:
        self._on_event = on_event
        self._lock = threading.Lock()

    @property
    def wanted(self) -> bool:
        """Somebody listens (building an event may be skipped otherwise)."""
        return self._on_event is not None

    def emit(self, event: Mapping[str, Any]) -> None:
        if self._on_event is None:
            return
        with self._lock:
            try:
                self._on_event(event)
            except Exception:
                log.exception("event sink failed")


class _Armed:
    """One armed timer of ``_Timers``: its callback until it fires or is cancelled."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback: Callable[[], None] | None = callback


class _Timers:
    """Every timer of the process, kept by one daemon thread (``teamctl-timers``).

    Arming is a heap push, not a thread start: a teammate arms its stall watchdog at the start of
    every turn, and ``threading.Timer.start`` waits until its new thread has run, which on a busy
    machine (other teammates holding the GIL) cost milliseconds before each turn's first model
    call. A timer that fires runs its callback on a daemon thread of its own, as before: a
    callback may block (a journal append, a delivery) and must not hold up the others."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, _Armed]] = []
        self._order = itertools.count()
        self._cancelled = 0
        self._pid = 0  # the process whose thread keeps the heap (a forked child starts its own)
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # The parent's timers are not the child's, and its lock may have been held by a thread
        # the child does not have.
        self._cond = threading.Condition(threading.Lock())
        self._heap, self._cancelled, self._pid = [], 0, 0

    def arm(self, delay_s: float, callback: Callable[[], None]) -> Callable[[], None]:
        armed = _Armed(callback)
        due = time.monotonic() + max(0.0, delay_s)
        with self._cond:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="teamctl-timers", daemon=True).start()
            heapq.heappush(self._heap, (due, next(self._order), armed))
            if self._heap[0][2] is armed:  # sooner than the thread sleeps until
                self._cond.notify()

        def cancel() -> None:
            with self._cond:
                if armed.callback is None:
                    return  # fired or cancelled already
                armed.callback = None
                self._cancelled += 1
                # Cancelled timers leave the heap when due; most are cancelled long before (a
                # stall watchdog of 10 minutes, cancelled when its turn ends): drop them in bulk.
                if self._cancelled > 64 and self._cancelled * 2 > len(self._heap):
                    self._heap = [entry for entry in self._heap if entry[2].callback is not None]
                    heapq.heapify(self._heap)
                    self._cancelled = 0

        return cancel

    def _run(self) -> None:
        while True:
            with self._cond:
                due: list[Callable[[], None]] = []
                while not due:
                    now = time.monotonic()
                    while self._heap and self._heap[0][0] <= now:
                        _, _, armed = heapq.heappop(self._heap)
                        if armed.callback is None:
                            self._cancelled = max(0, self._cancelled - 1)
                        else:
                            due.append(armed.callback)
                            armed.callback = None
                    if not due:
                        self._cond.wait(self._heap[0][0] - now if self._heap else None)
            for callback in due:
                try:
                    threading.Thread(target=callback, name="teamctl-timer", daemon=True).start()
                except RuntimeError:  # the interpreter is shutting down: nobody to call back
                    return


_TIMERS = _Timers()


def batch_scheduling() -> bool:
    """Put the calling thread, and every thread and process it starts from now on (tools and
    their builds included), under Linux's ``SCHED_BATCH`` policy; True if it was applied.

    A team's processes are throughput work, not interactive: under ``SCHED_BATCH`` a process
    woken up (a journal lock handed over, a message arrived) waits for the running one's time
    slice instead of preempting it. With more team processes than cores, that preemption is what
    costs most: the lock holder is interrupted by the waiter it just woke, and every process
    comes back to cold caches (16 processes racing for claims on 2 cores: about 9 % more claims
    per second, 7 of 9 paired runs faster, ``benchmarks/bench_claims.py --scheduling``). The
    weight is unchanged (it is not ``nice``), and a program of the person's, under the normal
    policy, may still preempt the team's when it wakes. A policy chosen from outside (``chrt``,
    a service manager: anything but the default ``SCHED_OTHER``) is left as it is, and so is a
    system that refuses the change. ``team.cpu_scheduling = "normal"`` turns it off.
    """
    if not hasattr(os, "sched_setscheduler"):  # not Linux
        return False
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            return False
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except OSError as exc:
        log.info("CPU scheduling left as it is: %s", exc)
        return False
    return True


def thread_timer(delay_s: float, callback: Callable[[], None]) -> Callable[[], None]:
    """A ``Timer``: ``callback`` runs on a daemon thread of its own once ``delay_s`` has passed,
    unless the returned cancel was called first. The timers of the process share one thread
    until they fire (``_Timers``)."""
    return _TIMERS.arm(delay_s, callback)


HELPER_IDLE_S = 60.0
"""A helper thread of ``run_beside`` that had nothing to do for this long ends."""


class _Helpers:
    """Daemon threads kept to run calls beside their caller's thread (``run_beside``).

    Handing a call to a helper that waits costs no thread start: ``Thread.start`` returns only
    once the new thread has run, which takes milliseconds when other threads hold the GIL (a
    teammate's idle notice is delivered beside its status change, right when its teammates
    finish too). A helper idle for ``HELPER_IDLE_S`` ends; a call finding none idle starts one."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._calls: deque[tuple[Callable[[], None], threading.Event]] = deque()
        self._idle = 0  # helpers waiting; each takes one of ``_calls``
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._calls, self._idle = deque(), 0

    def run(self, call: Callable[[], None], name: str) -> threading.Event:
        done = threading.Event()
        with self._cond:
            if self._idle > len(self._calls):  # a waiting helper nobody handed a call yet
                self._calls.append((call, done))
                self._cond.notify()
                return done
        threading.Thread(
            target=self._help, args=(call, done), name=f"teamctl-{name}", daemon=True
        ).start()
        return done

    def _help(self, call: Callable[[], None], done: threading.Event) -> None:
        while True:
            try:
                call()
            except Exception:  # a helper must not die with an exception; the call reports its own
                log.exception("a call run beside its caller failed")
            with self._cond:
                # Waiting before the caller hears of the end: a call handed over right after that
                # goes to this helper, no thread start.
                self._idle += 1
                done.set()
                while not self._calls:
                    if not self._cond.wait(HELPER_IDLE_S) and not self._calls:
                        self._idle -= 1
                        return
                self._idle -= 1
                call, done = self._calls.popleft()


_HELPERS = _Helpers()


def run_beside(call: Callable[[], None], name: str = "helper") -> threading.Event:
    """Run ``call`` on a daemon thread beside the caller's (a kept one when one waits, else a
    new one named ``teamctl-<name>``); the event is set once it has returned."""
    return _HELPERS.run(call, name)
