"""Linux inotify through ``ctypes``: the blocking file watcher's kernel side
(docs/ARCHITECTURE.md, "Mailboxes").

``InotifyTree`` keeps one inotify instance armed over a set of target paths: a directory is
watched recursively (directories created or moved in later are armed as they appear, and the
files already inside them are reported, since they may predate the watch); a file, or a path
that does not exist yet, is watched through its parent (or its nearest existing ancestor, until
the missing folders appear). ``read`` drains the queue without blocking and returns the changed
paths; a queue overflow (``IN_Q_OVERFLOW``) is reported as such so the caller re-scans
everything. The caller waits on ``fileno()`` with ``select``/``poll``: nothing here wakes on a
timer. ``available()`` says whether the C library offers inotify at all (Linux only).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["InotifyTree", "available"]

log = logging.getLogger(__name__)

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000

_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_EXCL_UNLINK
)
"""What every directory watch asks for: content changes, creations, deletions, moves both ways
(a Maildir delivery is a link or a rename into ``new/``), metadata, and the folder's own end."""

_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (name follows)
_READ_SIZE = 64 * 1024
_ARM_ROUNDS = 64
"""Bound on re-checks while arming one target whose folders appear meanwhile."""

_libc: ctypes.CDLL | None = None
_libc_error: str | None = None


