"""The blocking inotify file watcher (mailboxes/inotify.py behind mailboxes/watch.py
``FileWatcher``): it wakes on every kind of change (create, write, delete, rename in and out, a
Maildir link into ``new/``), on folders created or moved in after it started and on targets that
did not exist yet, turns a queue overflow into a re-scan tick, and does not wake at all while
nothing happens (counted by the kernel: the thread's voluntary context switches)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mailboxes.inotify import available
from mailboxes.journal.store import FileJournal
from mailboxes.maildir import Maildir
from mailboxes.messages import MessageDraft
from mailboxes.ports import Hint, InboxChanged
from mailboxes.watch import Backend, FileWatcher, HintWatcher

pytestmark = pytest.mark.skipif(not available(), reason="inotify is Linux only")


class Seen:
    """Batches of changed paths from a watcher; ``wait(pred)`` blocks until one matches."""

    def __init__(self) -> None:
        self.batches: list[set[Path]] = []
        self._changed = threading.Condition()

    def __call__(self, paths: set[Path]) -> None:
        with self._changed:
            self.batches.append(set(paths))
            self._changed.notify_all()

    def wait(self, pred: Callable[[set[Path]], bool]) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: any(pred(b) for b in self.batches), 10)

    def wait_path(self, path: Path) -> bool:
        return self.wait(lambda batch: path in batch)

    def clear(self) -> None:
        with self._changed:
            self.batches.clear()


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Path, Seen, FileWatcher]]:
    root = tmp_path / "root"
    root.mkdir()
    seen = Seen()
    watcher = FileWatcher([root], seen, rescan_s=600, backend="inotify")
    watcher.start()
    try:
        assert watcher.using == "inotify"
        yield root, seen, watcher
    finally:
        watcher.stop()


def test_each_kind_of_change_wakes_the_watcher(
    watched: tuple[Path, Seen, FileWatcher], tmp_path: Path
) -> None:
    root, seen, _ = watched
    (root / "new").mkdir()
    (root / "tmp").mkdir()
    assert seen.wait_path(root / "new")

    created = root / "created"
    created.write_text("1")
    assert seen.wait_path(created)

    seen.clear()
    with open(created, "a", encoding="utf-8") as f:  # a write to an existing file
        f.write("2")
    assert seen.wait_path(created)

    seen.clear()
    os.link(created, root / "new" / "linked")  # a Maildir delivery: link into new/
    assert seen.wait_path(root / "new" / "linked")

    (root / "tmp" / "m").write_text("m")
    seen.clear()
    os.rename(root / "tmp" / "m", root / "new" / "m")  # rename into new/: both ends reported
    assert seen.wait(lambda b: {root / "new" / "m", root / "tmp" / "m"} <= b)

    outside = tmp_path / "outside"
    outside.write_text("o")
    seen.clear()
    os.rename(outside, root / "moved-in")  # moved in from an unwatched folder
    assert seen.wait_path(root / "moved-in")

    seen.clear()
    os.rename(root / "moved-in", tmp_path / "moved-out")  # moved out
    assert seen.wait_path(root / "moved-in")

    seen.clear()
    created.unlink()
    assert seen.wait_path(created)


def test_folders_created_or_moved_in_later_are_watched_with_their_files(
    watched: tuple[Path, Seen, FileWatcher], tmp_path: Path
) -> None:
    root, seen, _ = watched
    # A new inbox: the folders and a file appear together; the file may predate the watch.
    deep = root / "carol" / "new"
    deep.mkdir(parents=True)
    (deep / "first").write_text("1")
    assert seen.wait_path(deep / "first")
    (deep / "second").write_text("2")  # the new folder is watched from now on
    assert seen.wait_path(deep / "second")

    prepared = tmp_path / "prepared" / "new"
    prepared.mkdir(parents=True)
    (prepared / "inside").write_text("i")
    os.rename(tmp_path / "prepared", root / "dave")  # a whole tree moved in
    assert seen.wait_path(root / "dave" / "new" / "inside")
    (root / "dave" / "new" / "later").write_text("l")
    assert seen.wait_path(root / "dave" / "new" / "later")

    os.rename(root / "dave", tmp_path / "gone")  # moved out: no longer reported
    seen.clear()
    (tmp_path / "gone" / "new" / "after").write_text("a")
    (root / "marker").write_text("m")
    assert seen.wait_path(root / "marker")
    assert not any(any("after" in p.name for p in b) for b in seen.batches)


def test_targets_that_do_not_exist_yet_are_watched_once_created(tmp_path: Path) -> None:
    tasks = tmp_path / "repo" / ".tasks"  # neither the folder nor its parent exist yet
    journal = tmp_path / "team" / "journal.jsonl"
    seen = Seen()
    with FileWatcher([tasks, journal], seen, rescan_s=600, backend="inotify") as watcher:
        assert watcher.using == "inotify"
        tasks.mkdir(parents=True)
        (tasks / "task_1.json").write_text("{}")
        assert seen.wait_path(tasks / "task_1.json")
        (tasks / "task_2.json").write_text("{}")
        assert seen.wait_path(tasks / "task_2.json")

        journal.parent.mkdir()
        (journal.parent / "other").write_text("not the journal")
        journal.write_text("x")
        assert seen.wait_path(journal)
        seen.clear()
        with open(journal, "a", encoding="utf-8") as f:
            f.write("y")
        assert seen.wait_path(journal)
    assert not any(journal.parent / "other" in b for b in seen.batches)  # only the target file


def test_a_new_inbox_created_after_start_wakes_its_agent(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)
    box = Maildir(tmp_path / "mailboxes")
    box.ensure_inbox("lead")
    batches: list[frozenset[Hint]] = []
    changed = threading.Condition()

    def on_hints(hints: frozenset[Hint]) -> None:
        with changed:
            batches.append(hints)
            changed.notify_all()

    def saw(hint: Hint) -> bool:
        with changed:
            return changed.wait_for(lambda: any(hint in b for b in batches), 10)

    with HintWatcher(
        on_hints, journal=journal.path, mailboxes=box.root, rescan_s=600, backend="inotify"
    ):
        box.ensure_inbox("erin")  # a teammate spawned after the watcher started
        send = (
            "import sys; from mailboxes.maildir import Maildir; "
            "from mailboxes.messages import MessageDraft; "
            "Maildir(sys.argv[1]).deliver('lead', MessageDraft.text('erin', 'hi'))"
        )
        subprocess.run([sys.executable, "-c", send, str(box.root)], check=True, timeout=60)
        assert saw(InboxChanged("erin"))
        box.deliver("lead", MessageDraft.text("erin", "again"))
        journal.close()
        assert saw(InboxChanged("erin"))


def test_a_queue_overflow_becomes_a_rescan_tick(tmp_path: Path) -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 100_000:
        pytest.skip(f"max_queued_events is {limit}: too many writes to overflow it")
    root = tmp_path / "root"
    root.mkdir()
    first = threading.Event()
    release = threading.Event()
    batches: list[set[Path]] = []
    done = threading.Condition()

    def on_change(paths: set[Path]) -> None:
        if not first.is_set():
            first.set()
            release.wait(30)  # hold the thread: the kernel queue fills meanwhile
        with done:
            batches.append(paths)
            done.notify_all()

    with FileWatcher([root], on_change, rescan_s=600, backend="inotify"):
        (root / "start").write_text("s")
        assert first.wait(10)
        a = os.open(root / "a", os.O_WRONLY | os.O_CREAT)
        b = os.open(root / "b", os.O_WRONLY | os.O_CREAT)
        try:
            for _ in range(limit // 2 + 10):  # alternating, so the kernel cannot merge them
                os.write(a, b"x")
                os.write(b, b"y")
        finally:
            os.close(a)
            os.close(b)
        release.set()
        with done:  # the periodic tick is 10 minutes away: an empty batch is the overflow
            assert done.wait_for(lambda: set() in batches, 10)


def _switches(tid: int) -> int:
    """Voluntary context switches of thread ``tid``: each is one wake-up from a blocking wait."""
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("voluntary_ctxt")).split()[1])


def _idle_wakeups(tmp_path: Path, backend: Backend) -> tuple[int, int]:
    """``(kernel wake-ups, loop iterations)`` of an idle watcher over a team's files in a fixed
    quiet window (no tick is due: ``rescan_s`` is 10 minutes)."""
    tmp_path.mkdir()
    journal = FileJournal(tmp_path)
    box = Maildir(tmp_path / "mailboxes")
    for agent in ("lead", "bob", "carol"):
        box.ensure_inbox(agent)
    watcher = FileWatcher([box.root, journal.path], lambda _p: None, 600, backend=backend)
    watcher.start()
    try:
        tid = watcher.thread_id
        assert tid is not None
        before, loops = _switches(tid), watcher.wakeups
        threading.Event().wait(0.5)  # the idle window being measured
        return _switches(tid) - before, watcher.wakeups - loops
    finally:
        watcher.stop()
        journal.close()


def test_an_idle_watcher_never_wakes(tmp_path: Path) -> None:
    switches, loops = _idle_wakeups(tmp_path / "inotify", "inotify")
    assert loops == 0  # the wait never returned
    assert switches <= 1  # at most the hand-over of the GIL on its way into poll()
    # The same measure sees a polling loop (watchfiles steps every 5 ms): it can fail.
    polling, _ = _idle_wakeups(tmp_path / "watchfiles", "watchfiles")
    assert polling > 5


def test_a_target_file_made_before_its_new_folder_is_watched_is_reported(tmp_path: Path) -> None:
    """The folder of a target appears and the target is written in it before the watcher has
    put a watch on the folder (no event can come for it then): arming the folder reports it."""
    from mailboxes.inotify import InotifyTree

    journal = tmp_path / "team" / "journal.jsonl"
    tree = InotifyTree((journal,))
    try:
        tree.arm()
        journal.parent.mkdir()
        journal.write_text("x")  # before the tree has seen the folder's creation
        changed, overflow = tree.read()
        assert not overflow
        assert journal in changed
        assert not tree.pending
    finally:
        tree.close()
