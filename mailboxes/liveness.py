"""Member liveness by ``flock``: ``.team/members/<agent>.lock`` is held with ``LOCK_EX`` by
whoever hosts the agent; the kernel drops it when that process dies, even on SIGKILL. No
heartbeats (docs/ARCHITECTURE.md, "Locks").

Every ``hold`` and every probe uses its own ``open()``, hence its own open file description, so
locks conflict between threads of one process exactly as between processes. Lock files are never
deleted: unlinking a lock file another process has open would let two holders coexist.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mailboxes.errors import LeaseHeld
from mailboxes.names import check_agent_name

__all__ = ["FlockLiveness"]


class FlockLiveness:
    """The file ``Liveness``: one lock file per agent under ``members_dir``."""

    def __init__(self, members_dir: Path, *, contention_s: float = 0.05) -> None:
        self.members_dir = Path(members_dir)
        # A probe holds a shared lock for microseconds; a hold that meets one retries this long
        # before concluding that a real holder exists.
        self._contention_s = contention_s

    def lock_path(self, agent: str) -> Path:
        """The lock file of ``agent`` (validated name)."""
        return self.members_dir / f"{check_agent_name(agent)}.lock"

    @contextmanager
    def hold(self, agent: str) -> Iterator[None]:
        """Hold ``agent``'s lease while the context is open. Raises ``LeaseHeld`` if a live
        process, or another ``hold`` in this process, has it."""
        path = self.lock_path(agent)
        self.members_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            self._acquire(fd, agent)
            # The pid is only a diagnostic for people; liveness is the lock itself.
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _acquire(self, fd: int, agent: str) -> None:
        deadline = time.monotonic() + self._contention_s
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LeaseHeld(agent) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.01)

    def is_alive(self, agent: str) -> bool:
        """True while some live process (or a ``hold`` in this one) holds the lease."""
        try:
            fd = os.open(self.lock_path(agent), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            # Shared, so that concurrent probes never make each other report a holder.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def alive(self) -> list[str]:
        """Agents whose lease is held right now, sorted."""
        try:
            names = os.listdir(self.members_dir)
        except FileNotFoundError:
            return []
        agents = [n[: -len(".lock")] for n in names if n.endswith(".lock")]
        return sorted(a for a in agents if _valid(a) and self.is_alive(a))

    def close(self) -> None:
        """Nothing to release (the ``Liveness`` port's ``close``)."""


def _valid(agent: str) -> bool:
    try:
        check_agent_name(agent)
    except ValueError:
        return False
    return True
