"""The JetStream event store against a real ``nats-server`` (tests/support/nats_server.py): what
the conformance suite (test_store_conformance.py) cannot show: the server restarting, the message
format, and appends whose outcome is unclear."""

from __future__ import annotations

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
