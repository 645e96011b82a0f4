"""The live view of a team (``teamctl watch``; reusable by ``teamctl run`` and ``teamctl demo``).

Three parts, each usable alone:

- ``build_snapshot(state, ...) -> Snapshot`` (``actors.live.snapshot``): pure, over data;
- ``LiveSource(team).load() -> Snapshot`` (``actors.live.load``): reads a repository without
  taking locks a running runtime needs, folding only what is new each time;
- ``render(snapshot) -> rich renderable`` (``actors.live.render``): print it, or put it in a
  ``rich.live.Live``.

``Refresher`` ties them to file changes: it reloads on every ``FileWatcher`` hint (the journal
and the mailboxes), and calls ``show`` only when the snapshot differs from the last one shown.
No timer of its own: the watcher's rescan tick is the only periodic wake-up, there to bound the
cost of a dropped hint. ``watch_live`` runs the whole thing in a ``Live`` with
``auto_refresh=False`` until Ctrl-C or until its refresher is stopped.

A host that already owns a ``Team`` (the runtime: ``TeamRuntime.team``) reuses it:
``LiveSource(runtime.team)``; a host with a watcher of its own may skip ``Refresher`` and call
``live.update(render(source.load()), refresh=True)`` from its change callback instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from actors.live.changes import ChangeLog, change_lines
from actors.live.load import LiveSource, load_snapshot
from actors.live.render import render
from actors.live.snapshot import Snapshot, build_snapshot, fold_permissions

if TYPE_CHECKING:
    from rich.console import Console

    from mailboxes.ports import Watcher

__all__ = [
    "ChangeLog",
    "LiveSource",
    "Refresher",
    "Snapshot",
    "build_snapshot",
    "change_lines",
    "fold_permissions",
    "load_snapshot",
    "render",
    "watch_live",
]

WatcherFactory = Callable[[Sequence[Path], Callable[[set[Path]], None], float], "Watcher"]
"""``(paths, on_change, rescan_s) -> Watcher``; the default builds a ``FileWatcher``."""


def _file_watcher(
    paths: Sequence[Path], on_change: Callable[[set[Path]], None], rescan_s: float
) -> Watcher:
    from mailboxes.watch import FileWatcher

    return FileWatcher(paths, on_change, rescan_s)


class Refresher:
    """Reload on file-change hints; ``show`` each snapshot that differs from the last shown.

    ``show`` runs on the watcher's thread (serially), or on the caller's for the first snapshot
    in ``start``. A failing ``load`` stops the refresher; ``wait`` re-raises the error.
    """

    def __init__(
        self,
        load: Callable[[], Snapshot],
        show: Callable[[Snapshot], None],
        paths: Sequence[Path],
        *,
        rescan_s: float = 2.0,
        watcher: WatcherFactory = _file_watcher,
    ) -> None:
        self._load = load
        self._show = show
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._last: Snapshot | None = None
        self._watcher = watcher(tuple(paths), self._on_change, rescan_s)
        self.hints = 0
        """Wake-ups received (change hints and rescan ticks)."""
        self.shown = 0
        """Snapshots passed to ``show`` (the first one included)."""

    @property
    def last(self) -> Snapshot | None:
        """The snapshot shown last."""
        return self._last

    def start(self) -> Snapshot:
        """Arm the watcher, then load and show the first snapshot; returns it."""
        with self._lock:
            # Watch first: a change made while the first snapshot loads is then not missed.
            self._watcher.start()
            try:
                first = self._load()
                self._put(first)
            except BaseException:
                self._watcher.stop()
                raise
        return first

    def _on_change(self, _paths: set[Path]) -> None:
        with self._lock:
            self.hints += 1
            if self._done.is_set():
                return
            try:
                snap = self._load()
                if snap != self._last:
                    self._put(snap)
            except Exception as exc:
                self._error = exc
                self._done.set()

    def _put(self, snap: Snapshot) -> None:
        self._last = snap
        self.shown += 1
        self._show(snap)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the refresher stops (True) or ``timeout`` passes (False); re-raises a
        failed load. Ctrl-C interrupts it in the main thread."""
        stopped = self._done.wait(timeout)
        if self._error is not None:
            raise self._error
        return stopped

    def stop(self) -> None:
        """Stop watching (idempotent); a ``wait`` in progress returns."""
        self._done.set()
        self._watcher.stop()

    def __enter__(self) -> Refresher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def watch_live(
    source: LiveSource,
    console: Console,
    *,
    rescan_s: float = 2.0,
    on_start: Callable[[Refresher], None] | None = None,
    on_show: Callable[[Snapshot], None] | None = None,
) -> None:
    """Show ``source``'s team until Ctrl-C (``KeyboardInterrupt`` propagates) or the refresher
    is stopped, redrawn on events only. On a terminal: one ``rich.live.Live`` redrawn in place
    (``auto_refresh=False``); to a pipe or file: one line per change (``ChangeLog``), appended.
    ``on_start`` receives the running ``Refresher`` (its ``stop`` ends the view from another
    thread); ``on_show`` is told of every snapshot drawn, after it was drawn."""
    from rich.live import Live

    def run(draw: Callable[[Snapshot], None]) -> None:
        def show(snap: Snapshot) -> None:
            draw(snap)
            if on_show is not None:
                on_show(snap)

        refresher = Refresher(source.load, show, source.paths, rescan_s=rescan_s)
        refresher.start()
        try:
            if on_start is not None:
                on_start(refresher)
            refresher.wait()
        finally:
            refresher.stop()

    if not console.is_terminal:
        # A pipe or a file gets an append-only log, one line per change, never a redrawn panel.
        run(ChangeLog(lambda line: console.out(line, highlight=False)))
        return
    with Live(console=console, auto_refresh=False, transient=False) as live:
        run(lambda snap: live.update(render(snap), refresh=True))
