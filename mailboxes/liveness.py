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

    def __init__(
        self, members_dir: Path, *, contention_s: float = 0.05, probe_patience_s: float = 5.0
    ) -> None:
        self.members_dir = Path(members_dir)
        # How long a hold that meets another holder's exclusive lock retries before concluding
        # that a live holder exists (a holder that is just letting go gets this long).
        self._contention_s = contention_s
        # How long a hold waits out probes' shared locks. A probe holds one for microseconds,
        # but a prober descheduled on a loaded host holds it for as long as it is off the CPU,
        # and probes in a loop can overlap; a probe is never a holder, so this is generous.
        self._probe_patience_s = probe_patience_s

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
        start = time.monotonic()
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            # Who is in the way? A shared lock on our own descriptor is granted while only
            # probes hold the file, and refused while a holder has it exclusively.
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                patience = self._contention_s
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
                patience = self._probe_patience_s
            if time.monotonic() - start >= patience:
                raise LeaseHeld(agent)
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
