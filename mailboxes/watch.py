"""Wake-up hints from file changes by any process (docs/ARCHITECTURE.md, "Mailboxes" and
"Backends and seams").

Hints are only hints: the consumer re-lists what it cares about on every call. ``FileWatcher``
is the raw layer: ``on_change`` receives the changed paths, or an empty set on the periodic
rescan tick, which comes at least every ``rescan_s`` so that a dropped event costs at most one
tick. On Linux it blocks on an inotify descriptor and a stop pipe (``mailboxes.inotify``): no
wake-up at all while nothing changes, besides the tick; an inotify queue overflow is reported as
an immediate tick. Elsewhere (or if inotify cannot start) it uses ``watchfiles``, whose loop
polls every ``step_ms``. If neither can start (missing folder, limits), the thread falls back to
ticks alone. ``HintWatcher`` is the file ``Watcher`` of ``mailboxes.ports``: it watches the
journal and the Maildir root and translates their paths into typed hints (``JournalAdvanced``,
``InboxChanged(agent)``, ``Tick``), so nothing outside ``mailboxes/`` looks at a path.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import select
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from mailboxes.names import check_agent_name
from mailboxes.ports import Hint, InboxChanged, JournalAdvanced, OnHints, Tick

__all__ = ["FileWatcher", "HintWatcher", "hints_for"]

log = logging.getLogger(__name__)

OnChange = Callable[[set[Path]], None]
Backend = Literal["auto", "inotify", "watchfiles"]


class _Run:
    """One start-to-stop run of the thread: its stop flag, and the stop pipe whose byte wakes the
    blocked ``poll``. Its own flag, so a run stopped from its callback and a new run started at
    once never share one. The lock keeps a write from reaching a descriptor already closed."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)

    def wake(self) -> None:
        self.stop.set()
        with self._lock:
            if self._write_fd >= 0:
                with contextlib.suppress(BlockingIOError):  # full: already woken
                    os.write(self._write_fd, b"x")

    def close(self) -> None:
        with self._lock:
            if self._write_fd >= 0:
                os.close(self._write_fd)
                os.close(self.read_fd)
                self._write_fd = self.read_fd = -1


class FileWatcher:
    """One background thread, callbacks run on it serially. ``backend``: ``"auto"`` (inotify
    where the platform has it, else ``watchfiles``; ``TEAMCTL_WATCHER=watchfiles`` in the
    environment forces the fallback), or one of them explicitly."""

    def __init__(
        self,
        paths: Iterable[Path],
        on_change: OnChange,
        rescan_s: float = 2.0,
        *,
        debounce_ms: int = 5,
        step_ms: int = 5,
        backend: Backend = "auto",
    ) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self._on_change = on_change
        self._rescan_ms = max(1, int(rescan_s * 1000))
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        if backend == "auto" and os.environ.get("TEAMCTL_WATCHER") == "watchfiles":
            backend = "watchfiles"
        self._backend = backend
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._current: _Run | None = None
        self._lock = threading.Lock()
        self.wakeups = 0
        """Times the blocking inotify wait returned (changes, ticks, stop); for tests."""
        self.using: str | None = None
        """The backend the last run uses: ``inotify``, ``watchfiles`` or ``ticks``."""

    def start(self) -> None:
        """Start watching in a background thread (idempotent). Returns once the native watcher
        is armed, so a write made after ``start`` returns is seen."""
        with self._lock:
            if self._thread is not None:
                return
            self._ready.clear()
            self._current = _Run()
            self._thread = threading.Thread(
                target=self._run, args=(self._current,), name="teamctl-watch", daemon=True
            )
            self._thread.start()
        self._ready.wait(timeout=5.0)

    def stop(self) -> None:
        """Stop and join the thread (idempotent); returns at once with inotify, within a few
        ``step_ms`` with watchfiles. Called from a callback, it stops the thread without
        joining it."""
        with self._lock:
            thread, self._thread = self._thread, None
            run, self._current = self._current, None
        if thread is None or run is None:
            return
        run.wake()
        if thread is not threading.current_thread():  # stop() from a callback cannot join
            thread.join()

    @property
    def thread_id(self) -> int | None:
        """The watching thread's native id (None when not running); for tests."""
        thread = self._thread
        return thread.native_id if thread is not None else None

    def __enter__(self) -> FileWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, run: _Run) -> None:
        try:
            if self._backend != "watchfiles" and self._watch_inotify(run):
                return
            self.using = "watchfiles"
            self._watch(run)
        except Exception:
            log.exception(
                "file watcher failed; falling back to rescan ticks every %d ms", self._rescan_ms
            )
            self.using = "ticks"
            self._ready.set()
            while not run.stop.wait(self._rescan_ms / 1000):
                self._call(run, set())
        finally:
            self._ready.set()
            run.close()

    def _watch_inotify(self, run: _Run) -> bool:
        """Block on the inotify descriptor and the stop pipe until stopped; False if inotify
        cannot start here (then the caller uses watchfiles)."""
        from mailboxes.inotify import InotifyTree

        try:
            tree = InotifyTree(self.paths)
        except OSError as exc:
            if self._backend == "inotify":
                raise
            log.debug("inotify unavailable (%s); using watchfiles", exc)
            return False
        try:
            tree.arm()
            if tree.watches == 0:
                raise OSError(f"nothing to watch in {[str(p) for p in self.paths]}")
            self.using = "inotify"
            poller = select.poll()
            poller.register(tree.fileno(), select.POLLIN)
            poller.register(run.read_fd, select.POLLIN)
            self._ready.set()
            rescan_s = self._rescan_ms / 1000
            next_tick = time.monotonic() + rescan_s
            while not run.stop.is_set():
                wait_ms = max(0, int((next_tick - time.monotonic()) * 1000) + 1)
                ready = poller.poll(wait_ms)
                self.wakeups += 1
                if run.stop.is_set():
                    break
                changed: set[Path] = set()
                overflow = False
                if ready:
                    changed, overflow = tree.read()
                if tree.pending and (overflow or not ready):
                    changed |= tree.retry_pending()
                if changed:
                    self._call(run, changed)
                now = time.monotonic()
                if overflow or now >= next_tick:  # an overflow may have lost changes: re-scan
                    self._call(run, set())
                    next_tick = now + rescan_s
        finally:
            tree.close()
        return True

    def _watch(self, run: _Run) -> None:
        import watchfiles

        changes_iter = watchfiles.watch(
            *self.paths,
            watch_filter=None,
            debounce=self._debounce_ms,
            step=self._step_ms,
            stop_event=_ArmedProbe(run.stop, self._ready),
            rust_timeout=self._rescan_ms,
            yield_on_timeout=True,
            raise_interrupt=False,
        )
        for changes in changes_iter:
            self._call(run, {Path(path) for _, path in changes})

    def _call(self, run: _Run, paths: set[Path]) -> None:
        if run.stop.is_set():
            return
        try:
            self._on_change(paths)
        except Exception:
            log.exception("watcher callback failed on %d paths", len(paths))


