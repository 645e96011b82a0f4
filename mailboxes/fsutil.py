"""Durable file primitives: atomic replace, directory fsync, strict JSON.

Every projection and every mailbox file is written through these, so a crash leaves either the
old or the new content, never a mix.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from mailboxes.errors import MailboxesError

MAX_JSON_DEPTH = 64


class BadJson(MailboxesError):
    """Input that is not strict JSON (NaN/Infinity, duplicate keys, too deep, not UTF-8)."""


Fsync = Callable[[int], None]
"""How the journal and the Maildir make a file or a folder durable: ``os.fsync`` in production.

The one I/O seam of the durable layer: a power-loss simulation in the tests passes a recording
function that snapshots what a real power cut would keep (see ``tests/support/powerloss.py``).
"""


def fsync_dir(path: Path, fsync: Fsync = os.fsync) -> None:
    """Make a rename or create inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (short writes happen on signals and pipes)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def tmp_for(path: Path) -> Path:
    """The tmp file a writer of ``path`` fills before replacing it (``remove_orphan_tmp``
    clears one left by a writer that died)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data``: tmp file + fsync + rename + fsync(dir)."""
    tmp = tmp_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write (disk full) leaves no empty tmp file
        raise
    if durable:
        fsync_dir(path.parent)


def swap_in(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, not durably: a reader sees the old bytes or the
    new, never a torn or missing file.

    A tmp file (named like ``atomic_write``'s, so ``remove_orphan_tmp`` clears one left by a
    writer that died) is written, then exchanged with ``path`` by ``renameat2(RENAME_EXCHANGE)``
    and the old bytes, now under the tmp name, unlinked. A plain rename over an existing file
    makes ext4 (``auto_da_alloc``) start writing the new file's data at once, which costs the
    writer ~0.1 ms of CPU and a disk write per projection on every command; the exchange does
    not, so a file rewritten within seconds (``team.json``, a task being worked on) mostly never
    reaches the disk at all. The price: after a power cut a recent projection may come back
    empty, which the projections' ``repair_all`` looks for (docs/RELIABILITY.md). Where the exchange is missing
    (not Linux, an old kernel, a file system without it) or ``path`` does not exist yet, a plain
    rename does the same job.
    """
    target = os.fspath(path)
    tmp = os.fspath(tmp_for(path))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        if exchange(tmp, target):
            try:
                os.unlink(tmp)
            except IsADirectoryError:
                # A folder was in the way (a rename over it fails): put it back and fail alike.
                exchange(tmp, target)
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target) from None
        else:
            os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)  # a failed write (disk full) leaves no tmp file
        raise


class _Exchange:
    """``renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)`` from the C library, looked up at
    the first call (``ctypes`` is imported only then: start-up stays lean)."""

    def __init__(self) -> None:
        self.works = sys.platform == "linux"
        self._call: Callable[[int, bytes, int, bytes, int], int] | None = None
        self._errno: Callable[[], int] = lambda: 0

    def __call__(self, a: str, b: str) -> bool:
        """Swap the names ``a`` and ``b`` in one step; False (nothing changed) if that cannot
        be done here or ``b`` does not exist."""
        if not self.works:
            return False
        if self._call is None:
            import ctypes

            found = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
            if found is None:  # a C library without it
                self.works = False
                return False
            int_, path = ctypes.c_int, ctypes.c_char_p
            found.argtypes = (int_, path, int_, path, ctypes.c_uint)
            found.restype = ctypes.c_int
            self._call, self._errno = found, ctypes.get_errno
        if self._call(-100, a.encode(), -100, b.encode(), 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
            return True
        err = self._errno()
        if err == errno.ENOENT:  # no file to exchange with yet
            return False
        if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
            self.works = False  # the kernel or the file system cannot: rename from now on
            return False
        raise OSError(err, os.strerror(err), b)


exchange = _Exchange()


def remove_orphan_tmp(folder: Path) -> list[Path]:
    """Delete ``*.tmp`` files left by writers that died mid-write; returns what was removed."""
    removed = []
    if folder.is_dir():
        for tmp in folder.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _reject_constant(name: str) -> Any:
    raise BadJson(f"non-finite number {name} is not allowed")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise BadJson(f"duplicate key {key!r}")
        result[key] = value
    return result


def _depth(value: Any, limit: int) -> None:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise BadJson(f"nesting deeper than {limit} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def strict_loads(raw: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse strict JSON: no NaN/Infinity, no duplicate keys, bounded nesting."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadJson(f"not UTF-8: {exc}") from None
    # Bound nesting before parsing so a hostile input cannot exhaust the C parser's recursion.
    depth = 0
    in_string = False
    escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                raise BadJson(f"nesting deeper than {max_depth} levels")
        elif char in "]}":
            depth -= 1
    try:
        value = json.loads(raw, parse_constant=_reject_constant, object_pairs_hook=_unique_object)
    except json.JSONDecodeError as exc:
        raise BadJson(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise BadJson(f"nesting deeper than {max_depth} levels") from None
    return value


def canonical_dumps(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, no NaN, UTF-8 kept as is."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
