"""Wake-up hints from file changes by any process, via ``watchfiles``
(docs/ARCHITECTURE.md, "Mailboxes" and "Backends and seams").

Hints are only hints: the consumer re-lists what it cares about on every call. ``FileWatcher``
is the raw layer: ``on_change`` receives the changed paths, or an empty set on the periodic
rescan tick, which comes at least every ``rescan_s`` so that a dropped inotify event costs at
most one tick. If the native watcher cannot start (missing folder, inotify limits), the thread
falls back to ticks alone. ``HintWatcher`` is the file ``Watcher`` of ``mailboxes.ports``: it
watches the journal and the Maildir root and translates their paths into typed hints
(``JournalAdvanced``, ``InboxChanged(agent)``, ``Tick``), so nothing outside ``mailboxes/``
looks at a path.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import watchfiles

from mailboxes.messages import check_agent_name
from mailboxes.ports import Hint, InboxChanged, JournalAdvanced, OnHints, Tick

__all__ = ["FileWatcher", "HintWatcher", "hints_for"]

log = logging.getLogger(__name__)

OnChange = Callable[[set[Path]], None]


class FileWatcher:
    """The ``watchfiles`` ``Watcher``: one background thread, callbacks run on it serially."""

    def __init__(
        self,
        paths: Iterable[Path],
        on_change: OnChange,
        rescan_s: float = 2.0,
        *,
        debounce_ms: int = 5,
        step_ms: int = 5,
    ) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self._on_change = on_change
        self._rescan_ms = max(1, int(rescan_s * 1000))
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start watching in a background thread (idempotent). Returns once the native watcher
        is armed, so a write made after ``start`` returns is seen."""
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._ready.clear()
            self._thread = threading.Thread(target=self._run, name="teamctl-watch", daemon=True)
            self._thread.start()
        self._ready.wait(timeout=5.0)

    def stop(self) -> None:
        """Stop and join the thread (idempotent); returns within a few ``step_ms``. Called from
        a callback, it stops the thread without joining it."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        if thread is not threading.current_thread():  # stop() from a callback cannot join
            thread.join()

    def __enter__(self) -> FileWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            self._watch()
        except Exception:
            log.exception(
                "file watcher failed; falling back to rescan ticks every %d ms", self._rescan_ms
            )
            self._ready.set()
            while not self._stop.wait(self._rescan_ms / 1000):
                self._call(set())
        finally:
            self._ready.set()

    def _watch(self) -> None:
        changes_iter = watchfiles.watch(
            *self.paths,
            watch_filter=None,
            debounce=self._debounce_ms,
            step=self._step_ms,
            stop_event=_ArmedProbe(self._stop, self._ready),
            rust_timeout=self._rescan_ms,
            yield_on_timeout=True,
            raise_interrupt=False,
        )
        for changes in changes_iter:
            self._call({Path(path) for _, path in changes})

    def _call(self, paths: set[Path]) -> None:
        if self._stop.is_set():
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
    journals = _forms(journal)
    roots = _forms(mailboxes)
    hints: set[Hint] = set()
    for path in paths:
        path = Path(path)
        if path in journals:
            hints.add(JournalAdvanced())
            continue
        for root in roots:
            if path.is_relative_to(root):
                parts = path.relative_to(root).parts
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
    ) -> None:
        self._on_hints = on_hints
        self._journal = journal
        self._mailboxes = mailboxes
        paths = [p for p in (mailboxes, journal) if p is not None]
        self._files = FileWatcher(paths, self._on_paths, rescan_s)

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
    """``path`` as watchfiles may report it: absolute, and with symlinks resolved."""
    if path is None:
        return ()
    return tuple(dict.fromkeys((Path(path).absolute(), Path(path).resolve())))


def _is_agent_name(name: str) -> bool:
    try:
        check_agent_name(name)
    except ValueError:
        return False
    return True
