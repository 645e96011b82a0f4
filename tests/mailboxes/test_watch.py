"""mailboxes/watch.py: wake-up hints from writes by other processes, ticks, and stop."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from mailboxes.maildir import Maildir
from mailboxes.watch import FileWatcher

SEND = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from mailboxes.maildir import Maildir
    from mailboxes.messages import MessageDraft

    Maildir(Path(sys.argv[1])).deliver("lead", MessageDraft.text("bob", "wake up"))
    """
)


def test_write_from_another_process_wakes_the_reader(tmp_path: Path) -> None:
    box = Maildir(tmp_path / "mailboxes")
    box.ensure_inbox("bob")
    woke = threading.Event()
    seen: list[str] = []

    def on_change(paths: set[Path]) -> None:
        agents = {box.agent_for_path(p) for p in paths}
        if "bob" in agents:
            seen.extend(e.text for e in box.pending("bob"))  # hints only: re-list new/
            woke.set()

    with FileWatcher([box.root], on_change, rescan_s=60):
        subprocess.run([sys.executable, "-c", SEND, str(box.root)], check=True, timeout=60)
        assert woke.wait(10)
    assert seen[:1] == ["wake up"]


def test_rescan_tick_fires_without_changes(tmp_path: Path) -> None:
    tick = threading.Event()
    watcher = FileWatcher([tmp_path], lambda paths: tick.set() if not paths else None, 0.02)
    watcher.start()
    try:
        assert tick.wait(10)
    finally:
        watcher.stop()


def test_callback_errors_are_logged_and_do_not_kill_the_thread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = threading.Event(), threading.Event()

    def flaky(paths: set[Path]) -> None:
        if not paths:
            return
        if not first.is_set():
            first.set()
            raise RuntimeError("boom")
        second.set()

    with caplog.at_level("ERROR", logger="mailboxes.watch"), FileWatcher([tmp_path], flaky, 60):
        (tmp_path / "one").write_text("1")
        assert first.wait(10)
        (tmp_path / "two").write_text("2")
        assert second.wait(10)
    assert any("callback failed" in r.getMessage() for r in caplog.records)


def test_stop_joins_and_is_idempotent(tmp_path: Path) -> None:
    watcher = FileWatcher([tmp_path], lambda paths: None, rescan_s=60)
    watcher.start()
    watcher.start()
    threads = [t for t in threading.enumerate() if t.name == "teamctl-watch"]
    assert threads
    watcher.stop()
    watcher.stop()
    assert not any(t.is_alive() for t in threads)
    watcher.start()  # restartable
    watcher.stop()


def test_stop_from_inside_a_callback(tmp_path: Path) -> None:
    stopped = threading.Event()
    holder: list[FileWatcher] = []
    threads: list[threading.Thread] = []

    def stop_self(paths: set[Path]) -> None:
        threads.append(threading.current_thread())
        holder[0].stop()
        stopped.set()

    watcher = FileWatcher([tmp_path], stop_self, rescan_s=0.01)
    holder.append(watcher)
    watcher.start()
    assert stopped.wait(10)
    watcher.stop()
    threads[0].join(10)
    assert not threads[0].is_alive()
    assert len(threads) == 1  # no call after stop


def test_missing_path_falls_back_to_ticks(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tick = threading.Event()
    with caplog.at_level("ERROR", logger="mailboxes.watch"):
        watcher = FileWatcher([tmp_path / "missing"], lambda paths: tick.set(), rescan_s=0.02)
        watcher.start()
        try:
            assert tick.wait(10)
        finally:
            watcher.stop()
    assert any("falling back" in r.getMessage() for r in caplog.records)
