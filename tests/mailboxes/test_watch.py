"""mailboxes/watch.py: wake-up hints from writes by other processes, ticks, and stop; the
typed hints (``JournalAdvanced``, ``InboxChanged``, ``Tick``) translated from real file changes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from mailboxes.events import TeamCreated, draft
from mailboxes.journal.store import FileJournal
from mailboxes.maildir import Maildir
from mailboxes.messages import MessageDraft
from mailboxes.ports import Hint, InboxChanged, JournalAdvanced, Tick, Watcher
from mailboxes.watch import Backend, FileWatcher, HintWatcher, hints_for

BACKENDS = ["inotify", "watchfiles"] if sys.platform.startswith("linux") else ["watchfiles"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each file watcher backend: the blocking inotify one (Linux) and the watchfiles one."""
    return request.param  # type: ignore[no-any-return]


SEND = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from mailboxes.maildir import Maildir
    from mailboxes.messages import MessageDraft

    Maildir(Path(sys.argv[1])).deliver("lead", MessageDraft.text("bob", "wake up"))
    """
)


def test_write_from_another_process_wakes_the_reader(tmp_path: Path, backend: Backend) -> None:
    box = Maildir(tmp_path / "mailboxes")
    box.ensure_inbox("bob")
    woke = threading.Event()
    seen: list[str] = []

    def on_change(paths: set[Path]) -> None:
        agents = {box.agent_for_path(p) for p in paths}
        if "bob" in agents:
            seen.extend(e.text for e in box.pending("bob"))  # hints only: re-list new/
            woke.set()

    with FileWatcher([box.root], on_change, rescan_s=60, backend=backend):
        subprocess.run([sys.executable, "-c", SEND, str(box.root)], check=True, timeout=60)
        assert woke.wait(10)
    assert seen[:1] == ["wake up"]


def test_rescan_tick_fires_without_changes(tmp_path: Path, backend: Backend) -> None:
    tick = threading.Event()
    watcher = FileWatcher(
        [tmp_path], lambda paths: tick.set() if not paths else None, 0.02, backend=backend
    )
    watcher.start()
    try:
        assert tick.wait(10)
    finally:
        watcher.stop()


def test_callback_errors_are_logged_and_do_not_kill_the_thread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, backend: Backend
) -> None:
    first, second = threading.Event(), threading.Event()

    def flaky(paths: set[Path]) -> None:
        if not paths:
            return
        if not first.is_set():
            first.set()
            raise RuntimeError("boom")
        second.set()

    with (
        caplog.at_level("ERROR", logger="mailboxes.watch"),
        FileWatcher([tmp_path], flaky, 60, backend=backend),
    ):
        (tmp_path / "one").write_text("1")
        assert first.wait(10)
        (tmp_path / "two").write_text("2")
        assert second.wait(10)
    assert any("callback failed" in r.getMessage() for r in caplog.records)


def test_stop_joins_and_is_idempotent(tmp_path: Path, backend: Backend) -> None:
    watcher = FileWatcher([tmp_path], lambda paths: None, rescan_s=60, backend=backend)
    watcher.start()
    watcher.start()
    threads = [t for t in threading.enumerate() if t.name == "teamctl-watch"]
    assert threads
    watcher.stop()
    watcher.stop()
    assert not any(t.is_alive() for t in threads)
    watcher.start()  # restartable
    watcher.stop()


def test_stop_from_inside_a_callback(tmp_path: Path, backend: Backend) -> None:
    stopped = threading.Event()
    holder: list[FileWatcher] = []
    threads: list[threading.Thread] = []

    def stop_self(paths: set[Path]) -> None:
        threads.append(threading.current_thread())
        holder[0].stop()
        stopped.set()

    watcher = FileWatcher([tmp_path], stop_self, rescan_s=0.01, backend=backend)
    holder.append(watcher)
    watcher.start()
    assert stopped.wait(10)
    watcher.stop()
    threads[0].join(10)
    assert not threads[0].is_alive()
    assert len(threads) == 1  # no call after stop


def test_a_restart_from_inside_a_callback_leaves_one_thread(
    tmp_path: Path, backend: Backend
) -> None:
    """stop() then start() from a callback: the old run ends (its own stop flag, not one the new
    run clears again) and the new one sees the next change."""
    restarted = threading.Event()
    seen_after = threading.Event()
    old: list[threading.Thread] = []
    holder: list[FileWatcher] = []

    def on_change(paths: set[Path]) -> None:
        if not old:
            old.append(threading.current_thread())
            holder[0].stop()
            holder[0].start()
            restarted.set()
        elif tmp_path / "after" in paths:
            seen_after.set()

    before = set(threading.enumerate())
    watcher = FileWatcher([tmp_path], on_change, rescan_s=60, backend=backend)
    holder.append(watcher)
    watcher.start()
    try:
        (tmp_path / "before").write_text("b")
        assert restarted.wait(10)
        old[0].join(10)
        assert not old[0].is_alive()
        (tmp_path / "after").write_text("a")
        assert seen_after.wait(10)
    finally:
        watcher.stop()
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_missing_path_falls_back_to_ticks_with_watchfiles(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """watchfiles cannot watch a missing path (the inotify backend watches for its creation:
    tests/mailboxes/test_inotify_watch.py)."""
    tick = threading.Event()
    with caplog.at_level("ERROR", logger="mailboxes.watch"):
        watcher = FileWatcher(
            [tmp_path / "missing"], lambda paths: tick.set(), rescan_s=0.02, backend="watchfiles"
        )
        watcher.start()
        try:
            assert tick.wait(10)
        finally:
            watcher.stop()
    assert any("falling back" in r.getMessage() for r in caplog.records)


class Hints:
    """Collects hint batches; ``wait_for(hint)`` blocks until some batch held it."""

    def __init__(self) -> None:
        self.batches: list[frozenset[Hint]] = []
        self._changed = threading.Condition()

    def __call__(self, hints: frozenset[Hint]) -> None:
        with self._changed:
            self.batches.append(hints)
            self._changed.notify_all()

    def wait_for(self, hint: Hint) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: any(hint in b for b in self.batches), 10)

    def seen(self) -> set[Hint]:
        with self._changed:
            return set().union(*self.batches)


@pytest.fixture
def team_files(tmp_path: Path) -> tuple[FileJournal, Maildir]:
    journal = FileJournal(tmp_path)
    box = Maildir(tmp_path / "mailboxes")
    for agent in ("bob", "carol"):
        box.ensure_inbox(agent)
    return journal, box


def test_a_delivery_is_inbox_changed_of_its_agent_only(
    team_files: tuple[FileJournal, Maildir], backend: Backend
) -> None:
    journal, box = team_files
    hints = Hints()
    watcher: Watcher = HintWatcher(
        hints, journal=journal.path, mailboxes=box.root, rescan_s=60, backend=backend
    )
    watcher.start()
    try:
        subprocess.run([sys.executable, "-c", SEND, str(box.root)], check=True, timeout=60)
        assert hints.wait_for(InboxChanged("bob"))
    finally:
        watcher.stop()
    assert hints.seen() <= {InboxChanged("bob")}  # no journal hint, nobody else's inbox
    assert all(hints.batches)  # never an empty batch


def test_a_journal_append_is_journal_advanced(
    team_files: tuple[FileJournal, Maildir], backend: Backend
) -> None:
    journal, box = team_files
    hints = Hints()
    with HintWatcher(hints, journal=journal.path, mailboxes=box.root, rescan_s=60, backend=backend):
        journal.append(lambda _seen: [draft("team.created", "cli", TeamCreated(name="t"))], after=0)
        assert hints.wait_for(JournalAdvanced())
    assert hints.seen() == {JournalAdvanced()}


def test_an_ack_is_inbox_changed_and_a_tick_comes_without_changes(
    team_files: tuple[FileJournal, Maildir], backend: Backend
) -> None:
    journal, box = team_files
    [sent] = box.deliver("lead", MessageDraft.text("carol", "hello"))
    hints = Hints()
    with HintWatcher(hints, journal=journal.path, mailboxes=box.root, rescan_s=60, backend=backend):
        box.ack("carol", [sent.id])
        assert hints.wait_for(InboxChanged("carol"))
    ticks = Hints()
    with HintWatcher(
        ticks, journal=journal.path, mailboxes=box.root, rescan_s=0.02, backend=backend
    ):
        assert ticks.wait_for(Tick())


def test_paths_translate_into_hints_and_nothing_else(tmp_path: Path) -> None:
    journal, root = tmp_path / "journal.jsonl", tmp_path / "mailboxes"
    assert hints_for(set(), journal=journal, mailboxes=root) == {Tick()}
    changed = {
        journal,
        root / "bob" / "new" / "m1",
        root / "bob" / "tmp" / "m2",  # a delivery in progress: its rename into new/ follows
        root / "carol" / "cur" / "m3",
        root / ".hidden" / "new" / "m4",
        tmp_path / "journal.jsonl.tmp",
        tmp_path / "elsewhere" / "new" / "m5",
    }
    assert hints_for(changed, journal=journal, mailboxes=root) == {
        JournalAdvanced(),
        InboxChanged("bob"),
    }
    assert hints_for({root / "bob" / "new" / "m1"}, journal=journal) == frozenset()
