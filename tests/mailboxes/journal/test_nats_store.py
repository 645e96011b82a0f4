"""The JetStream event store against a real ``nats-server`` (tests/support/nats_server.py): what
the conformance suite (test_store_conformance.py) cannot show: the server restarting, the message
format, and appends whose outcome is unclear."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from mailboxes import events as ev
from mailboxes.journal.frame import check_journal, encode
from tests.support.fakes import FakeClock
from tests.support.nats_server import NatsServer, running_server

TEAM = "alpha"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


def open_store(server: NatsServer) -> Any:
    from mailboxes.journal.nats import NatsEventStore

    return NatsEventStore(server.url, TEAM, FakeClock(1_000.0))


def task(n: int, op_id: str | None = None) -> ev.EventDraft:
    body = ev.TaskCreated(task_id=f"task_{n}", subject=f"subject {n}")
    return ev.draft("task.created", "lead", body, op_id=op_id)


def add(store: Any, *drafts: ev.EventDraft) -> list[ev.Event]:
    return list(store.append(lambda _seen: drafts, after=store.last_seq()).appended)


def raw_messages(store: Any) -> list[tuple[bytes, dict[str, str]]]:
    """Every message of the store's stream, read with the store's own connection."""

    async def read() -> list[tuple[bytes, dict[str, str]]]:
        info = await store._js.stream_info(store.stream)
        msgs = [await store._js.get_msg(store.stream, s) for s in range(1, info.state.last_seq + 1)]
        return [(m.data or b"", dict(m.headers or {})) for m in msgs]

    result: list[tuple[bytes, dict[str, str]]] = store._run(read())
    return result


def test_the_journal_survives_a_server_restart(server: NatsServer) -> None:
    store = open_store(server)
    written = add(store, task(1, op_id="op-1"), task(2)) + add(store, task(3))
    store.close()
    server.restart()  # same store_dir, same port
    reopened = open_store(server)
    try:
        assert list(reopened.read_from(1)) == written
        assert reopened.last_seq() == 3
        assert add(reopened, task(99, op_id="op-1")) == [written[0]]  # op_id still known
        assert [e.seq for e in add(reopened, task(4))] == [4]
    finally:
        reopened.close()


def test_one_message_per_commit_carrying_journal_lines(server: NatsServer, tmp_path: Path) -> None:
    store = open_store(server)
    try:
        first = add(store, task(1), task(2))
        second = add(store, task(3))
        store.append(lambda _seen: [], after=0)  # nothing decided: nothing published
        messages = raw_messages(store)
    finally:
        store.close()
    assert [data for data, _ in messages] == [
        encode(first[0]) + encode(first[1]),
        encode(second[0]),
    ]
    assert all(len(headers["Nats-Msg-Id"]) == 32 for _, headers in messages)
    assert [headers["Nats-Expected-Last-Sequence"] for _, headers in messages] == ["0", "1"]
    exported = tmp_path / "journal.jsonl"  # the concatenation is an ordinary journal file
    exported.write_bytes(b"".join(data for data, _ in messages))
    report = check_journal(exported)
    assert report.ok and report.last_seq == 3


def _timeout_on_first_publish(
    monkeypatch: pytest.MonkeyPatch, store: Any, *, lands: bool, rival: Any = None
) -> list[int]:
    """Make the store's first publish end in a client timeout; ``lands``: after the server stored
    it (the acknowledgement was lost). ``rival`` appends a task of its own first."""
    from nats.errors import TimeoutError as NatsTimeout

    real = store._publish
    calls: list[int] = []

    async def publish(payload: bytes, headers: dict[str, str]) -> Any:
        calls.append(1)
        if len(calls) > 1:
            return await real(payload, headers)
        if rival is not None:
            add(rival, task(100))
        if lands:
            await real(payload, headers)
        raise NatsTimeout

    monkeypatch.setattr(store, "_publish", publish)
    return calls


@pytest.mark.parametrize("lands", [True, False])
def test_an_unclear_publish_is_stored_exactly_once(
    server: NatsServer, monkeypatch: pytest.MonkeyPatch, lands: bool
) -> None:
    store = open_store(server)
    try:
        calls = _timeout_on_first_publish(monkeypatch, store, lands=lands)
        decided: list[Sequence[ev.Event]] = []

        def decide(seen: Sequence[ev.Event]) -> list[ev.EventDraft]:
            decided.append(seen)
            return [task(1)]

        result = store.append(decide, after=0)
        assert len(decided) == 1  # the same commit, never decided twice
        assert len(calls) == (1 if lands else 2)  # found by its commit id, or published again
        assert [e.seq for e in result.appended] == [1]
        assert list(store.read_from(1)) == list(result.appended)
        assert len(raw_messages(store)) == 1
    finally:
        store.close()


def test_an_unclear_publish_overtaken_by_a_rival_is_decided_again(
    server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, rival = open_store(server), open_store(server)
    try:
        _timeout_on_first_publish(monkeypatch, store, lands=False, rival=rival)
        decided: list[list[int]] = []

        def decide(seen: Sequence[ev.Event]) -> list[ev.EventDraft]:
            decided.append([e.seq for e in seen])
            return [task(1)]

        result = store.append(decide, after=0)
        assert decided == [[], [1]]  # the rival's task was seen before deciding again
        assert [e.seq for e in result.seen] == [1]
        assert [e.seq for e in result.appended] == [2]
        assert [ev.payload(e).task_id for e in store.read_from(1)] == ["task_100", "task_1"]  # type: ignore[attr-defined]
        assert len(raw_messages(store)) == 2
    finally:
        rival.close()
        store.close()


def test_without_nats_py_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from mailboxes.journal.nats import NatsEventStore

    monkeypatch.setitem(sys.modules, "nats", None)  # import nats now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'teamctl\[nats\]'"):
        NatsEventStore("nats://127.0.0.1:1", TEAM)


def test_a_missing_server_skips_here_and_fails_on_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.support.nats_server as support

    monkeypatch.setattr(support, "nats_server_binary", lambda: None)
    monkeypatch.delenv(support.REQUIRE_NATS_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="nats-server is not installed"):
        support.require_nats()
    monkeypatch.setenv(support.REQUIRE_NATS_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="TEAMCTL_REQUIRE_NATS=1 requires it"):
        support.require_nats()


def _construct_in_thread(make: Any) -> BaseException | None:
    """Run ``make()`` in a thread and wait for it (bounded); the error it raised."""
    import threading

    raised: list[BaseException | None] = []

    def target() -> None:
        try:
            make().close()
            raised.append(None)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "construction against a missing server never returned"
    return raised[0]


@pytest.mark.parametrize("kind", ["journal", "liveness"])
def test_a_missing_server_is_one_clear_error_not_a_hang(kind: str) -> None:
    """nats-py retries a first connection for ever when reconnects are unlimited: the stores
    bound it (two request timeouts) and say which servers could not be reached."""
    from mailboxes.journal.nats import NatsEventStore, NatsUnavailable
    from mailboxes.nats_liveness import NatsLiveness
    from tests.support.nats_server import free_ports, require_nats

    require_nats()
    (port,) = free_ports(1)  # nothing listens there
    url = f"nats://127.0.0.1:{port}"
    if kind == "journal":
        error = _construct_in_thread(lambda: NatsEventStore(url, TEAM, timeout=0.5))
    else:
        error = _construct_in_thread(lambda: NatsLiveness(url, TEAM, timeout=0.5))
    assert isinstance(error, NatsUnavailable)
    assert str(error).startswith(f"cannot connect to NATS at {url}: ")
    assert "\n" not in str(error)


def test_the_server_version_is_the_plain_version(server: NatsServer) -> None:
    from mailboxes.nats_liveness import NatsLiveness

    store = open_store(server)
    live = NatsLiveness(server.url, TEAM, ttl=5.0)
    try:
        for version in (store.server_version, live.server_version):
            assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
            assert tuple(int(part) for part in version.split(".")[:2]) >= (2, 12)
    finally:
        live.close()
        store.close()


def _wait_for_feed(store: Any, stream_seq: int) -> None:
    """Wait (bounded) until the store's feed has delivered stream message ``stream_seq``."""
    with store._fed:
        assert store._fed.wait_for(
            lambda: stream_seq in store._feed or store._stream_seq >= stream_seq, timeout=30
        ), "the feed never delivered the rival's commit"


