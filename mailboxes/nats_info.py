"""What a JetStream team's servers are, for ``teamctl init`` and ``teamctl doctor``
(docs/SCALE-OUT.md, "Checking a cluster").

``probe`` connects once (no endless reconnecting: an unreachable server is ``NatsUnreachable`` within
about two connect timeouts per server) and reports the server's version, how many servers its
cluster has, the team's streams with their replicas, and, when a monitoring endpoint is given,
whether the server syncs every write before acknowledging it (``/varz``
``jetstream.config.sync_always``). A server older than ``MIN_VERSION`` is reported without asking
it anything else (``ServerReport.too_old``).

``import_journal`` puts a file journal's events onto an empty journal stream unchanged (seqs,
timestamps, op ids): one message per batch of events, framed like ``journal.jsonl``, each published
with the expected last sequence, so nothing else can be appended in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mailboxes.errors import MailboxesError
from mailboxes.journal.frame import encode
from mailboxes.journal.nats import (
    EXPECTED_LAST_SEQ,
    INSTALL_HINT,
    MAX_REPLICAS,
    MSG_ID,
    cluster_size,
    server_version,
    stream_name,
    subject_name,
)

if TYPE_CHECKING:
    from nats.aio.client import Client

    from mailboxes.events import Event

__all__ = [
    "MIN_VERSION",
    "NatsTooOld",
    "NatsUnreachable",
    "ServerReport",
    "StreamReport",
    "import_journal",
    "parse_version",
    "probe",
]

MIN_VERSION = (2, 12, 0)
"""The oldest nats-server the backend accepts (older ones predate a fix to clustered
compare-and-swap; docs/SCALE-OUT.md, "Install")."""

IMPORT_BATCH_BYTES = 256 * 1024
"""Most bytes of framed events in one imported message (the server's default limit is 1 MiB)."""


class NatsUnreachable(MailboxesError):
    """No server of the list answered."""


class NatsTooOld(MailboxesError):
    """The server is older than ``MIN_VERSION``."""


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``"2.15.1"`` (also ``"v2.12.0-beta.1"``) as ``(2, 15, 1)``; None when it is not a version."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def min_version_text() -> str:
    return ".".join(str(part) for part in MIN_VERSION[:2])


@dataclass(frozen=True)
class StreamReport:
    """One of the team's streams (the journal, the members bucket, the mailboxes)."""

    name: str
    replicas: int
    messages: int


@dataclass(frozen=True)
class ServerReport:
    """What ``probe`` found."""

    url: str
    """The server that answered."""
    version: str
    cluster_size: int
    """Servers in its cluster (1: not in a cluster), from its ``INFO``."""
    journal: str
    """The team's journal stream name."""
    streams: tuple[StreamReport, ...] = ()
    """The team's streams that exist (empty: the team is not on this cluster yet, or the server
    is too old to ask)."""
    sync_always: bool | None = None
    """The server syncs every write before acknowledging it; None: unknown (no monitoring
    endpoint, or it did not say)."""
    sync_detail: str = "unknown"
    """How the answer was found, for people."""

    @property
    def too_old(self) -> bool:
        parsed = parse_version(self.version)
        return parsed is None or parsed < MIN_VERSION

    @property
    def wanted_replicas(self) -> int:
        return min(MAX_REPLICAS, self.cluster_size)

    @property
    def journal_events(self) -> int | None:
        """Messages in the journal stream (None: no such stream)."""
        for stream in self.streams:
            if stream.name == self.journal:
                return stream.messages
        return None

    def too_old_message(self) -> str:
        return (
            f"nats-server {self.version} at {self.url} is too old: the JetStream backend needs "
            f"{min_version_text()} or newer (older servers predate a fix to clustered "
            "compare-and-swap; docs/SCALE-OUT.md)"
        )


def probe(
    servers: str | Sequence[str],
    team: str,
    *,
    monitor: str | None = None,
    timeout: float = 5.0,
) -> ServerReport:
    """Connect to one of ``servers`` (``nats://HOST:PORT`` each) and report on it and team
    ``team``'s streams; ``monitor`` (``http://HOST:PORT``, the server's ``http_port``) adds whether
    it syncs every write. ``NatsUnreachable`` when no server answers within the timeouts."""
    try:
        import nats  # noqa: F401
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    urls = [servers] if isinstance(servers, str) else list(servers)
    report = asyncio.run(_probe(urls, team, timeout))
    if monitor is not None and not report.too_old:
        sync_always, detail = _monitor_sync(monitor, timeout)
        report = ServerReport(
            url=report.url,
            version=report.version,
            cluster_size=report.cluster_size,
            journal=report.journal,
            streams=report.streams,
            sync_always=sync_always,
            sync_detail=detail,
        )
    return report


async def _connect(urls: list[str], timeout: float, name: str) -> Client:
    import nats

    async def quiet(_exc: Exception) -> None:  # the failure is raised once, not logged per try
        return None

    try:
        return await nats.connect(
            servers=urls,
            connect_timeout=timeout,
            allow_reconnect=True,
            max_reconnect_attempts=1,  # each server at most twice, then NoServersError
            reconnect_time_wait=0.1,
            error_cb=quiet,
            name=name,
        )
    except Exception as exc:  # NoServersError, OSError, a timeout: all "not reachable"
        reason = str(exc) or type(exc).__name__
        raise NatsUnreachable(
            f"cannot reach the JetStream server(s) {', '.join(urls)}: {reason}"
        ) from None


async def _probe(urls: list[str], team: str, timeout: float) -> ServerReport:
    nc = await _connect(urls, timeout, f"teamctl-probe-{team}")
    try:
        url = nc.connected_url.geturl() if nc.connected_url else urls[0]
        report = ServerReport(
            url=url,
            version=server_version(nc) or "?",
            cluster_size=cluster_size(nc),
            journal=stream_name(team),
        )
        if report.too_old:
            return report
        js = nc.jetstream(timeout=timeout)
        mine = (f"TEAMCTL_{team}_", f"KV_TEAMCTL_{team}_")
        streams = []
        offset = 0
        try:
            while page := await js.streams_info(offset):  # paged by the server
                offset += len(page)
                for info in page:
                    name = info.config.name or ""
                    if name.startswith(mine):
                        streams.append(
                            StreamReport(
                                name=name,
                                replicas=info.config.num_replicas or 1,
                                messages=info.state.messages,
                            )
                        )
        except Exception as exc:  # no responders, a timeout, an API error
            reason = str(exc) or type(exc).__name__
            raise NatsUnreachable(
                f"nats-server at {url} does not answer JetStream requests (is JetStream "
                f"enabled, -js?): {reason}"
            ) from None
        streams.sort(key=lambda s: s.name)
        return ServerReport(
            url=url,
            version=report.version,
            cluster_size=report.cluster_size,
            journal=report.journal,
            streams=tuple(streams),
        )
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), timeout)