class _ArmedProbe:
    """The stop event handed to watchfiles. Its first ``is_set`` call comes from the native
    loop after the OS watches exist, which is the moment ``start`` may return."""

    def __init__(self, stop: threading.Event, ready: threading.Event) -> None:
        self._stop = stop
        self._ready = ready

    def is_set(self) -> bool:
        if not self._ready.is_set():
            self._ready.set()
        return self._stop.is_set()


def hints_for(
    paths: set[Path], *, journal: Path | None = None, mailboxes: Path | None = None
) -> frozenset[Hint]:
    """The hints of one batch of changed ``paths`` (empty: the rescan tick). A change of the
    ``journal`` file is ``JournalAdvanced``; one of a file in ``<mailboxes>/<agent>/new/`` (a
    delivery, or an ack taking it away) is ``InboxChanged(agent)``; anything else is no hint."""
    if not paths:
        return frozenset({Tick()})
    journals = {os.fspath(p) for p in _forms(journal)}
    roots = [os.fspath(p) + os.sep for p in _forms(mailboxes)]
    hints: set[Hint] = set()
    for path in paths:
        text = os.fspath(path)  # plain strings: this runs for every batch the watcher reads
        if text in journals:
            hints.add(JournalAdvanced())
            continue
        for root in roots:
            if text.startswith(root):
                parts = text[len(root) :].split(os.sep)
                if len(parts) == 3 and parts[1] == "new" and _is_agent_name(parts[0]):
                    hints.add(InboxChanged(parts[0]))
                break
    return frozenset(hints)


class HintWatcher:
    """The file ``Watcher``: a ``FileWatcher`` over the journal file and the Maildir root whose
    paths become typed hints. ``on_hints`` never sees an empty batch (a batch of paths that mean
    nothing, such as a write into ``tmp/``, is dropped)."""

    def __init__(
        self,
        on_hints: OnHints,
        *,
        journal: Path | None = None,
        mailboxes: Path | None = None,
        rescan_s: float = 2.0,
        backend: Backend = "auto",
    ) -> None:
        self._on_hints = on_hints
        self._journal = journal
        self._mailboxes = mailboxes
        paths = [p for p in (mailboxes, journal) if p is not None]
        self._files = FileWatcher(paths, self._on_paths, rescan_s, backend=backend)

    def start(self) -> None:
        self._files.start()

    def stop(self) -> None:
        self._files.stop()

    def __enter__(self) -> HintWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_paths(self, paths: set[Path]) -> None:
        hints = hints_for(paths, journal=self._journal, mailboxes=self._mailboxes)
        if hints:
            self._on_hints(hints)


def _forms(path: Path | None) -> tuple[Path, ...]:
    """``path`` as a watcher may report it: absolute, and with symlinks resolved (an absolute
    path once per process: the watches were armed on what it resolved to then)."""
    if path is None:
        return ()
    path = Path(path)
    return _resolved(path) if path.is_absolute() else _resolve(path)


def _resolve(path: Path) -> tuple[Path, ...]:
    return tuple(dict.fromkeys((path.absolute(), path.resolve())))


_resolved = functools.lru_cache(maxsize=64)(_resolve)


def _is_agent_name(name: str) -> bool:
    try:
        check_agent_name(name)
    except ValueError:
        return False
    return True
