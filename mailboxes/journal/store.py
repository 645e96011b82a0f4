"""The file journal: ``.team/journal.jsonl``, the team's source of truth
(docs/ARCHITECTURE.md, "The journal").

Appends from every thread and process are serialised by ``flock(LOCK_EX)`` on
``.team/journal.lock``, taken through a fresh ``open()`` per append (flock belongs to the open
file description, so a shared descriptor would not exclude threads, and a forked child would share
its parent's). A per-instance mutex orders this instance's threads before they reach the flock.
A process that finds the flock busy first queues on ``.team/journal.gate`` (another flock), so
each release wakes the one process next in line instead of all of them; and a writer that
releases the flock yields the CPU once (``sched_yield``), so the woken one can take the lock at
once rather than after the releaser's time slice.

A process next in line (holding the gate) decodes the lines other writers added meanwhile before
it blocks on the journal flock (and runs the caller's ``while_queued``: a ``Board`` folds them
there); under the lock an append catches up on lines added since our offset (validating every
one: a line decoded earlier by this journal — while queued, by a read — is reused only if its
bytes at that offset are still the same, decoding being a pure function of the bytes and the
seq, and a run of such lines is checked with one comparison; reads reuse decodings the same
way), asks ``decide`` for drafts against them, writes whole lines with one ``os.write`` loop
and unlocks. It returns (acknowledges) only
once its lines are durable: group commit (docs/RELIABILITY.md, "What is guaranteed") under a
second flock, ``.team/journal.sync``, whose file holds the mark: how far the journal is known
fdatasynced, read under that flock taken shared. A writer whose lines the mark covers returns at
once; else it takes the flock exclusive and fdatasyncs, which covers every line written before it
began, so writers queued meanwhile share it. A failed
fdatasync cuts the journal back to the mark and bumps the mark's rollback generation: every
writer whose lines were cut raises ``WriteFailed``, and every journal forgets them at its next
append. With ``on_commit`` the fdatasync and ``on_commit`` run under the journal flock.

Recovery: a torn or bad-CRC *last* line (a writer died mid-write) is truncated under the lock and
a ``journal.tail_repaired`` event appended; a bad line anywhere else raises ``JournalCorrupt``
naming it. Readers never lock: they read a size snapshot and stop at a torn end.

Opening reads ``.team/journal.idx`` when it is there: a checkpoint of the index (the byte offset
of every line and the seq of every ``op_id``) up to some seq, written after every
``INDEX_EVERY`` appended events. It is a cache, never trusted blindly: its checksum must match,
the file must still be that long, and the first and the last line it covers must still be the
lines it was made from (CRC-checked, right seqs); otherwise it is ignored and every line is read.
With it, opening validates only the lines after the checkpoint, so opening a long journal costs
what its tail costs (``teamctl journal check`` and ``replay --verify`` still read every line).

A journal opened ``read_only`` never locks, creates, repairs or writes anything (so it works on a
full disk and on a damaged file): it stops at a torn end, and at a bad line mid-file it keeps the
events before it and records the problem in ``damage`` (docs/RELIABILITY.md, "Damage you can
survive").
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import hashlib
import json
import logging
import os
import sys
import threading
import weakref
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import NamedTuple

from mailboxes.errors import JournalCorrupt, WriteFailed
from mailboxes.events import Event, draft
from mailboxes.fsutil import Fsync, atomic_write, fsync_dir, write_all
from mailboxes.journal.base import Appended, check_after, stamp
from mailboxes.journal.frame import BadLine, decode_event, encode, iter_lines
from mailboxes.ports import Clock, Decide
from teamctl_base.clock import SystemClock

JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "journal.lock"
GATE_NAME = "journal.gate"
INDEX_NAME = "journal.idx"
SYNC_NAME = "journal.sync"
INDEX_EVERY = 4096
"""Appended events between two index checkpoints (``journal.idx``)."""
DECODED_MAX = 4096
"""Recently decoded lines kept per journal (the oldest half is dropped beyond this)."""
RECENT_BYTES = 512 * 1024
"""A read remembers the lines it decodes in the last this many bytes of the file only."""
_INDEX_FORMAT = 1

log = logging.getLogger(__name__)

FaultHook = Callable[[str], None]
"""Test seam: called with ``"after_write"``, ``"before_sync"`` (lines written, journal unlocked,
not yet durable), ``"after_fsync"``, ``"after_commit"`` during an append (crash-point tests kill
the process there)."""


def remove_orphan_tmp_files(folder: Path) -> list[Path]:
    """Delete ``.<name>.<pid>.tmp`` files (``fsutil.atomic_write``) whose writer is dead.

    A live writer's file is kept: a projection written outside the journal lock (settings,
    snapshot) may be between its write and its rename right now.
    """
    removed = []
    for tmp in folder.glob(".*.tmp"):
        pid = tmp.name.rsplit(".", 2)[-2] if tmp.name.count(".") >= 3 else ""
        if pid.isdigit() and _alive(int(pid)):
            continue
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


class FileJournal:
    """An ``EventStore`` on ``team_dir/journal.jsonl`` (``team_dir`` is ``.team``, which must
    exist). Opening validates the whole file and repairs a torn tail.

    ``fsync`` makes written lines durable; the default ``fdatasync`` flushes the data and the file
    size (what reading the lines back needs) but not the modification time, saving a metadata
    write per append.

    ``read_only``: the file must exist; nothing is locked or written, ``append`` is refused, and
    reads end before the first bad line (``damage`` says which; None when the file is sound).
    """

    def __init__(
        self,
        team_dir: Path,
        clock: Clock | None = None,
        *,
        fault: FaultHook | None = None,
        fsync: Fsync = os.fdatasync,
        read_only: bool = False,
    ) -> None:
        self.team_dir = Path(team_dir)
        self.path = self.team_dir / JOURNAL_NAME
        self.lock_path = self.team_dir / LOCK_NAME
        self.gate_path = self.team_dir / GATE_NAME
        self.sync_path = self.team_dir / SYNC_NAME
        self._gen = 0  # the rollback generation (journal.sync) our index is of
        self._ino = 0  # the journal's inode, as of the last catch-up
        self._clock: Clock = clock or SystemClock()
        self._fault = fault
        self._fsync = fsync
        self._mutex = threading.Lock()
        self._holder: int | None = None
        self._index_lock = threading.Lock()
        self._offsets = array("q")  # byte offset of seq n at index n - 1
        self._end = 0  # byte offset just past the last validated line
        self._by_op_id: dict[str, int] = {}
        # offset -> (line, event) of recently decoded or written lines: a read or a catch-up
        # reuses an entry only if the line at that offset is still byte for byte the same.
        self._decoded: dict[int, tuple[bytes, Event]] = {}
        self._decoded_lock = threading.Lock()
        self.index_path = self.team_dir / INDEX_NAME
        self._indexed = 0  # the seq the last loaded or saved index checkpoint covers
        self._closed = False
        self.read_only = read_only
        self.damage: JournalCorrupt | None = None
        """Read-only only: the first bad line before the end (events after it are not read)."""
        self._limit: int | None = None  # read-only and damaged: reads stop at this byte
        if not self.team_dir.is_dir():
            raise FileNotFoundError(f"no team folder at {self.team_dir} (run `teamctl init`)")
        if read_only:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                self._load_index(fd)
                self._index_read_only(fd)
            finally:
                os.close(fd)
            return
        created = not self.path.exists()
        # Kept open to read the mark under the journal flock (closed with the journal or when it
        # is collected); taking the sync flock always opens the file afresh.
        self._mark_fd = os.open(self.sync_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._release_mark_fd = weakref.finalize(self, os.close, self._mark_fd)
        self._gen = self._peek_mark().gen
        with self._exclusive() as fd:
            if created:
                fsync_dir(self.team_dir, fsync)
            remove_orphan_tmp_files(self.team_dir)
            self._settle(fd)
            self._load_index(fd)
            self._catch_up(fd)
            self._check_mark(fd)
        self._checkpoint()

    # --- EventStore ---------------------------------------------------------------------------

    def append(
        self,
        decide: Decide,
        *,
        after: int,
        on_commit: Callable[[Sequence[Event]], None] | None = None,
        while_queued: Callable[[], None] | None = None,
    ) -> Appended:
        """Serialised across threads and processes: catch up, decide, write, fsync, commit.
        ``while_queued`` runs, instead of our own decoding ahead, when this process is next in
        line for the lock another process holds (see ``_lock``)."""
        self._check_open()
        if self.read_only:
            raise self.damage or ValueError(f"journal {self.path} was opened read-only")
        if on_commit is not None:
            return self._append_synced(decide, after, on_commit, while_queued)
        with self._exclusive(while_queued) as fd:
            seen, _new, result = self._decide_and_write(fd, decide, after)
            gen, end = self._gen, self._end
        # Also with nothing new: what we decided on (seen, or a stored op_id) may not be durable.
        self._hook("before_sync")
        self._commit(end, gen)
        self._hook("after_commit")
        self._checkpoint()
        return Appended(seen=seen, appended=tuple(result))

    def _append_synced(
        self,
        decide: Decide,
        after: int,
        on_commit: Callable[[Sequence[Event]], None],
        while_queued: Callable[[], None] | None,
    ) -> Appended:
        """An append whose ``on_commit`` runs after its fsync and still under the lock."""
        with self._exclusive(while_queued) as fd:
            seen, new, result = self._decide_and_write(fd, decide, after)
            self._commit(self._end, self._gen, locked=fd)
            on_commit(seen + tuple(new))
            self._hook("after_commit")
        self._checkpoint()
        return Appended(seen=seen, appended=tuple(result))

    def _decide_and_write(
        self, fd: int, decide: Decide, after: int
    ) -> tuple[tuple[Event, ...], list[Event], list[Event]]:
        """Under the lock: catch up, decide, write the new lines (not yet durable)."""
        self._settle(fd)
        first = len(self._offsets) + 1
        fresh = self._catch_up(fd)
        check_after(after, len(self._offsets))
        seen = self._seen(fd, after, first, fresh)
        drafts = decide(seen)
        lines: list[bytes] = []
        new, result = stamp(
            drafts,
            next_seq=len(self._offsets) + 1,
            ts=self._clock.now(),
            lookup=lambda op_id: self._stored_op(fd, op_id),
            lines=lines,
        )
        if new:
            self._write(fd, new, lines)
        return seen, new, result

    def read_from(self, seq: int) -> Iterator[Event]:
        """Events with ``seq >= seq`` in order, from a snapshot of the file's size at first read.

        Raises ``JournalCorrupt`` on a bad line that is not at the end of the snapshot.
        """
        self._check_open()
        seq = max(seq, 1)
        with self._index_lock:
            if seq <= len(self._offsets):
                start, first = self._offsets[seq - 1], seq
            else:
                start, first = self._end, len(self._offsets) + 1
        return self._read(start, first, seq)

    def last_seq(self) -> int:
        """The highest seq on disk now (lines other processes appended included)."""
        self._check_open()
        with self._index_lock:
            start, last = self._end, len(self._offsets)
        for event in self._read(start, last + 1, last + 1):
            last = event.seq
        return last

    def close(self) -> None:
        self._closed = True

    # --- internals ----------------------------------------------------------------------------

    def save_index(self) -> None:
        """Write the index checkpoint (``journal.idx``) for every line indexed now. A cache:
        not fsynced (a torn or lost one is ignored on open), and a failure is only logged."""
        with self._index_lock:
            seq, end = len(self._offsets), self._end
            offsets = self._offsets[:seq].tobytes()
            ops = {op: n for op, n in self._by_op_id.items() if n <= seq}
        if seq == 0:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                first = _line_at(fd, 0, self._offsets[1] if seq > 1 else end)
                last = _line_at(fd, self._offsets[seq - 1], end)
            finally:
                os.close(fd)
            body = offsets + json.dumps(ops, separators=(",", ":")).encode()
            header = {
                "format": _INDEX_FORMAT,
                "byteorder": sys.byteorder,
                "seq": seq,
                "end": end,
                "offsets_bytes": len(offsets),
                "first_crc": zlib.crc32(first),
                "last_crc": zlib.crc32(last),
                "sha256": hashlib.sha256(body).hexdigest(),
            }
            data = json.dumps(header, sort_keys=True).encode() + b"\n" + body
            atomic_write(self.index_path, data, durable=False)
        except OSError as exc:
            log.warning("journal index checkpoint not written: %s", exc)
            return
        self._indexed = seq

    def _prefetch(self) -> None:
        """Decode, without the lock, what other writers appended, so the catch-up under the lock
        finds those lines decoded and only checks that their bytes are unchanged (the critical
        section then decodes only what the last holder wrote)."""
        try:
            for _event in self.read_from(len(self._offsets) + 1):
                pass
        except (JournalCorrupt, OSError):
            return  # the catch-up under the lock reports or repairs it

    def _remember(self, offset: int, raw: bytes, event: Event) -> None:
        with self._decoded_lock:
            decoded = self._decoded
            decoded[offset] = (raw, event)
            if len(decoded) > DECODED_MAX:
                for stale in list(islice(decoded, len(decoded) - DECODED_MAX // 2)):
                    del decoded[stale]

    def _decode(self, offset: int, raw: bytes, line_no: int, remember: bool = True) -> Event:
        """The event on the line (without its newline) at ``offset`` that must hold seq
        ``line_no``, or ``BadLine``: an earlier decoding of the very same bytes when there is one
        (decoding is a pure function of the line and its seq, so this validates as much)."""
        known = self._decoded.get(offset)
        if known is not None and known[0] == raw and known[1].seq == line_no:
            return known[1]
        event = decode_event(raw, line_no)
        if remember:
            self._remember(offset, raw, event)
        return event

    def _checkpoint(self) -> None:
        if not self.read_only and len(self._offsets) - self._indexed >= INDEX_EVERY:
            self.save_index()

    def _load_index(self, fd: int) -> None:
        """Start from ``journal.idx`` if it checks out (see the module docstring)."""
        try:
            data = self.index_path.read_bytes()
        except OSError:
            return
        reason = self._adopt_index(fd, data)
        if reason is not None:
            log.info("journal index %s ignored: %s", self.index_path, reason)

    def _adopt_index(self, fd: int, data: bytes) -> str | None:
        head, sep, body = data.partition(b"\n")
        try:
            header = json.loads(head)
            seq, end, size = int(header["seq"]), int(header["end"]), header["offsets_bytes"]
            if header["format"] != _INDEX_FORMAT or header["byteorder"] != sys.byteorder:
                return "written by another version or machine"
            if not sep or hashlib.sha256(body).hexdigest() != header["sha256"]:
                return "checksum mismatch"
            offsets = array("q")
            offsets.frombytes(body[:size])
            ops = json.loads(body[size:])
        except (ValueError, KeyError, TypeError) as exc:
            return f"unreadable ({exc})"
        if len(offsets) != seq or seq == 0 or not isinstance(ops, dict):
            return "inconsistent"
        if os.fstat(fd).st_size < end:
            return "the journal is shorter than the checkpoint"
        for n, start, stop, crc in (
            (1, 0, offsets[1] if seq > 1 else end, header["first_crc"]),
            (seq, offsets[seq - 1], end, header["last_crc"]),
        ):
            line = _line_at(fd, start, stop)
            try:
                decode_event(line[:-1], n)
            except BadLine as exc:
                return f"line {n} changed: {exc.reason}"
            if zlib.crc32(line) != crc or not line.endswith(b"\n"):
                return f"line {n} is not the line it was made from"
        with self._index_lock:
            self._offsets = offsets
            self._end = end
        self._by_op_id = ops
        self._indexed = seq
        return None

    def _index_read_only(self, fd: int) -> None:
        """Index the good lines without the lock; stop at a torn end or the first bad line."""
        size = os.fstat(fd).st_size
        for offset, raw, complete in iter_lines(fd, self._end, size):
            line_no = len(self._offsets) + 1
            try:
                if not complete:
                    return  # being written, or torn: a writer repairs it
                event = decode_event(raw, line_no)
            except BadLine as exc:
                if offset + len(raw) + 1 >= size and exc.torn:
                    return
                self.damage = JournalCorrupt(str(self.path), line_no, exc.reason)
                self._limit = offset
                return
            self._index(offset, len(raw) + 1, event.op_id)

    @contextmanager
    def _exclusive(self, while_queued: Callable[[], None] | None = None) -> Iterator[int]:
        """Hold the instance mutex and the journal flock; yields an O_APPEND descriptor."""
        if self._holder == threading.get_ident():
            raise RuntimeError("journal append called from inside decide or on_commit")
        with self._mutex:
            self._holder = threading.get_ident()
            try:
                lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    self._lock(lock_fd, while_queued)
                    fd = os.open(
                        self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
                    )
                    try:
                        yield fd
                    finally:
                        os.close(fd)
                finally:
                    os.close(lock_fd)  # releases the flock
            finally:
                self._holder = None
        # The flock is free: give up the CPU once. The writer next in line was just woken, and
        # with more writers than cores it would otherwise wait for this process's time slice to
        # end while the lock sits free; this process has no reason to run first (what follows is
        # the wait for the fdatasync and the projection writes).
        os.sched_yield()

    def _lock(self, lock_fd: int, while_queued: Callable[[], None] | None = None) -> None:
        """Take the journal flock. Waiters first queue on the gate lock, so a release wakes the
        one process next in line rather than every waiting process (with 16 processes racing on
        2 cores, that herd cost more than the append itself). The gate only orders waiters:
        mutual exclusion is the journal flock's alone. Next in line, a waiter reads ahead what
        the others appended (``while_queued``, or our own ``_prefetch``) while the holder works,
        so the critical section handles only the lines the holder is writing."""
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        gate = os.open(self.gate_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            # Next in line: decode (and the caller folds) the others' lines while the holder works.
            (while_queued or self._prefetch)()
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        finally:
            os.close(gate)

    def _catch_up(self, fd: int) -> list[Event]:
        """Index every line written since ``_end``; repair a torn tail. Holds the flock.

        Returns the events indexed (with a repaired tail, those before it and its repair)."""
        info = os.fstat(fd)
        size, self._ino = info.st_size, info.st_ino
        if size < self._end:
            raise JournalCorrupt(
                str(self.path), len(self._offsets), f"file shrank to {size} bytes below {self._end}"
            )
        fresh = self._adopt_decoded(fd, size)
        recent = size - RECENT_BYTES  # as in _read: only the lines near the end are remembered
        for offset, raw, complete in iter_lines(fd, self._end, size):
            line_no = len(self._offsets) + 1
            try:
                if not complete:
                    raise BadLine("last line has no newline (torn write)", torn=True)
                event = self._decode(offset, raw, line_no, offset >= recent)
            except BadLine as exc:
                is_last = offset + len(raw) + 1 >= size
                if not (is_last and exc.torn):
                    raise JournalCorrupt(str(self.path), line_no, exc.reason) from None
                return [*fresh, *self._repair_tail(fd, line_no, offset, size)]
            self._index(offset, len(raw) + 1, event.op_id)
            fresh.append(event)
        return fresh

    def _adopt_decoded(self, fd: int, size: int) -> list[Event]:
        """Index, as one block, the lines from ``_end`` on that this journal decoded already (read
        while queued for the lock): the run of remembered lines that follow each other from
        ``_end``, each holding the next seq, adopted only if the file holds exactly their bytes
        there now (one read and one comparison instead of a decoding check per line). Holds the
        flock. Returns the events indexed."""
        known = self._decoded
        offset = self._end
        seq = len(self._offsets) + 1
        raws: list[bytes] = []
        events: list[Event] = []
        while (hit := known.get(offset)) is not None:
            raw, event = hit
            following = offset + len(raw) + 1
            if event.seq != seq or following > size:
                break
            raws.append(raw)
            events.append(event)
            offset, seq = following, seq + 1
        if len(raws) < 2:  # one line: the loop in _catch_up checks it as cheaply
            return []
        block = b"\n".join(raws) + b"\n"
        if os.pread(fd, len(block), self._end) != block:
            return []  # changed since (a rollback): the lines are read again one by one
        start = self._end
        offsets = []
        for raw in raws:
            offsets.append(start)
            start += len(raw) + 1
        with self._index_lock:
            self._offsets.extend(offsets)
            self._end = start
        first = seq - len(events)
        by_op_id = self._by_op_id
        for n, event in enumerate(events, first):
            if event.op_id is not None:
                by_op_id.setdefault(event.op_id, n)
        return events

    def _seen(self, fd: int, after: int, first: int, fresh: list[Event]) -> tuple[Event, ...]:
        """The events after seq ``after``: ``fresh`` (from seq ``first``) were just decoded by
        catch-up and are not decoded twice; older ones are read back."""
        if after + 1 >= first:
            return tuple(fresh[after + 1 - first :])
        end = self._offsets[first - 1] if fresh else self._end
        return (*self._events(fd, after + 1, end), *fresh)

    def _repair_tail(self, fd: int, line_no: int, offset: int, size: int) -> list[Event]:
        os.ftruncate(fd, offset)
        self._lower_mark(offset)
        self._fsync(fd)
        from mailboxes.payloads import JournalTailRepaired

        body = JournalTailRepaired(line_no=line_no, bytes_dropped=size - offset)
        new, _ = stamp(
            [draft(body.TYPE, "runtime", body)],
            next_seq=line_no,
            ts=self._clock.now(),
            lookup=lambda _op_id: None,
        )
        self._write(fd, new, hooks=False)
        try:
            self._fsync(fd)
        except OSError as exc:
            self._forget_after(offset)
            self._roll_back(fd, exc)
            raise
        return new

    def _write(
        self,
        fd: int,
        new: Sequence[Event],
        lines: Sequence[bytes] | None = None,
        *,
        hooks: bool = True,
    ) -> None:
        """Write ``new`` (whole lines; ``lines``: their framed lines, made by ``stamp``) and
        index them; not yet durable (``_commit``). On a failed write cut the file back to the
        last good line and raise ``WriteFailed`` (a short write on a full disk must not leave a
        torn line)."""
        if lines is None:
            lines = [encode(event) for event in new]
        try:
            write_all(fd, b"".join(lines))
        except BaseException as exc:
            self._roll_back(fd, exc)
            raise
        if hooks:
            self._hook("after_write")
        offset = self._end
        for event, line in zip(new, lines, strict=True):
            self._index(offset, len(line), event.op_id)
            offset += len(line)

    def _roll_back(self, fd: int, exc: BaseException) -> None:
        """Truncate to the last good line; an ``OSError`` becomes ``WriteFailed``. Holds the
        flock."""
        os.ftruncate(fd, self._end)
        self._lower_mark(self._end)
        if isinstance(exc, OSError) and not isinstance(exc, WriteFailed):
            raise WriteFailed(f"appending to {self.path}", exc) from exc

    # --- group commit (docs/RELIABILITY.md, "What is guaranteed") -----------------------------

    @contextmanager
    def _sync_lock(self) -> Iterator[int]:
        """Hold the sync flock (``journal.sync``) exclusive; yields its descriptor, which holds
        the mark. Order: the journal flock may be held when taking it, never the other way
        round."""
        sync_fd = os.open(self.sync_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(sync_fd, fcntl.LOCK_EX)
            yield sync_fd
        finally:
            os.close(sync_fd)  # releases the flock

    def _covered(self, mark: _Mark, end: int, gen: int) -> bool:
        """Whether ``mark`` says every byte before ``end`` (written in rollback generation
        ``gen``) is durable; raises ``WriteFailed`` if a failed fdatasync rolled them back."""
        if mark.gen != gen:
            if mark.gen == gen + 1 and end <= mark.cut:
                return True  # durable before the rollback
            raise _rolled_back(self.path)
        return mark.ino == self._ino and end <= mark.durable

    def _commit(self, end: int, gen: int, *, locked: int | None = None) -> None:
        """Return once every byte before ``end`` is durable: covered by an fdatasync that began
        after they were written and succeeded. One fdatasync covers every line written before it
        began, so writers that queued here meanwhile find their lines covered and return without
        one of their own. ``gen`` is the rollback generation our lines were written in: if a
        failed fdatasync rolled them back since, raise ``WriteFailed``. ``locked``: the journal
        descriptor, when the caller holds the journal flock.

        A writer first waits for the sync flock *shared*: the mark changes only under it
        exclusive, so it reads a whole, current mark, and every writer the running fdatasync
        covers learns so at once when it ends. Taken exclusive, the writers it covers would pass
        the lock one by one, each woken and scheduled in turn (with 16 processes on 2 cores that
        convoy cost more than the fdatasync). Only a writer not covered takes it exclusive (not
        atomically: the mark is read again) and fdatasyncs."""
        failure: OSError | None = None
        sync_fd = os.open(self.sync_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(sync_fd, fcntl.LOCK_SH)
            if self._covered(_read_mark(sync_fd), end, gen):
                return  # a writer before us synced our lines with theirs
            fcntl.flock(sync_fd, fcntl.LOCK_EX)
            mark = _read_mark(sync_fd)
            if self._covered(mark, end, gen):
                return
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                info = os.fstat(fd)
                if mark.ino == info.st_ino and end <= mark.durable:
                    return  # a writer before us synced our lines with theirs
                if mark.failing:
                    raise _rolled_back(self.path)
                # Everything up to the last whole line is covered by this fdatasync.
                top = end
                if info.st_size > end and os.pread(fd, 1, info.st_size - 1) == b"\n":
                    top = info.st_size
                try:
                    self._fsync(fd)
                except OSError as exc:
                    failure = exc
                    _write_mark(sync_fd, mark._replace(failing=1))
                else:
                    _write_mark(sync_fd, mark._replace(durable=top, ino=info.st_ino))
            finally:
                os.close(fd)
        finally:
            os.close(sync_fd)  # releases the flock
        if failure is not None:
            if locked is not None:
                self._settle(locked)
            else:
                with self._exclusive() as fd:
                    self._settle(fd)
            raise WriteFailed(f"appending to {self.path}", failure) from failure
        self._hook("after_fsync")

    def _settle(self, fd: int) -> None:
        """Under the journal flock, before catching up: finish a rollback a failed fdatasync
        started (cut the journal back to its durable mark), and forget lines a rollback
        removed."""
        mark = self._peek_mark()
        if mark.failing:
            with self._sync_lock() as sync_fd:
                mark = _read_mark(sync_fd)
                if mark.failing:
                    # Cut back to the durable end. If the mark does not name this file (its
                    # fdatasync at open failed too) that end is unknown: cut nothing, and every
                    # writer waiting for an fdatasync is refused (cut 0).
                    known = mark.ino == os.fstat(fd).st_ino
                    cut = mark.durable if known else 0
                    if known and os.fstat(fd).st_size > cut:
                        os.ftruncate(fd, cut)
                        try:
                            self._fsync(fd)
                        except OSError as exc:  # the lines are gone from the file either way
                            log.warning("journal rollback not synced: %s", exc)
                    mark = mark._replace(gen=mark.gen + 1, cut=cut, failing=0)
                    _write_mark(sync_fd, mark)
        if mark.gen != self._gen:
            self._forget_after(mark.cut if mark.gen == self._gen + 1 else 0)
            self._gen = mark.gen

    def _check_mark(self, fd: int) -> None:
        """At open, caught up: make the mark name this file and no more than it holds (a power
        cut may have lost the write that lowered it; the file may be new or replaced), so no
        append skips its fdatasync and a rollback knows where to cut. One fdatasync, only then."""
        mark = self._peek_mark()
        if mark.ino == self._ino and mark.durable <= self._end:
            return
        with self._sync_lock() as sync_fd:
            mark = _read_mark(sync_fd)
            try:
                self._fsync(fd)
            except OSError as exc:
                log.warning("journal %s not synced at open: %s", self.path, exc)
                _write_mark(sync_fd, mark._replace(durable=0, ino=0))
                return
            _write_mark(sync_fd, mark._replace(durable=self._end, ino=self._ino))

    def _forget_after(self, cut: int) -> None:
        """Drop the index of the lines at or past byte ``cut`` (a rollback removed them); if
        ``cut`` is not where an indexed line starts, drop it all (the catch-up reads it again)."""
        if self._end <= cut:
            return
        keep = bisect.bisect_left(self._offsets, cut)
        if keep == len(self._offsets) or self._offsets[keep] != cut:
            keep, cut = 0, 0
        with self._index_lock:
            del self._offsets[keep:]
            self._end = cut
        self._by_op_id = {op: n for op, n in self._by_op_id.items() if n <= keep}
        self._indexed = min(self._indexed, keep)

    def _peek_mark(self) -> _Mark:
        return _read_mark(self._mark_fd)

    def _lower_mark(self, end: int) -> None:
        """The journal was cut back to ``end`` under the flock: no mark may claim more."""
        with self._sync_lock() as sync_fd:
            mark = _read_mark(sync_fd)
            if mark.durable > end:
                _write_mark(sync_fd, mark._replace(durable=end))

    def _index(self, offset: int, length: int, op_id: str | None) -> None:
        with self._index_lock:
            self._offsets.append(offset)
            self._end = offset + length
        if op_id is not None:
            self._by_op_id.setdefault(op_id, len(self._offsets))

    def _stored_op(self, fd: int, op_id: str) -> Event | None:
        seq = self._by_op_id.get(op_id)
        if seq is None:
            return None
        end = self._offsets[seq] if seq < len(self._offsets) else self._end
        return next(self._events(fd, seq, end))

    def _events(self, fd: int, seq: int, end: int) -> Iterator[Event]:
        """Validated events from ``seq`` up to byte ``end`` (already indexed lines)."""
        if seq > len(self._offsets):
            return
        for offset, raw, _complete in iter_lines(fd, self._offsets[seq - 1], end):
            try:
                yield self._decode(offset, raw, seq)
            except BadLine as exc:  # indexed lines were good: someone rewrote the file
                raise JournalCorrupt(str(self.path), seq, exc.reason) from None
            seq += 1

    def _read(self, start: int, first: int, want: int) -> Iterator[Event]:
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if self._limit is not None:
                size = min(size, self._limit)
            seq = first
            # Only the lines near the end are remembered (the recent ones, read again by the next
            # read or catch-up): keeping every line of a long replay churns the cache and costs a
            # third of the replay's time.
            recent = size - RECENT_BYTES
            for offset, raw, complete in iter_lines(fd, start, size):
                try:
                    if not complete:
                        return  # being written, or torn: the next append repairs it
                    event = self._decode(offset, raw, seq, offset >= recent)
                except BadLine as exc:
                    if offset + len(raw) + 1 >= size and exc.torn:
                        return
                    raise JournalCorrupt(str(self.path), seq, exc.reason) from None
                if seq >= want:
                    yield event
                seq += 1
        finally:
            os.close(fd)

    def _hook(self, point: str) -> None:
        if self._fault is not None:
            self._fault(point)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"journal {self.path} is closed")


class _Mark(NamedTuple):
    """``journal.sync``: ``durable``, the byte offset before which the journal (inode ``ino``) is
    known fdatasynced; ``gen``, how many rollbacks there were, the last one back to byte
    ``cut``; ``failing``, 1 while a failed fdatasync's rollback is pending. ``durable`` and
    ``failing`` change under the sync flock, ``gen`` and ``cut`` under both flocks."""

    durable: int = 0
    gen: int = 0
    cut: int = 0
    failing: int = 0
    ino: int = 0


_NO_MARK = _Mark()


def _read_mark(fd: int) -> _Mark:
    raw = os.pread(fd, 128, 0)
    fields = raw.split()
    if (
        not raw.endswith(b"\n")
        or len(fields) != len(_Mark._fields)
        or not all(map(bytes.isdigit, fields))
    ):
        return _NO_MARK
    return _Mark._make(map(int, fields))


def _write_mark(fd: int, mark: _Mark) -> None:
    # Fixed width, in place: one small pwrite. ``durable`` and ``failing`` are read under the sync
    # flock (a read under the journal flock uses only ``failing``, one byte, and the fields that
    # flock guards). Not fsynced: a mark lost to a power cut only makes the next append fdatasync.
    os.pwrite(fd, _MARK_FORMAT % mark, 0)


_MARK_FORMAT = b" ".join([b"%020d"] * len(_Mark._fields)) + b"\n"


def _rolled_back(path: Path) -> WriteFailed:
    cause = OSError(errno.EIO, "an fdatasync of the journal failed and rolled this append back")
    return WriteFailed(f"appending to {path}", cause)


def _line_at(fd: int, start: int, stop: int) -> bytes:
    """The bytes ``[start, stop)`` of ``fd`` (one whole line, newline included)."""
    return os.pread(fd, stop - start, start)