def _load() -> ctypes.CDLL:
    global _libc, _libc_error
    if _libc is not None:
        return _libc
    if _libc_error is not None:
        raise OSError(errno.ENOSYS, _libc_error)
    try:
        if not sys.platform.startswith("linux"):
            raise OSError(errno.ENOSYS, f"inotify is Linux only (this is {sys.platform})")
        libc = ctypes.CDLL(None, use_errno=True)
        for name, args in (
            ("inotify_init1", [ctypes.c_int]),
            ("inotify_add_watch", [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]),
            ("inotify_rm_watch", [ctypes.c_int, ctypes.c_int]),
        ):
            fn = getattr(libc, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
    except (OSError, AttributeError) as exc:
        _libc_error = f"inotify unavailable: {exc}"
        raise OSError(errno.ENOSYS, _libc_error) from exc
    _libc = libc
    return libc


def available() -> bool:
    """Whether this platform's C library offers inotify (it may still fail on limits)."""
    try:
        _load()
    except OSError:
        return False
    return True


@dataclass
class _Dir:
    path: Path
    recursive: bool
    """Sub-folders are watched too (created ones armed as they appear)."""
    all_names: bool
    """Every entry's change is reported; otherwise only those in ``names``."""
    names: set[str] = field(default_factory=set)


class InotifyTree:
    """One inotify instance over ``targets`` (see the module doc). Not thread-safe: one thread
    arms, reads and closes it. Raises ``OSError`` if inotify cannot start at all."""

    def __init__(self, targets: tuple[Path, ...]) -> None:
        self._libc = _load()
        fd: int = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self._fd = fd
        self.targets = tuple(Path(t).absolute() for t in targets)
        self._dirs: dict[int, _Dir] = {}
        self._pending: set[Path] = set()
        self._warned = False

    def fileno(self) -> int:
        return self._fd

    @property
    def watches(self) -> int:
        """Folders watched now."""
        return len(self._dirs)

    @property
    def pending(self) -> frozenset[Path]:
        """Targets whose folder does not exist yet (watched through an ancestor)."""
        return frozenset(self._pending)

    def arm(self) -> None:
        """Watch every target (at start, and again after an overflow: idempotent)."""
        for target in self.targets:
            self._arm(target)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._dirs.clear()

    def read(self) -> tuple[set[Path], bool]:
        """Drain the queue without blocking: ``(changed paths, overflowed)``. After an overflow
        the watches are re-armed; changes may have been lost, so re-scan everything."""
        changed: set[Path] = set()
        overflow = False
        while True:
            try:
                buf = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue
            if not buf:
                break
            offset = 0
            while offset + _HEADER.size <= len(buf):
                wd, mask, _cookie, size = _HEADER.unpack_from(buf, offset)
                offset += _HEADER.size
                name = buf[offset : offset + size].split(b"\0", 1)[0]
                offset += size
                if mask & IN_Q_OVERFLOW:
                    overflow = True
                    continue
                self._event(wd, mask, os.fsdecode(name), changed)
        if overflow:
            self.arm()
        return changed, overflow

    def retry_pending(self) -> set[Path]:
        """Arm the targets still waiting for their folders; returns files found in new ones."""
        found: set[Path] = set()
        for target in sorted(self._pending):
            found |= self._arm(target)
        return found

    # -- events ------------------------------------------------------------------------------

    def _event(self, wd: int, mask: int, name: str, changed: set[Path]) -> None:
        entry = self._dirs.get(wd)
        if entry is None:
            return
        if mask & IN_IGNORED:  # the folder is gone (or unwatched): targets on it re-arm
            del self._dirs[wd]
            gone = entry.path
            for target in self.targets:
                if target == gone or gone in target.parents:
                    changed |= self._arm(target)
            return
        if not name:  # the folder itself: deleted or moved away
            changed.add(entry.path)
            if mask & IN_MOVE_SELF:  # its paths would be wrong: drop it; IN_IGNORED re-arms
                self._libc.inotify_rm_watch(self._fd, wd)
            return
        path = entry.path / name
        if entry.all_names or name in entry.names:
            changed.add(path)
        if not mask & IN_ISDIR:
            return
        if mask & (IN_CREATE | IN_MOVED_TO):
            if entry.recursive:
                changed |= self._watch_tree(path, root=False)
            if name in entry.names:  # a target, or a folder on the way to a pending one
                for target in self.targets:
                    if target == path or path in target.parents:
                        changed |= self._arm(target)
        elif mask & IN_MOVED_FROM and entry.recursive:
            for other, sub in list(self._dirs.items()):
                if sub.path == path or path in sub.path.parents:
                    self._unwatch(other)

    # -- arming ------------------------------------------------------------------------------

    def _arm(self, target: Path) -> set[Path]:
        """Watch ``target``; returns the files found in a folder armed just now."""
        for _ in range(_ARM_ROUNDS):
            if target.is_dir():
                self._pending.discard(target)
                return self._watch_tree(target, root=True)
            anchor = target.parent
            while not anchor.is_dir() and anchor != anchor.parent:
                anchor = anchor.parent
            step = target.relative_to(anchor).parts[0]
            if self._watch(anchor, recursive=False, all_names=False, name=step, root=True) is None:
                self._pending.add(target)
                return set()
            if (anchor / step).is_dir():
                continue  # appeared between the check and the watch: go one level deeper
            if anchor == target.parent:
                self._pending.discard(target)
                # The file may have been made before its folder's watch was in place (no event
                # then): report it if it is there now; a spurious wake-up costs only a re-read.
                return {target} if os.path.lexists(target) else set()
            self._pending.add(target)
            return set()
        self._pending.add(target)
        return set()

    def _watch_tree(self, top: Path, *, root: bool) -> set[Path]:
        """Watch ``top`` and every folder below it (each watched before it is listed, so an
        entry created meanwhile is either listed or reported); returns the files found."""
        found: set[Path] = set()
        stack = [(top, root)]
        while stack:
            folder, is_root = stack.pop()
            if self._watch(folder, recursive=True, all_names=True, root=is_root) is None:
                continue
            try:
                with os.scandir(folder) as entries:
                    for item in entries:
                        if item.is_dir(follow_symlinks=False):
                            stack.append((Path(item.path), False))
                        else:
                            found.add(Path(item.path))
            except OSError:
                continue
        return found

    def _watch(
        self, folder: Path, *, recursive: bool, all_names: bool, name: str = "", root: bool
    ) -> int | None:
        flags = _MASK if root else _MASK | IN_DONT_FOLLOW
        wd: int = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), flags)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOSPC, errno.ENOMEM) and not self._warned:
                self._warned = True
                log.warning("inotify watch limit reached at %s; rescan ticks cover it", folder)
            elif err not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ENOSPC):
                log.debug("inotify_add_watch(%s): %s", folder, os.strerror(err))
            return None
        entry = self._dirs.get(wd)
        if entry is None:
            entry = self._dirs[wd] = _Dir(folder, recursive, all_names)
        else:
            entry.recursive |= recursive
            entry.all_names |= all_names
        if name:
            entry.names.add(name)
        return wd

    def _unwatch(self, wd: int) -> None:
        self._dirs.pop(wd, None)
        self._libc.inotify_rm_watch(self._fd, wd)
