"""The ``BlobStore`` contract (mailboxes/ports.py) on the file backend (``FileBlobs``) and on
JetStream (``NatsBlobs``, a real ``nats-server`` from the wheel): two store objects on one
backing (one folder, or one stream through two connections) see each other's blobs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from mailboxes.blobs import FileBlobs
from mailboxes.ports import BlobStore
from tests.support.nats_server import NatsServer, running_server

Make = Callable[..., Any]


@pytest.fixture(params=["file", "nats"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Make]:
    made: list[Any] = []
    with ExitStack() as stack:
        if request.param == "nats":
            from mailboxes.nats_blobs import NatsBlobs

            server = stack.enter_context(contextmanager(running_server)(tmp_path / "nats"))

        def factory(**options: Any) -> Any:
            store: Any
            if request.param == "file":
                store = FileBlobs(tmp_path / "snapshots")
            else:
                store = NatsBlobs(server.url, "blobs", **options)
            made.append(store)
            return store

        yield factory
        for store in made:
            close = getattr(store, "close", None)
            if close is not None:
                close()


def test_put_then_get_from_another_store_object(make: Make) -> None:
    writer, reader = make(), make()
    assert isinstance(writer, BlobStore) and isinstance(reader, BlobStore)
    assert reader.get("state.snapshot") is None
    writer.put("state.snapshot", b"first")
    assert reader.get("state.snapshot") == b"first"
    writer.put("state.snapshot", b"second, longer")
    assert reader.get("state.snapshot") == b"second, longer"
    assert reader.get("other") is None


def test_blobs_are_whole_bytes_of_any_size(make: Make) -> None:
    store = make()
    data = os.urandom(3 * 1024 * 1024 + 17)  # several chunks on JetStream
    store.put("big", data)
    assert store.get("big") == data
    store.put("big", b"")
    assert store.get("big") == b""


@pytest.mark.parametrize("name", ["../x", "a/b", "", ".hidden", "a" * 200])
def test_bad_names_are_refused(make: Make, name: str) -> None:
    store = make()
    with pytest.raises(ValueError):
        store.put(name, b"x")
    with pytest.raises(ValueError):
        store.get(name)


# --- JetStream only -----------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


def _stream_msgs(server: NatsServer, stream: str) -> int:
    import asyncio

    import nats

    async def ask() -> int:
        nc = await nats.connect(server.url)
        try:
            info = await nc.jetstream().stream_info(stream)
            return int(info.state.messages)
        finally:
            await nc.close()

    return asyncio.run(ask())


def test_a_replaced_blob_leaves_no_old_chunks(server: NatsServer) -> None:
    from mailboxes.nats_blobs import NatsBlobs, stream_name

    store = NatsBlobs(server.url, "blobs", chunk=1000)
    try:
        store.put("s", b"a" * 2500)  # 3 chunks + head
        assert _stream_msgs(server, stream_name("blobs")) == 4
        store.put("s", b"b" * 1500)  # 2 chunks + head; the old ones are purged
        assert _stream_msgs(server, stream_name("blobs")) == 3
        assert store.get("s") == b"b" * 1500
        assert store.replicas == 1  # a single server
    finally:
        store.close()


def test_a_blob_whose_chunks_were_damaged_reads_as_none(server: NatsServer) -> None:
    import asyncio

    import nats

    from mailboxes.nats_blobs import NatsBlobs, stream_name

    store = NatsBlobs(server.url, "blobs", chunk=1000)
    try:
        store.put("s", b"a" * 1500)

        async def tamper() -> None:  # purge the chunks behind the head's back
            nc = await nats.connect(server.url)
            try:
                await nc.jetstream().purge_stream(
                    stream_name("blobs"), subject="teamctl.blobs.blob.s.chunks.>"
                )
            finally:
                await nc.close()

        asyncio.run(tamper())
        assert store.get("s") is None
        store.put("s", b"fresh")
        assert store.get("s") == b"fresh"
    finally:
        store.close()


def test_an_unreachable_server_costs_a_snapshot_never_a_command(server: NatsServer) -> None:
    from actors.board import snapshot
    from actors.board.state import EMPTY
    from mailboxes.errors import MailboxesError
    from mailboxes.events import Event
    from mailboxes.nats_blobs import NatsBlobs

    store = NatsBlobs(server.url, "blobs", timeout=0.5)
    try:
        server.stop()
        with pytest.raises(MailboxesError):
            store.get("s")
        with pytest.raises(OSError):  # as a file blob's failure: snapshot.py logs it
            store.put("s", b"x")
        at = Event(seq=1, ts=1.0, type="team.created", actor="cli", data={"name": "t"})
        assert snapshot.save(store, EMPTY, at) is False
        assert snapshot.load(store, None) is None  # type: ignore[arg-type]
    finally:
        store.close()
