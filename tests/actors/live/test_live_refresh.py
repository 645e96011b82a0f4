"""The live view refreshes on file events (from any thread or process), never on a timer."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from rich.console import Console

from actors.factory import Team
from actors.live.view import LiveSource, Refresher, Snapshot, watch_live
from mailboxes.messages import MessageDraft
from tests.actors.live.live_support import new_team

WAIT_S = 10.0
NEVER_S = 3600.0  # a rescan tick that never comes during a test


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    team = new_team(tmp_path)
    try:
        yield team
    finally:
        team.close()


class Shown:
    """Collects shown snapshots; ``until(pred)`` waits for one that satisfies ``pred``."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self._cond = threading.Condition()

    def __call__(self, snap: Snapshot) -> None:
        with self._cond:
            self.snapshots.append(snap)
            self._cond.notify_all()

    def until(self, pred: Callable[[Snapshot], bool]) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: any(pred(s) for s in self.snapshots), WAIT_S)


def _unread(snap: Snapshot, agent: str) -> int:
    return next((r.unread for r in snap.inboxes if r.agent == agent), 0)


def test_a_message_from_another_thread_triggers_a_refresh(team: Team) -> None:
    shown = Shown()
    source = LiveSource(team)
    with Refresher(source.load, shown, source.paths, rescan_s=NEVER_S) as refresher:
        assert [_unread(s, "lead") for s in shown.snapshots] == [0]
        sender = threading.Thread(
            target=lambda: team.mailbox.deliver("cli", MessageDraft.text("lead", "hi"))
        )
        sender.start()
        sender.join()
        assert shown.until(lambda s: _unread(s, "lead") == 1)
        assert refresher.shown >= 2 and refresher.last is not None
        assert _unread(refresher.last, "lead") == 1


def test_a_journal_write_from_another_process_triggers_a_refresh(team: Team) -> None:
    shown = Shown()
    source = LiveSource(team)
    with Refresher(source.load, shown, source.paths, rescan_s=NEVER_S):
        code = "from actors.cli.main import main; main()"
        subprocess.run(
            [sys.executable, "-c", code, "task", "add", "from elsewhere"],
            cwd=team.repo.root,
            check=True,
            capture_output=True,
        )
        assert shown.until(lambda s: [t.subject for t in s.tasks] == ["from elsewhere"])


class FakeWatcher:
    """A ``Watcher`` the test drives by hand: ``hint(paths)``; ``set()`` is a rescan tick."""

    def __init__(
        self, paths: Sequence[Path], on_change: Callable[[set[Path]], None], rescan_s: float
    ) -> None:
        self.paths = tuple(paths)
        self.on_change = on_change
        self.rescan_s = rescan_s
        self.running = False

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False

    def hint(self, paths: set[Path]) -> None:
        self.on_change(paths)


def _refresher(
    load: Callable[[], Snapshot], shown: Shown, paths: Sequence[Path] = ()
) -> tuple[Refresher, FakeWatcher]:
    made: list[FakeWatcher] = []

    def factory(
        paths: Sequence[Path], on_change: Callable[[set[Path]], None], rescan_s: float
    ) -> FakeWatcher:
        made.append(FakeWatcher(paths, on_change, rescan_s))
        return made[-1]

    refresher = Refresher(load, shown, paths, rescan_s=7.0, watcher=factory)
    return refresher, made[0]


def test_hints_and_ticks_redraw_only_what_changed_and_no_timer_runs(team: Team) -> None:
    shown = Shown()
    source = LiveSource(team)
    before = set(threading.enumerate())
    refresher, watcher = _refresher(source.load, shown, source.paths)
    refresher.start()
    # It watches the journal and the mailboxes, with the tick it was given, and runs no
    # thread (no timer) of its own: the watcher is the only source of wake-ups.
    assert watcher.paths == (team.journal.path, team.repo.team_dir / "mailboxes")
    assert (watcher.running, watcher.rescan_s) == (True, 7.0)
    assert set(threading.enumerate()) == before
    assert refresher.shown == 1
    watcher.hint(set())  # a rescan tick with nothing new: no redraw
    watcher.hint({team.journal.path})  # a spurious hint: no redraw
    assert (refresher.hints, refresher.shown) == (2, 1)
    team.board.create("new work")
    watcher.hint(set())  # the tick catches what a dropped hint would have missed
    assert refresher.shown == 2
    assert [t.subject for t in shown.snapshots[-1].tasks] == ["new work"]
    refresher.stop()
    assert not watcher.running
    assert refresher.wait(0) is True


def test_a_failing_load_stops_the_refresher_and_wait_raises(team: Team) -> None:
    source = LiveSource(team)
    calls: list[int] = []

    def load() -> Snapshot:
        calls.append(1)
        if len(calls) > 1:
            raise OSError("journal vanished")
        return source.load()

    shown = Shown()
    refresher, watcher = _refresher(load, shown)
    refresher.start()
    watcher.hint(set())
    with pytest.raises(OSError, match="journal vanished"):
        refresher.wait(WAIT_S)
    watcher.hint(set())  # stopped: no more loads
    assert len(calls) == 2
    refresher.stop()


def test_watch_live_redraws_on_events_without_rich_auto_refresh(team: Team) -> None:
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True, color_system=None)
    started: list[Refresher] = []
    ready = threading.Event()
    shown = Shown()
    errors: list[BaseException] = []

    def on_start(refresher: Refresher) -> None:
        started.append(refresher)
        ready.set()

    def run() -> None:
        try:
            watch_live(
                LiveSource(team), console, rescan_s=NEVER_S, on_start=on_start, on_show=shown
            )
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
            ready.set()

    viewer = threading.Thread(target=run)
    viewer.start()
    try:
        assert ready.wait(WAIT_S) and not errors
        # rich's Live(auto_refresh=False) starts no refresh thread: redraws come from events.
        names = {type(t).__name__ for t in threading.enumerate()}
        assert "_RefreshThread" not in names
        team.board.create("shown live")
        assert shown.until(lambda s: any(t.subject == "shown live" for t in s.tasks))
    finally:
        if started:
            started[0].stop()
        viewer.join(WAIT_S)
    assert not viewer.is_alive() and not errors
    assert "shown live" in out.getvalue()