def _monitor_sync(monitor: str, timeout: float) -> tuple[bool | None, str]:
    """``(sync_always, detail)`` from the monitoring endpoint's ``/varz``."""
    url = monitor.rstrip("/") + "/varz"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            varz = json.loads(response.read())
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return None, f"unknown ({url} did not answer: {exc})"
    config = (varz.get("jetstream") or {}).get("config") or {}
    if config.get("sync_always") is True:
        return True, f"sync_interval: always ({url})"
    interval = config.get("sync_interval")
    if isinstance(interval, int | float) and interval > 0:
        return False, f"sync_interval {interval / 1e9:g}s, not always ({url})"
    return None, f"unknown ({url} does not say)"


async def _import(urls: list[str], team: str, events: Sequence[Event], timeout: float) -> int:
    nc = await _connect(urls, timeout, f"teamctl-import-{team}")
    try:
        js = nc.jetstream(timeout=timeout)
        info = await js.stream_info(stream_name(team))
        last = info.state.last_seq
        if info.state.messages:
            raise MailboxesError(
                f"team {team} on the cluster already has events (stream {stream_name(team)}): "
                "import only into a team that has none"
            )
        batch: list[bytes] = []
        size = 0
        published = 0

        async def flush() -> None:
            nonlocal last, batch, size, published
            if not batch:
                return
            headers = {EXPECTED_LAST_SEQ: str(last), MSG_ID: f"import-{team}-{last + 1}"}
            ack = await js.publish(subject_name(team), b"".join(batch), headers=headers)
            last = ack.seq
            published += 1
            batch, size = [], 0

        for event in events:
            line = encode(event)
            if batch and size + len(line) > IMPORT_BATCH_BYTES:
                await flush()
            batch.append(line)
            size += len(line)
        await flush()
        return published
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), timeout)


def import_journal(
    servers: str | Sequence[str], team: str, events: Sequence[Event], *, timeout: float = 5.0
) -> int:
    """Publish ``events`` (seq 1, 2, … in order) to team ``team``'s journal stream, which must
    exist and be empty (else ``MailboxesError``); returns how many messages it took. A message
    appended by anyone else meanwhile makes the next publish fail (expected last sequence)."""
    for number, event in enumerate(events, start=1):
        if event.seq != number:
            raise MailboxesError(f"event {number} of the import has seq {event.seq}")
    urls = [servers] if isinstance(servers, str) else list(servers)
    return asyncio.run(_import(urls, team, events, timeout))
