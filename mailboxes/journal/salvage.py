"""``salvage``: keep the good events of a journal damaged mid-file (docs/RELIABILITY.md,
"Damage you can survive").

A bad line that is not the last one makes every writer refuse (``JournalCorrupt``): skipping it
silently could drop a claim or a completion. Salvage is the person's explicit choice to go on
without the damaged part: under the journal lock it writes the events before the first bad line,
plus a ``journal.tail_repaired`` event recording the cut, to a new file, keeps the original
under a backup name beside it, and swaps the new file in with one atomic rename (there is never
a moment without a journal). A failed write leaves the original untouched.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

from mailboxes.errors import WriteFailed
from mailboxes.events import JournalTailRepaired, draft
from mailboxes.fsutil import fsync_dir, write_all
from mailboxes.journal.base import stamp
from mailboxes.journal.frame import CHUNK, BadLine, decode_event, encode, iter_lines
from mailboxes.journal.store import JOURNAL_NAME, LOCK_NAME
from mailboxes.ports import Clock
from teamctl_base.clock import SystemClock

__all__ = ["SalvageReport", "salvage_journal"]


@dataclass(frozen=True)
class SalvageReport:
    """What ``salvage_journal`` did. ``backup`` is None when the journal was sound."""

    path: str
    kept: int
    """Events kept (seq 1 to ``kept``); the repair event is seq ``kept + 1``."""
    backup: str | None = None
    """The original file, unchanged, under its backup name."""
    problem: str | None = None
    problem_line: int | None = None
    """1-based number of the first bad line (it held seq ``problem_line``)."""
    dropped_lines: int = 0
    """Lines from the bad one to the end of the file."""
    dropped_intact: int = 0
    """Of the dropped lines after the bad one, how many still were well-framed events."""
    bytes_dropped: int = 0

    @property
    def dropped_seqs(self) -> tuple[int, int] | None:
        """The seq range the dropped lines held (line n holds seq n), or None."""
        if self.problem_line is None:
            return None
        return self.problem_line, self.problem_line + self.dropped_lines - 1


def backup_name(now: float, taken: set[str]) -> str:
    """``journal-damaged-YYYYmmddTHHMMSSZ.jsonl`` (UTC), with ``-2``, ``-3``… if taken."""
    base = "journal-damaged-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    name, n = f"{base}.jsonl", 1
    while name in taken:
        n += 1
        name = f"{base}-{n}.jsonl"
    return name


def salvage_journal(team_dir: Path, clock: Clock | None = None) -> SalvageReport:
    """Cut ``team_dir/journal.jsonl`` before its first bad line, keeping a backup.

    Holds the journal lock throughout, so no append interleaves. Raises ``FileNotFoundError``
    when there is no journal and ``WriteFailed`` (nothing changed) when the new file cannot be
    written.
    """
    clock = clock or SystemClock()
    path = team_dir / JOURNAL_NAME
    lock_fd = os.open(team_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return _salvage(fd, path, clock)
        finally:
            os.close(fd)
    finally:
        os.close(lock_fd)  # releases the flock


def _salvage(fd: int, path: Path, clock: Clock) -> SalvageReport:
    size = os.fstat(fd).st_size
    kept = 0
    cut: int | None = None
    problem = ""
    dropped = intact = 0
    for offset, raw, complete in iter_lines(fd, 0, size):
        if cut is None:
            try:
                if not complete:
                    raise BadLine("last line has no newline (torn write)")
                decode_event(raw, kept + 1)
            except BadLine as exc:
                cut, problem = offset, exc.reason
            else:
                kept += 1
                continue
        dropped += 1
        if complete and offset != cut and _framed(raw):
            intact += 1
    if cut is None:
        return SalvageReport(path=str(path), kept=kept)
    body = JournalTailRepaired(line_no=kept + 1, bytes_dropped=size - cut)
    repair, _ = stamp(
        [draft(body.TYPE, "cli", body)],
        next_seq=kept + 1,
        ts=clock.now(),
        lookup=lambda _op_id: None,
    )
    taken = set(os.listdir(path.parent))
    backup = path.parent / backup_name(clock.now(), taken)
    tmp = path.parent / f".{JOURNAL_NAME}.salvage.{os.getpid()}.tmp"
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        try:
            _copy(fd, out, cut)
            write_all(out, encode(repair[0]))
            os.fsync(out)
        finally:
            os.close(out)
        _keep(fd, path, backup, size)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteFailed(f"salvaging {path}", exc) from exc
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return SalvageReport(
        path=str(path),
        kept=kept,
        backup=str(backup),
        problem=problem,
        problem_line=kept + 1,
        dropped_lines=dropped,
        dropped_intact=intact,
        bytes_dropped=size - cut,
    )


def _copy(src: int, dst: int, end: int) -> None:
    pos = 0
    while pos < end:
        chunk = os.pread(src, min(CHUNK, end - pos), pos)
        if not chunk:
            raise OSError(errno.EIO, "journal shrank while salvaging")
        write_all(dst, chunk)
        pos += len(chunk)


def _keep(fd: int, path: Path, backup: Path, size: int) -> None:
    """The original, whole, under ``backup``: a hard link, or a copy where links fail."""
    try:
        os.link(path, backup)
        return
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
    out = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        _copy(fd, out, size)
        os.fsync(out)
    except OSError:
        backup.unlink(missing_ok=True)
        raise
    finally:
        os.close(out)


def _framed(raw: bytes) -> bool:
    """A well-framed, CRC-correct event line (whatever seq it holds)."""
    try:
        decode_event(raw, -1)
    except BadLine as exc:
        return exc.reason.startswith("seq ")
    return True
