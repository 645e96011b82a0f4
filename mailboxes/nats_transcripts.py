"""``NatsTranscripts``: the ``TranscriptStore`` of the JetStream backend (docs/SCALE-OUT.md,
"Transcripts and job output"), so a transcript written on one host can be read on another.

The hosting process still writes each agent's transcript file under its own ``.team/`` (the
agent resumes from it); a ``sink(agent)`` given to the harness writer
(``harness/transcript.py`` ``TranscriptSink``) also publishes each line to the team's stream
``TEAMCTL_<team>_TRANSCRIPTS``, subject ``teamctl.<team>.transcript.<agent>`` (``.`` in a name
becomes ``=``). A line longer than ``PART`` bytes goes as several messages, all but the last
with the header ``Teamctl-Part: more``.

Reading ``agent``'s transcript gives this checkout's file when it has one (the agent is, or
was, hosted here), else the lines from the stream. Job output stays in the files of the host
that ran the job (``job_output`` reads this checkout's). A failed publish is logged, never
reaches the agent (the file is the transcript, the stream its copy) and ends the copy of that
agent's transcript in this process: other hosts see a whole prefix, never a transcript with a
hole in it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from mailboxes.errors import MailboxUnavailable
from mailboxes.journal.nats import READ_DEADLINE, until_answered
from mailboxes.nats_loop import NatsLoop, check_team
from mailboxes.nats_mailbox import agent_of, key

if TYPE_CHECKING:
    from nats.js.client import JetStreamContext

    from mailboxes.ports import TranscriptStore

__all__ = ["PART", "NatsTranscripts", "stream_name"]

log = logging.getLogger(__name__)

PART = 512 * 1024
"""Bytes per message of one transcript line (the server's default limit is 1 MiB)."""
MORE = "Teamctl-Part"

T = TypeVar("T")


def stream_name(team: str) -> str:
    return f"TEAMCTL_{team}_TRANSCRIPTS"


def _subject(team: str, agent: str | None = None) -> str:
    return f"teamctl.{team}.transcript.{'>' if agent is None else key(agent)}"


class NatsTranscripts:
    """Transcripts of team ``team`` at ``servers``: this checkout's files (``local``), and the
    stream for agents hosted elsewhere."""

    def __init__(
        self,
        servers: str | Sequence[str],
        team: str,
        local: TranscriptStore,
        *,
        replicas: int | None = None,
        timeout: float = 5.0,
        part: int = PART,
        read_deadline: float | None = None,
    ) -> None:
        self.team = check_team(team)
        self.stream = stream_name(team)
        self.local = local
        self._servers = [servers] if isinstance(servers, str) else list(servers)
        self._wanted = replicas
        self._timeout = timeout
        self._part = part
        self._read_deadline = READ_DEADLINE if read_deadline is None else read_deadline
        self._failed: set[str] = set()
        self._js: JetStreamContext | None = None
        self._io: NatsLoop | None = None  # connected on first use: most commands never read
        self._opening = threading.Lock()
        self._closed = False

    # --- TranscriptStore ----------------------------------------------------------------------

    def agents(self) -> list[str]:
        remote = self._read(self._agents, "the transcripts' subjects")
        return sorted(set(self.local.agents()) | set(remote))

    def transcript(self, agent: str) -> bytes | None:
        own = self.local.transcript(agent)
        if own is not None:
            return own
        lines = self._read(lambda: self._lines(agent), f"the transcript of {agent}")
        return b"".join(line + b"\n" for line in lines) if lines else None

    def job_output(self, job_id: str, *, tail: int) -> tuple[bytes, int] | None:
        return self.local.job_output(job_id, tail=tail)

    # --- writing ------------------------------------------------------------------------------

    def sink(self, agent: str) -> Callable[[str], None]:
        """What the harness writer of ``agent``'s transcript tells each line."""
        subject = _subject(self.team, agent)

        def publish(line: str) -> None:
            if agent in self._failed:
                return
            try:
                self._call(self._publish(subject, line.encode("utf-8")))
            except Exception as exc:  # the file is the transcript: the agent goes on
                self._failed.add(agent)
                log.warning(
                    "transcript of %s: copying to %s stopped (other hosts see it up to here): %s",
                    agent,
                    self.stream,
                    exc,
                )

        return publish

    def close(self) -> None:
        with self._opening:
            self._closed = True
            if self._io is not None:
                self._io.close()

    # --- helpers ------------------------------------------------------------------------------

    def _loop(self) -> NatsLoop:
        """The connected loop (connecting now on first use)."""
        with self._opening:
            if self._closed:
                raise ValueError(f"transcript store {self.stream} is closed")
            if self._io is None:
                io = NatsLoop(f"nats-transcripts-{self.team}", timeout=self._timeout)
                try:
                    io.run(self._connect(io), timeout=6 * self._timeout)
                except BaseException:
                    io.close()
                    raise
                self._io = io
            return self._io

    async def _connect(self, io: NatsLoop) -> None:
        await io.open(self._servers, name=f"teamctl-transcripts-{self.team}")
        await self._setup(io)

    def _read(self, make: Callable[[], Coroutine[Any, Any, T]], what: str) -> T:
        """A read, asked again while the cluster cannot answer (a reconnect after a server
        restart, a leader election) for at most the read deadline; reads are idempotent."""
        deadline = self._read_deadline
        return self._call(until_answered(make, what, deadline), timeout=deadline + self._timeout)

    def _call(self, coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
        from nats.errors import Error as NatsError

        try:
            try:
                io = self._loop()
            except BaseException:
                coro.close()  # never started
                raise
            return io.run(coro, timeout=6 * self._timeout if timeout is None else timeout)
        except (NatsError, TimeoutError, OSError) as exc:
            raise MailboxUnavailable(
                f"the transcript store {self.stream} on {', '.join(self._servers)} cannot be "
                f"reached: {exc or type(exc).__name__}"
            ) from exc

    async def _setup(self, io: NatsLoop) -> None:
        from mailboxes.journal.nats import cluster_size, open_stream

        nc = io.nc
        assert nc is not None
        self._js = nc.jetstream(timeout=self._timeout)
        await open_stream(
            self._js,
            self.stream,
            _subject(self.team),
            size=cluster_size(nc),
            replicas=self._wanted,
            warn=self._wanted is None,
            deny_delete=True,
        )

    async def _publish(self, subject: str, data: bytes) -> None:
        assert self._js is not None
        parts = [data[i : i + self._part] for i in range(0, len(data), self._part)] or [b""]
        for n, part in enumerate(parts, start=1):
            headers = {MORE: "more"} if n < len(parts) else None
            await self._js.publish(subject, part, headers=headers)

    async def _agents(self) -> list[str]:
        assert self._js is not None
        info = await self._js.stream_info(self.stream, subjects_filter=_subject(self.team))
        tokens = [s.rsplit(".", 1)[-1] for s in (info.state.subjects or {})]
        return [a for a in map(agent_of, tokens) if a is not None]

    async def _lines(self, agent: str) -> list[bytes]:
        from nats.js.errors import NotFoundError

        assert self._js is not None
        subject = _subject(self.team, agent)
        lines: list[bytes] = []
        pending = b""
        seq = 1
        while True:
            try:
                raw = await self._js.get_msg(self.stream, seq=seq, subject=subject, next=True)
            except NotFoundError:
                return lines  # a line whose last part never came is left out (torn)
            assert raw.seq is not None
            pending += raw.data or b""
            if not (raw.headers or {}).get(MORE):
                lines.append(pending)
                pending = b""
            seq = raw.seq + 1
