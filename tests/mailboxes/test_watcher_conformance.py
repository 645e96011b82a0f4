"""The contract every ``Watcher`` keeps (mailboxes/ports.py), run against the file watcher
(mailboxes/watch.py ``HintWatcher``) and the JetStream one (mailboxes/nats_watch.py
``NatsWatcher``, a real ``nats-server`` from the wheel): a change made by another process or
connection yields the right typed hint, a ``Tick`` comes without changes, batches are never
empty, and ``stop`` joins (also from inside a callback)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mailboxes.events import TeamCreated, draft
from mailboxes.messages import MessageDraft
from mailboxes.ports import EventStore, Hint, InboxChanged, JournalAdvanced, Tick, Watcher
from tests.support.nats_server import running_server

ROOT = Path(__file__).resolve().parents[2]

SEND = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from mailboxes.messages import MessageDraft

    kind, where = sys.argv[1], sys.argv[2]
    if kind == "file":
        from mailboxes.maildir import Maildir
        box = Maildir(Path(where))
    else:
        from mailboxes.nats_mailbox import NatsMailbox
        box = NatsMailbox(where, "w")
    box.deliver("lead", MessageDraft.text("bob", "wake up"))
    getattr(box, "close", lambda: None)()
    """
)


@dataclass
class Backend:
    kind: str
    where: str
    """The Maildir root, or the server URL."""
    journal: EventStore
    mailbox: Any
    watcher: Callable[..., Watcher]
    """``watcher(on_hints, rescan_s)``: a new, not started watcher of the whole team."""

    def send_from_another_process(self) -> None:
        subprocess.run(
            [sys.executable, "-c", SEND, self.kind, self.where],
            check=True,
            timeout=60,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )


@pytest.fixture(params=["file", "file-watchfiles", "nats"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """``file``: the default file watcher (inotify on Linux); ``file-watchfiles``: its fallback."""
    with ExitStack() as stack:
        if request.param.startswith("file"):
            from mailboxes.journal.store import FileJournal
            from mailboxes.maildir import Maildir
            from mailboxes.watch import HintWatcher

            journal: Any = FileJournal(tmp_path)
            box: Any = Maildir(tmp_path / "mailboxes")
            path, root = journal.path, box.root
            engine: Any = "watchfiles" if request.param == "file-watchfiles" else "auto"

            def make(on_hints: Any, rescan_s: float) -> Watcher:
                return HintWatcher(
                    on_hints, journal=path, mailboxes=root, rescan_s=rescan_s, backend=engine
                )

            where = str(root)
        else:
            from mailboxes.journal.nats import NatsEventStore
            from mailboxes.nats_mailbox import NatsMailbox
            from mailboxes.nats_watch import NatsWatcher

            server = stack.enter_context(contextmanager(running_server)(tmp_path / "nats"))
            url = server.url
            journal = NatsEventStore(url, "w")
            box = NatsMailbox(url, "w")
            stack.callback(box.close)

            def make(on_hints: Any, rescan_s: float) -> Watcher:
                return NatsWatcher(url, "w", on_hints, rescan_s=rescan_s)

            where = url
        stack.callback(journal.close)
        for agent in ("lead", "bob", "carol"):
            box.ensure_inbox(agent)
        yield Backend(request.param.split("-")[0], where, journal, box, make)


class Hints:
    """A thread-safe record of hint batches, with a bounded wait for one hint."""

    def __init__(self) -> None:
        self.batches: list[frozenset[Hint]] = []
        self._changed = threading.Condition()

    def __call__(self, hints: frozenset[Hint]) -> None:
        with self._changed:
            self.batches.append(hints)
            self._changed.notify_all()

    def wait_for(self, hint: Hint) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: any(hint in b for b in self.batches), 20)

    def seen(self) -> set[Hint]:
        with self._changed:
            return set().union(*self.batches)


def test_a_delivery_by_another_process_is_inbox_changed_of_its_agent(backend: Backend) -> None:
    hints = Hints()
    watcher = backend.watcher(hints, 60)
    watcher.start()
    try:
        backend.send_from_another_process()
        assert hints.wait_for(InboxChanged("bob"))
    finally:
        watcher.stop()
    assert hints.seen() <= {InboxChanged("bob")}  # no journal hint, nobody else's inbox
    assert all(hints.batches)  # never an empty batch
    assert [e.text for e in backend.mailbox.pending("bob")] == ["wake up"]


def test_a_journal_append_is_journal_advanced(backend: Backend) -> None:
    hints = Hints()
    with ExitStack() as stack:
        watcher = backend.watcher(hints, 60)
        watcher.start()
        stack.callback(watcher.stop)
        body = TeamCreated(name="t")
        backend.journal.append(lambda _seen: [draft("team.created", "cli", body)], after=0)
        assert hints.wait_for(JournalAdvanced())
    assert hints.seen() == {JournalAdvanced()}


def test_an_ack_is_inbox_changed(backend: Backend) -> None:
    [sent] = backend.mailbox.deliver("lead", MessageDraft.text("carol", "hello"))
    assert [e.id for e in backend.mailbox.pending("carol")] == [sent.id]
    hints = Hints()
    watcher = backend.watcher(hints, 60)
    watcher.start()
    try:
        backend.mailbox.ack("carol", [sent.id])
        assert hints.wait_for(InboxChanged("carol"))
    finally:
        watcher.stop()
    assert hints.seen() <= {InboxChanged("carol")}


def test_a_tick_comes_without_changes(backend: Backend) -> None:
    ticks = Hints()
    watcher = backend.watcher(ticks, 0.02)
    watcher.start()
    try:
        assert ticks.wait_for(Tick())
    finally:
        watcher.stop()


def test_stop_joins_and_is_idempotent(backend: Backend) -> None:
    before = set(threading.enumerate())
    watcher = backend.watcher(Hints(), 0.02)
    watcher.start()
    watcher.start()  # idempotent
    watcher.stop()
    watcher.stop()
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_stop_from_inside_a_callback(backend: Backend) -> None:
    stopped = threading.Event()
    watcher: Watcher

    def on_hints(hints: frozenset[Hint]) -> None:
        watcher.stop()
        stopped.set()

    watcher = backend.watcher(on_hints, 0.02)
    watcher.start()
    assert stopped.wait(20)
    watcher.stop()  # again, from outside: nothing left to do
