"""One asyncio loop in a daemon thread for a nats-py client (docs/SCALE-OUT.md).

nats-py is asyncio; the stores of ``mailboxes`` are called from plain threads. A ``NatsLoop``
owns a private event loop running in a daemon thread; ``run`` submits a coroutine to it and
waits (bounded) for its result; ``connect`` opens the connection on that loop with the
reconnecting options every store of this package uses; ``close`` closes the connection, cancels
whatever the client left running and stops and joins the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from nats.aio.client import Client

__all__ = ["INSTALL_HINT", "NatsLoop", "check_team", "require_nats"]

INSTALL_HINT = "the JetStream backend needs nats-py: pip install 'teamctl[nats]'"
_TEAM_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

T = TypeVar("T")

log = logging.getLogger(__name__)


def require_nats() -> None:
    """``ImportError`` with the install hint when nats-py is missing."""
    try:
        import nats  # noqa: F401
    except ImportError:
        raise ImportError(INSTALL_HINT) from None


def check_team(team: str) -> str:
    """``team`` if it is a valid team name (it appears in stream and subject names)."""
    if not _TEAM_NAME.match(team):
        raise ValueError(f"team name {team!r} must be 1-64 of A-Z a-z 0-9 _ -")
    return team


async def _quiet(exc: Exception) -> None:
    """nats-py's error callback: reconnect attempts are expected (a server restarting, a leader
    election); callers see errors as their own requests' timeouts."""
    log.debug("nats: %s", exc)


class NatsLoop:
    """A private event loop in a daemon thread, and the client connection living on it."""

    def __init__(self, name: str, *, timeout: float = 5.0) -> None:
        require_nats()
        self.timeout = timeout
        self.nc: Client | None = None
        self.closed = False
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and return its result; ``TimeoutError`` (the coroutine is
        then cancelled) when it takes longer than ``timeout`` seconds (None: no bound)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise

    def connect(self, servers: str | Sequence[str], *, name: str) -> Client:
        """Connect to ``servers`` (``nats://…`` URLs) from any thread but the loop's; bounded
        by two request timeouts (``TimeoutError``)."""
        return self.run(self.open(servers, name=name), timeout=4 * self.timeout)

    async def open(self, servers: str | Sequence[str], *, name: str) -> Client:
        """Connect on the loop (the coroutine behind ``connect``); the client reconnects for
        ever after a lost connection (every request is bounded by its own timeout instead)."""
        import nats

        urls = [servers] if isinstance(servers, str) else list(servers)
        # The first connection is bounded: with reconnects for ever, nats-py would retry it so.
        self.nc = await asyncio.wait_for(
            nats.connect(
                servers=urls,
                connect_timeout=self.timeout,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.25,
                name=name,
                error_cb=_quiet,
            ),
            2 * self.timeout,
        )
        return self.nc

    def close(self) -> None:
        """Close the connection, cancel the client's tasks, stop and join the thread;
        idempotent. A dead connection or a stuck loop is no error (the thread is a daemon)."""
        if self.closed:
            return
        self.closed = True
        if self.loop.is_running():
            with contextlib.suppress(Exception):
                self.run(self._shutdown(), timeout=2 * self.timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=self.timeout)
        if not self._thread.is_alive():
            self.loop.close()

    async def _shutdown(self) -> None:
        if self.nc is not None:
            # A connection lost on the way out (say, while reconnecting) has nothing to flush.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.nc.close(), self.timeout)
        # Whatever the client left running ends here, not when the closed loop is collected.
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
