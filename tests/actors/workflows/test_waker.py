"""The workflow engine's waker (actors/workflows/engine.py ``_Waker``) watches the journal
through ``TeamServices.watch`` (the team's backend: docs/ARCHITECTURE.md, "Backends and
seams"), never a path of its own, and wakes the run's loop on a hint."""

from __future__ import annotations

import asyncio
from typing import Any

from actors.workflows.engine import _Waker
from mailboxes.ports import JournalAdvanced, OnHints


class RecordingWatcher:
    def __init__(self) -> None:
        self.started = self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True


class Services:
    def __init__(self) -> None:
        self.asked: list[tuple[float, bool]] = []
        self.on_hints: OnHints | None = None
        self.watcher = RecordingWatcher()

    def watch(self, on_hints: OnHints, rescan_s: float = 2.0, *, inboxes: bool = True) -> Any:
        self.asked.append((rescan_s, inboxes))
        self.on_hints = on_hints
        return self.watcher


def test_the_waker_uses_the_teams_watcher_and_wakes_on_a_hint() -> None:
    services = Services()

    async def main() -> bool:
        waker = _Waker(asyncio.get_running_loop(), services)  # type: ignore[arg-type]
        waker.start()
        waiting = asyncio.ensure_future(waker.wait())
        await asyncio.sleep(0)  # the wait is parked on the current event
        assert services.on_hints is not None
        # The hint arrives on the watcher's thread.
        await asyncio.to_thread(services.on_hints, frozenset({JournalAdvanced()}))
        await asyncio.wait_for(waiting, timeout=30)  # woken (else: the 1 s rescan bound)
        waker.stop()
        return waiting.done()

    assert asyncio.run(main())
    assert services.asked == [(1.0, False)]  # the journal only, no inboxes
    assert services.watcher.started and services.watcher.stopped
