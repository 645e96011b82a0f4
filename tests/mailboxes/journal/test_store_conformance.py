"""The contract every ``EventStore`` keeps (mailboxes/ports.py), run against each implementation."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from mailboxes import events as ev
from mailboxes.errors import InvalidEvent
from mailboxes.journal.memory import MemoryEventStore
from mailboxes.journal.store import FileJournal
from mailboxes.ports import EventStore
from tests.support.fakes import FakeClock
from tests.support.nats_server import running_server

StoreFactory = Callable[[], EventStore]


@pytest.fixture(params=["memory", "file", "nats"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of stores sharing one backing (for file: one ``.team`` folder; for nats: one
    stream on a real ``nats-server``, each store with its own connection)."""
    made: list[EventStore] = []
    clock = FakeClock(1_000.0)
    memory = MemoryEventStore(clock)
    with ExitStack() as stack:
        if request.param == "nats":
            from mailboxes.journal.nats import NatsEventStore

            server = stack.enter_context(contextmanager(running_server)(tmp_path / "nats"))

        def factory() -> EventStore:
            store: EventStore
            if request.param == "memory":
                store = memory
            elif request.param == "file":
                store = FileJournal(tmp_path, clock)
            else:
                store = NatsEventStore(server.url, "conformance", clock)
            made.append(store)
            return store

        yield factory
        for store in made:
            store.close()


def task(n: int, op_id: str | None = None) -> ev.EventDraft:
    body = ev.TaskCreated(task_id=f"task_{n}", subject=f"subject {n}", metadata={"n": n})
    return ev.draft("task.created", "lead", body, op_id=op_id)


def add(store: EventStore, *drafts: ev.EventDraft, after: int | None = None) -> list[ev.Event]:
    start = store.last_seq() if after is None else after
    return list(store.append(lambda _seen: drafts, after=start).appended)


def test_empty_store(make_store: StoreFactory) -> None:
    store = make_store()
    assert store.last_seq() == 0
    assert list(store.read_from(1)) == []
    assert isinstance(store, EventStore)


def test_dense_ordered_seqs_and_round_trip(make_store: StoreFactory) -> None:
    store = make_store()
    first = add(store, task(1), task(2))
    second = add(store, task(3))
    assert [e.seq for e in first + second] == [1, 2, 3]
    assert store.last_seq() == 3
    stored = list(store.read_from(1))
    assert stored == first + second
    assert [ev.payload(e) for e in stored] == [ev.payload(task(n)) for n in (1, 2, 3)]
    assert all(e.ts == 1_000.0 and e.actor == "lead" for e in stored)  # ts from the clock
    assert list(store.read_from(2)) == stored[1:]
    assert list(store.read_from(0)) == stored
    assert list(store.read_from(4)) == []


def test_decide_sees_exactly_the_events_after_after(make_store: StoreFactory) -> None:
    store = make_store()
    add(store, task(1), task(2), task(3))
    seen_by_decide: list[Sequence[ev.Event]] = []

    def decide(seen: Sequence[ev.Event]) -> Sequence[ev.EventDraft]:
        seen_by_decide.append(seen)
        return [task(4)]

    committed: list[Sequence[ev.Event]] = []
    result = store.append(decide, after=1, on_commit=committed.append)
    assert [e.seq for e in seen_by_decide[0]] == [2, 3]
    assert [e.seq for e in result.seen] == [2, 3]
    assert [e.seq for e in result.appended] == [4]
    assert [e.seq for e in committed[0]] == [2, 3, 4]


def test_on_commit_runs_even_when_nothing_is_appended(make_store: StoreFactory) -> None:
    store = make_store()
    add(store, task(1))
    committed: list[Sequence[ev.Event]] = []
    result = store.append(lambda seen: [], after=0, on_commit=committed.append)
    assert result.appended == () and [e.seq for e in result.seen] == [1]
    assert [e.seq for e in committed[0]] == [1]


