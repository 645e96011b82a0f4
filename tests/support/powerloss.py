"""Simulated power loss: what a folder would hold if the machine lost power right now.

The journal and the Maildir make data durable only through their ``fsync`` seam
(``mailboxes.fsutil.Fsync``). ``PowerLoss.fsync`` syncs for real and records what a power cut
would then keep, following the rules a careful store must assume of a POSIX file system:

- a file's bytes survive only as of its last ``fsync`` (or the baseline taken at the start);
- a name in a folder (a create, a rename, an unlink) survives only as of the folder's last
  ``fsync``: a rename not followed by an fsync of a folder it touched is lost. A rename is
  atomic, as on journaling file systems (ext4, xfs, btrfs): an fsync of either folder commits
  both sides of it, so a file moved between folders is never in neither nor (for that fsync) in
  both;
- a file whose name survived but whose bytes were never fsynced comes back empty (``torn``: with
  a random prefix of its unsynced appended bytes, like a write cut off mid-way).

Writes go to the real files as usual, so the system under test behaves normally (readers see
unsynced data, as with a page cache); ``image(dest)`` materialises the surviving state into
another folder, which is then reopened and checked. Every inode the simulation has recorded is
kept open, so the kernel cannot hand its number to a new file while a listing still names it.
"""

from __future__ import annotations

import os
import random
import resource
import stat
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["PowerLoss"]

Entry = tuple[int, bool]
"""(inode, is a folder) of one name in a folder listing."""


class PowerLoss:
    """Tracks what survives a power cut under ``root``; pass ``sim.fsync`` to the stores."""

    def __init__(
        self, root: Path, *, on_fsync: Callable[[int], None] | None = None, real: bool = True
    ) -> None:
        """``on_fsync(n)`` runs after the n-th recorded fsync (take an ``image`` there);
        ``real=False`` skips the real ``os.fsync`` (faster; durability is simulated anyway)."""
        self.root = os.path.realpath(root)
        self._real = real
        self.fsyncs = 0
        self._on_fsync = on_fsync
        self._lock = threading.RLock()
        self._files: dict[int, bytes] = {}
        self._dirs: dict[str, dict[str, Entry]] = {}
        self._pins: dict[int, int] = {}
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        self._baseline(self.root)

    # --- the seam ----------------------------------------------------------------------------

    def fsync(self, fd: int) -> None:
        """An ``Fsync``: make ``fd`` durable for real, and record it as surviving a cut."""
        if self._real:
            os.fsync(fd)
        info = os.fstat(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        with self._lock:
            if stat.S_ISDIR(info.st_mode):
                self._commit_dir(path)
            elif stat.S_ISREG(info.st_mode):
                with open(f"/proc/self/fd/{fd}", "rb") as handle:  # works for O_WRONLY fds too
                    self._files[info.st_ino] = handle.read()
                self._pin(info.st_ino, f"/proc/self/fd/{fd}")
            self.fsyncs += 1
            count = self.fsyncs
            if self._on_fsync is not None:
                self._on_fsync(count)

    # --- the cut -----------------------------------------------------------------------------

    def image(self, dest: Path, *, torn: random.Random | None = None) -> None:
        """Write what a power cut now would leave of ``root`` into the empty folder ``dest``."""
        with self._lock:
            Path(dest).mkdir(parents=True)
            self._build(self.root, Path(dest), torn)

    def close(self) -> None:
        """Release the pinned inodes."""
        with self._lock:
            for fd in self._pins.values():
                os.close(fd)
            self._pins.clear()

    # --- internals ---------------------------------------------------------------------------

    def _baseline(self, folder: str) -> None:
        """Everything present at the start counts as durable."""
        self._dirs[folder] = listing = self._listing(folder)
        for name, (ino, is_dir) in listing.items():
            path = os.path.join(folder, name)
            if is_dir:
                self._baseline(path)
            else:
                with open(path, "rb") as handle:
                    self._files[ino] = handle.read()
                self._pin(ino, path)

    def _commit_dir(self, folder: str) -> None:
        """Make ``folder``'s names durable, with both sides of every rename through it."""
        now = self._listing(folder)
        before = self._dirs.get(folder, {})
        arrived = {ino for name, (ino, _d) in now.items() if before.get(name, (None,))[0] != ino}
        left = {
            ino: is_dir
            for name, (ino, is_dir) in before.items()
            if now.get(name, (None,))[0] != ino and ino not in arrived
        }
        for other, names in self._dirs.items():  # moved in: the source loses its name too
            if other != folder:
                for name in [n for n, (ino, _d) in names.items() if ino in arrived]:
                    del names[name]
        if left:  # moved out: the target gains its name too (gone for good if unlinked)
            for where, name, ino in self._find(left):
                if where != folder:
                    self._dirs.setdefault(where, {})[name] = (ino, left[ino])
        self._dirs[folder] = now

    def _find(self, inodes: dict[int, bool]) -> list[tuple[str, str, int]]:
        """Where under ``root`` the given inodes are linked now: (folder, name, inode)."""
        found = []
        for folder, subdirs, files in os.walk(self.root):
            for name in subdirs + files:
                try:
                    ino = os.lstat(os.path.join(folder, name)).st_ino
                except FileNotFoundError:
                    continue
                if ino in inodes:
                    found.append((folder, name, ino))
        return found

    def _listing(self, folder: str) -> dict[str, Entry]:
        entries: dict[str, Entry] = {}
        with os.scandir(folder) as scan:
            for entry in scan:
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
                    entries[entry.name] = (info.st_ino, stat.S_ISDIR(info.st_mode))
                    if not stat.S_ISDIR(info.st_mode):
                        self._pin(info.st_ino, entry.path)
        return entries

    def _pin(self, ino: int, path: str) -> None:
        if ino in self._pins:
            return
        try:
            self._pins[ino] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # gone meanwhile: its number may be reused, so forget it
            self._files.pop(ino, None)

    def _build(self, src: str, dest: Path, torn: random.Random | None) -> None:
        dest.mkdir(exist_ok=True)
        for name, (ino, is_dir) in self._dirs.get(src, {}).items():
            if is_dir:
                self._build(os.path.join(src, name), dest / name, torn)
            else:
                (dest / name).write_bytes(self._content(ino, torn))

    def _content(self, ino: int, torn: random.Random | None) -> bytes:
        durable = self._files.get(ino, b"")
        if torn is None or ino not in self._pins:
            return durable
        current = os.pread(self._pins[ino], 1 << 30, 0)
        if not current.startswith(durable) or len(current) == len(durable):
            return durable
        return current[: len(durable) + torn.randint(0, len(current) - len(durable))]