def test_the_feed_brings_other_writers_commits_without_a_request(
    server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rival's commit reaches this store through its live feed: the next append decides on
    it at once, with no catch-up request and no rejected publish."""
    store, rival = open_store(server), open_store(server)
    try:
        add(store, task(1))
        add(rival, task(2))
        _wait_for_feed(store, 2)
        asked: list[int] = []
        real_last, real_publish = store._last_stored, store._publish

        async def last_stored(js: Any) -> int:
            asked.append(1)
            return int(await real_last(js))

        published: list[int] = []

        async def publish(payload: bytes, headers: dict[str, str]) -> Any:
            published.append(1)
            return await real_publish(payload, headers)

        monkeypatch.setattr(store, "_last_stored", last_stored)
        monkeypatch.setattr(store, "_publish", publish)
        decided: list[list[int]] = []

        def decide(seen: Sequence[ev.Event]) -> list[ev.EventDraft]:
            decided.append([e.seq for e in seen])
            return [task(3)]

        result = store.append(decide, after=1)
        assert decided == [[2]]  # decided once, on the rival's commit
        assert (asked, published) == ([], [1])
        assert [e.seq for e in result.appended] == [3]
    finally:
        rival.close()
        store.close()


def _stop_feed(store: Any) -> None:
    """Stop the store's feed for good: its view goes stale until it asks the server."""

    async def stop() -> None:
        await store._feed_sub.unsubscribe()

    store._run(stop())
    store._feed_sub = None
    store._feed_tried = float("inf")  # never started again


@pytest.mark.parametrize("refusal", ["raises", "decides nothing"])
def test_a_refusal_on_a_stale_view_is_decided_again_on_the_servers(
    server: NatsServer, refusal: str
) -> None:
    """An append that would store nothing is trusted only after asking the server: a refusal
    based on what the feed had not brought yet is decided again on the caught-up events."""
    store, rival = open_store(server), open_store(server)
    try:
        add(store, task(1))
        _stop_feed(store)
        add(rival, task(2))  # store's view is now stale
        decided: list[list[int]] = []

        def decide(seen: Sequence[ev.Event]) -> list[ev.EventDraft]:
            decided.append([e.seq for e in seen])
            if not seen:  # "task_2 does not exist"
                if refusal == "raises":
                    raise LookupError("task_2 is unknown")
                return []
            return [task(3)]

        result = store.append(decide, after=1)
        assert decided == [[], [2]]
        assert [e.seq for e in result.appended] == [3]
        # A refusal that holds on the server's view stands (decided twice, then raised).
        with pytest.raises(LookupError):
            store.append(lambda _seen: (_ for _ in ()).throw(LookupError("no")), after=3)
        assert store.last_seq() == 3
    finally:
        rival.close()
        store.close()


def test_a_lost_race_catches_up_to_the_sequence_the_server_names(
    server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a feed, a rejected publish (wrong last sequence) reads exactly the commits it
    missed, backs off (a random wait growing with the races lost in a row) and decides again;
    nothing is stored twice."""
    store, rival = open_store(server), open_store(server)
    try:
        add(store, task(1))
        _stop_feed(store)
        add(rival, task(2))
        add(rival, task(3))
        backed_off: list[int] = []
        monkeypatch.setattr(store, "_back_off", backed_off.append)
        read = _count_reads(monkeypatch, store)
        decided: list[list[int]] = []

        def decide(seen: Sequence[ev.Event]) -> list[ev.EventDraft]:
            decided.append([e.seq for e in seen])
            return [task(4)]

        result = store.append(decide, after=1)
        assert decided == [[], [2, 3]]
        assert backed_off == [1]  # one race lost
        assert read == [2]  # the two commits it missed, in one round of reads
        assert [e.seq for e in result.appended] == [4]
        assert [e.seq for e in store.read_from(1)] == [1, 2, 3, 4]
        assert len(raw_messages(store)) == 4
    finally:
        rival.close()
        store.close()


def _count_reads(monkeypatch: pytest.MonkeyPatch, store: Any) -> list[int]:
    """Count the messages the store reads with requests (not through its feed)."""
    real = store._fetch
    read: list[int] = []

    async def fetch(known: int, target: int, js: Any) -> Any:
        found = await real(known, target, js)
        read.append(len(found))
        return found

    monkeypatch.setattr(store, "_fetch", fetch)
    return read


def test_a_long_stream_opens_at_its_tail(
    server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a stream longer than ``LAZY_FROM`` messages reads its last message only;
    ``read_from(n)`` then reads O(log n) messages to find the one holding ``n`` plus the tail;
    an op id of an early event is still known (every event is read for that)."""
    import mailboxes.journal.nats as nats_store

    monkeypatch.setattr(nats_store, "LAZY_FROM", 8)
    writer = open_store(server)
    try:
        written = add(writer, task(0, op_id="op-early"), task(1))
        for n in range(2, 40):
            written += add(writer, task(n))  # 39 messages, 40 events
    finally:
        writer.close()
    store = open_store(server)
    try:
        read = _count_reads(monkeypatch, store)
        assert store.last_seq() == 40
        assert sum(read) == 1 and len(store._events) == 1  # the last message only
        read.clear()
        assert list(store.read_from(36)) == written[35:]
        assert sum(read) <= 6 + 4  # binary search over 38 messages, then messages 35..38
        read.clear()
        assert list(store.read_from(1)) == written
        assert list(store.read_from(20)) == written[19:]
        # A late reader's append with a known op id gets the stored event, nothing new.
        again = open_store(server)
        try:
            assert again.last_seq() == 40
            assert add(again, task(99, op_id="op-early")) == [written[0]]
            assert again.last_seq() == 40
            assert [e.seq for e in add(again, task(41))] == [41]
        finally:
            again.close()
        assert [e.seq for e in store.read_from(40)] == [40, 41]
    finally:
        store.close()
