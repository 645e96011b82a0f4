"""``NatsBlobs``: the ``BlobStore`` of the JetStream backend (docs/SCALE-OUT.md, "State
snapshots"), so every host of a team starts its board from the same state snapshot.

One stream per team, ``TEAMCTL_<team>_BLOBS`` (file storage, replicas as the journal's:
``min(3, servers)``), subjects ``teamctl.<team>.blob.<name>.…`` (a ``.`` in a blob name
becomes ``=``):

- a blob's bytes are chunks (``CHUNK`` bytes each, under the server's message size limit)
  published to ``….<name>.chunks.<nuid>``, a fresh nuid per ``put``;
- then its head, ``….<name>.head``, JSON ``{"nuid", "size", "chunks", "sha256"}``, published
  with ``Nats-Rollup: sub`` so only the newest head is kept; publishing the head is the moment
  the new blob replaces the old one;
- then the old chunks are purged.

``get`` reads the newest head, then its chunks by direct stream reads (no consumer), and checks
size and digest; a ``put`` that purged the chunks under a reader makes the reader start again
from the new head. A blob is a cache (docs/ARCHITECTURE.md, "Snapshots"): an unreachable
server is ``MailboxUnavailable`` and ``actors/board/snapshot.py`` then folds the journal
instead
(``BlobsUnavailable`` is an ``OSError`` as well, as a file blob's failure would be).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from mailboxes.blobs import check_blob_name
from mailboxes.errors import MailboxUnavailable
from mailboxes.nats_loop import NatsLoop, check_team

if TYPE_CHECKING:
    from nats.js.client import JetStreamContext

__all__ = ["CHUNK", "BlobsUnavailable", "NatsBlobs", "stream_name"]

CHUNK = 512 * 1024
"""Bytes per chunk message (the server's default message limit is 1 MiB)."""
_ATTEMPTS = 5
"""Reads of a blob that a concurrent ``put`` replaced mid-read before giving up (None)."""

T = TypeVar("T")


class BlobsUnavailable(MailboxUnavailable, OSError):
    """The blob stream cannot be reached. An ``OSError`` too, like a file blob that cannot be
    read or written: a snapshot that cannot be read or saved is logged, never a failed command
    (``actors/board/snapshot.py``)."""


def stream_name(team: str) -> str:
    return f"TEAMCTL_{team}_BLOBS"


def _subject(team: str, name: str | None = None) -> str:
    if name is None:
        return f"teamctl.{team}.blob.>"
    return f"teamctl.{team}.blob.{check_blob_name(name).replace('.', '=')}"


class NatsBlobs:
    """The blobs of team ``team`` at ``servers`` (``nats://…`` URLs); thread-safe."""

    def __init__(
        self,
        servers: str | Sequence[str],
        team: str,
        *,
        replicas: int | None = None,
        timeout: float = 5.0,
        chunk: int = CHUNK,
    ) -> None:
        self.team = check_team(team)
        self.stream = stream_name(team)
        self._servers = [servers] if isinstance(servers, str) else list(servers)
        self._wanted = replicas
        self._timeout = timeout
        self._chunk = chunk
        self.replicas = 0
        """Copies of the stream (as created, or as found)."""
        self._js: JetStreamContext | None = None
        self._io = NatsLoop(f"nats-blobs-{team}", timeout=timeout)
        try:
            self._call(self._io.open(self._servers, name=f"teamctl-blobs-{team}"))
            self._call(self._setup())
        except BaseException:
            self._io.close()
            raise

    def get(self, name: str) -> bytes | None:
        """The blob ``name`` whole and checked (None: none, or none that reads back whole)."""
        subject = _subject(self.team, name)
        for _ in range(_ATTEMPTS):
            found = self._call(self._get(subject))
            if found is not _REPLACED:
                return found if isinstance(found, bytes) else None
        return None

    def put(self, name: str, data: bytes) -> None:
        """Store ``data`` as ``name``; the old blob's chunks go once the new head is stored."""
        self._call(self._put(_subject(self.team, name), bytes(data)))

    def close(self) -> None:
        """Close the connection and stop the loop; idempotent."""
        self._io.close()

    # --- helpers ------------------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        from nats.errors import Error as NatsError

        if self._io.closed:
            coro.close()
            raise ValueError(f"blob store {self.stream} is closed")
        try:
            return self._io.run(coro, timeout=6 * self._timeout)
        except (NatsError, TimeoutError, OSError) as exc:
            raise BlobsUnavailable(
                f"the blob store {self.stream} on {', '.join(self._servers)} cannot be "
                f"reached: {exc or type(exc).__name__}"
            ) from exc

    async def _setup(self) -> None:
        from mailboxes.journal.nats import cluster_size, open_stream

        nc = self._io.nc
        assert nc is not None
        self._js = nc.jetstream(timeout=self._timeout)
        self.replicas = await open_stream(
            self._js,
            self.stream,
            _subject(self.team),
            size=cluster_size(nc),
            replicas=self._wanted,
            warn=self._wanted is None,
            allow_rollup_hdrs=True,
        )

    async def _head(self, subject: str) -> dict[str, Any] | None:
        from nats.js.errors import NotFoundError

        assert self._js is not None
        try:
            raw = await self._js.get_msg(self.stream, subject=f"{subject}.head")
        except NotFoundError:
            return None
        try:
            head = json.loads(raw.data or b"")
        except ValueError:
            return None
        return head if isinstance(head, dict) else None

    async def _get(self, subject: str) -> bytes | object | None:
        from nats.js.errors import NotFoundError

        assert self._js is not None
        head = await self._head(subject)
        if head is None:
            return None
        chunks = f"{subject}.chunks.{head.get('nuid')}"
        parts: list[bytes] = []
        seq = 1
        for _ in range(int(head.get("chunks", 0))):
            try:
                raw = await self._js.get_msg(self.stream, seq=seq, subject=chunks, next=True)
            except NotFoundError:
                return _REPLACED  # purged by a newer put: read its head
            assert raw.seq is not None
            parts.append(raw.data or b"")
            seq = raw.seq + 1
        data = b"".join(parts)
        if len(data) != head.get("size") or hashlib.sha256(data).hexdigest() != head.get("sha256"):
            return _REPLACED if await self._head(subject) != head else None
        return data

    async def _put(self, subject: str, data: bytes) -> None:
        assert self._js is not None
        old = await self._head(subject)
        nuid = uuid.uuid4().hex
        chunks = f"{subject}.chunks.{nuid}"
        pieces = [data[i : i + self._chunk] for i in range(0, len(data), self._chunk)]
        try:
            for piece in pieces:
                await self._js.publish(chunks, piece)
            head = {
                "nuid": nuid,
                "size": len(data),
                "chunks": len(pieces),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
            await self._js.publish(
                f"{subject}.head",
                json.dumps(head, sort_keys=True).encode(),
                headers={"Nats-Rollup": "sub"},
            )
        except BaseException:
            # Unreachable: the orphaned chunks stay (docs/SCALE-OUT.md, "State snapshots").
            with contextlib.suppress(Exception):
                await self._js.purge_stream(self.stream, subject=chunks)
            raise
        if old is not None and old.get("nuid"):
            await self._js.purge_stream(self.stream, subject=f"{subject}.chunks.{old['nuid']}")


_REPLACED = object()
"""``_get``: the blob was replaced while being read (read it again)."""