def test_duplicate_op_id_returns_the_stored_event(make_store: StoreFactory) -> None:
    store = make_store()
    (original,) = add(store, task(1, op_id="op-a"))
    again = add(store, task(99, op_id="op-a"), task(2, op_id="op-b"))
    assert again[0] == original
    assert again[1].seq == 2
    assert store.last_seq() == 2
    in_batch = add(store, task(3, op_id="op-c"), task(4, op_id="op-c"))
    assert in_batch[0] == in_batch[1] and in_batch[0].seq == 3
    assert [e.op_id for e in store.read_from(1)] == ["op-a", "op-b", "op-c"]
    assert add(store, task(5, op_id="op-a"), task(6, op_id="op-b")) == [original, again[1]]
    assert store.last_seq() == 3


def test_op_id_seen_by_a_second_store_on_the_same_backing(make_store: StoreFactory) -> None:
    first, second = make_store(), make_store()
    (original,) = add(first, task(1, op_id="op-x"))
    assert add(second, task(1, op_id="op-x")) == [original]
    assert second.last_seq() == first.last_seq() == 1


def test_decide_raising_writes_nothing(make_store: StoreFactory) -> None:
    store = make_store()
    add(store, task(1))
    committed: list[Sequence[ev.Event]] = []

    def refuse(seen: Sequence[ev.Event]) -> Sequence[ev.EventDraft]:
        raise LookupError("task is not ready")

    with pytest.raises(LookupError):
        store.append(refuse, after=0, on_commit=committed.append)
    assert committed == []
    assert store.last_seq() == 1
    assert [e.seq for e in add(store, task(2))] == [2]


def test_an_invalid_draft_aborts_the_whole_batch(make_store: StoreFactory) -> None:
    store = make_store()
    bad = ev.EventDraft(type="task.claimed", actor="lead", data={"task_id": "task_1"})
    with pytest.raises(InvalidEvent):
        add(store, task(1), bad)
    unknown = ev.EventDraft(type="task.vanished", actor="lead")
    with pytest.raises(InvalidEvent):
        add(store, task(1), unknown)
    assert store.last_seq() == 0 and list(store.read_from(1)) == []


def test_after_outside_the_stored_range_is_refused(make_store: StoreFactory) -> None:
    store = make_store()
    add(store, task(1))
    for after in (-1, 2):
        with pytest.raises(ValueError, match="after"):
            store.append(lambda seen: [task(2)], after=after)
    assert store.last_seq() == 1


def test_close_is_idempotent_and_final(make_store: StoreFactory) -> None:
    store = make_store()
    store.close()
    store.close()
    with pytest.raises(ValueError, match="closed"):
        add(store, task(1), after=0)


def test_threads_appending_concurrently_are_linearizable(make_store: StoreFactory) -> None:
    """Each append decides task_<n> from its caught-up view: any lost update shows as a gap or a
    duplicate id."""
    stores = [make_store() for _ in range(2)]
    threads, per_thread = 6, 25
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(store: EventStore) -> None:
        try:
            start.wait(timeout=30)
            after = 0
            count = 0
            for _ in range(per_thread):

                def decide(seen: Sequence[ev.Event], known: int = count) -> list[ev.EventDraft]:
                    return [task(known + len(seen) + 1)]

                result = store.append(decide, after=after)
                count += len(result.seen) + len(result.appended)
                after = result.appended[-1].seq
                assert after == count
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    pool = [
        threading.Thread(target=worker, args=(stores[i % 2],), daemon=True) for i in range(threads)
    ]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=60)
    assert errors == []
    stored = list(stores[0].read_from(1))
    assert [e.seq for e in stored] == list(range(1, threads * per_thread + 1))
    ids = [ev.payload(e).task_id for e in stored]  # type: ignore[attr-defined]
    assert ids == [f"task_{n}" for n in range(1, threads * per_thread + 1)]
