"""Reading a cluster from the outside for the scale-out tests: a stream exported as a journal
file, and a count of the messages published on a subject (an event to wait on)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def export_stream(servers: Sequence[str], stream: str) -> bytes:
    """Every message of ``stream`` concatenated: the team's journal as ``journal.jsonl`` bytes
    (each message is a commit's CRC-framed lines, docs/SCALE-OUT.md)."""

    async def read() -> bytes:
        import nats

        nc = await nats.connect(servers=list(servers), connect_timeout=5)
        try:
            js = nc.jetstream(timeout=10)
            last = (await js.stream_info(stream)).state.last_seq
            parts = [(await js.get_msg(stream, seq)).data or b"" for seq in range(1, last + 1)]
            return b"".join(parts)
        finally:
            await nc.close()

    return asyncio.run(read())


def write_journal(root: Path, data: bytes) -> Path:
    """``root/.team/journal.jsonl`` holding ``data`` (for tests/support/oracle.py)."""
    team = root / ".team"
    team.mkdir(parents=True, exist_ok=True)
    (team / "journal.jsonl").write_bytes(data)
    return root


class SubjectCounter:
    """Counts messages published on ``subject`` (a plain subscription on its own loop thread);
    ``wait(n)`` blocks (bounded) until ``n`` were seen."""

    def __init__(self, servers: Sequence[str], subject: str) -> None:
        self._servers = list(servers)
        self._subject = subject
        self.count = 0
        self._cond = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._nc: Any = None
        asyncio.run_coroutine_threadsafe(self._subscribe(), self._loop).result(timeout=30)

    async def _subscribe(self) -> None:
        import nats

        self._nc = await nats.connect(
            servers=self._servers, max_reconnect_attempts=-1, reconnect_time_wait=0.1
        )

        async def seen(_msg: Any) -> None:
            with self._cond:
                self.count += 1
                self._cond.notify_all()

        await self._nc.subscribe(self._subject, cb=seen)
        await self._nc.flush()

    def wait(self, n: int, timeout: float = 120.0) -> int:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.count < n:
                left = deadline - time.monotonic()
                assert left > 0, f"only {self.count} of {n} messages on {self._subject}"
                self._cond.wait(left)
            return self.count

    def close(self) -> None:
        async def shut() -> None:
            if self._nc is not None:
                await self._nc.close()

        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
