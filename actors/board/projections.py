"""Projections of the team state on disk: ``.tasks/task_<n>.json`` and ``.team/team.json``.

They are read-only views for people and tools, rebuilt from the journal at any time. Each file
stores the ``seq`` it reflects (a task's last change, the team view's last change), so the same
journal always renders the same bytes: ``verify`` can diff a scratch replay against disk, and
``repair`` rewrites a file that is missing, stale, malformed or hand-edited.

Writers in every process take ``.team/projections.lock`` (flock); the lock file also holds the
seq projected so far (the mark). After its journal append (outside the journal's lock, so
projection I/O never lengthens the claim critical section) a board calls ``sync``: it *tries* the
lock without blocking. If it gets it, it catches up with the journal, writes every task changed
since the mark plus ``team.json``, moves the mark, and repeats until a catch-up finds nothing new;
then it releases and checks the journal once more, trying again if it grew. If the lock is busy it
returns at once: the holder covers its event (see ``sync`` for why nothing is left behind). So
under contention one writer projects a whole batch of commands, each file once. To make that
batch bigger, a holder that finds the journal already past its own event (other processes are
writing too) waits ``GROUP_WAIT_S`` before it writes, as a database's group commit does: the
others' syncs meanwhile return at once, and one pass writes theirs and its own (a task claimed
and completed in that time, and ``team.json``, once). A command with nobody writing beside it
does not wait.

When is a command visible in the files? Its own projection is written before the command returns,
unless another writer is syncing, in which case that writer writes it before releasing the
projection lock. The journal append (the acknowledgement) always comes first; a process that died
between its append and its sync is covered by the next sync of anyone, or by ``repair_all`` on
the next open.

Files are replaced atomically (a tmp file exchanged with the old one, ``swap_in``: a reader never
sees a torn or missing file) but not fsynced by default (``durable=False``): the journal is the
durable commit, and whatever a power cut leaves behind (an old version, an empty file, a stale
mark) is found by ``repair_all`` on the next open. The replaced inode is kept as the file's spare
(``.<name>.spare``) and refilled under a write lease at the next write (``_Swapper``): making a
new inode per write costs far more CPU than the write itself on some file systems. The mark
carries the boot id that wrote it: after a reboot ``repair_all`` compares every file, since a
power cut may have kept the mark but not the bytes of a file written before it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import signal
import stat
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from itertools import compress
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from math import isfinite
from operator import itemgetter, methodcaller
from pathlib import Path
from typing import Any, Literal

from actors.board.state import Task, TeamState, task_number
from mailboxes.fsutil import (
    BadJson,
    atomic_write,
    exchange,
    remove_orphan_tmp,
    strict_loads,
    swap_in,
    tmp_for,
    write_all,
)

log = logging.getLogger("actors.board.projections")

DriftKind = Literal["missing", "malformed", "stale", "differs", "extra"]


@dataclass(frozen=True, slots=True)
class Drift:
    """One projection file that does not match the state."""

    path: Path
    kind: DriftKind
    detail: str = ""

    def __str__(self) -> str:
        tail = f": {self.detail}" if self.detail else ""
        return f"{self.path}: {self.kind}{tail}"


def render_task(task: Task) -> dict[str, Any]:
    """The JSON object of a task file."""
    plan = task.plan
    return {
        "id": task.id,
        "subject": task.subject,
        "description": task.description,
        "status": task.status,
        "owner": task.owner,
        "held_by_human": task.human,
        "blocked_by": list(task.blocked_by),
        "blocks": list(task.blocks),
        "worktree": task.worktree,
        "epoch": task.epoch,
        "role": task.role,
        "plan": {
            "required": plan.required,
            "status": plan.status,
            "request_id": plan.request_id,
            "epoch": plan.epoch,
            "plan": plan.plan,
            "feedback": plan.feedback,
            "reviewer": plan.reviewer,
        },
        "summary": task.summary,
        "verify": task.verify,
        "verified": task.verified,
        "metadata": dict(task.metadata),
        "created_by": task.created_by,
        "created_at": task.created_at,
        "updated_at": task.updated_at,
        "seq": task.seq,
    }


def render_team(state: TeamState) -> dict[str, Any]:
    """The JSON object of ``team.json``: members with status, assignment and worktree.

    A person who claimed a task from a terminal (``--as NAME``) shows as a human member.
    """
    members = []
    names = list(state.members)
    names += [o for o in state.holdings if o not in state.members]
    for name in names:
        member = state.members.get(name)
        held = state.holding(name)
        human = (member is not None and member.kind == "human") or (held is not None and held.human)
        members.append(
            {
                "name": name,
                "kind": "human" if human else "agent",
                "role": member.role if member else None,
                "model": member.model if member else None,
                "status": member.status if member else "working",
                "reason": member.reason if member else "",
                "plan_required": member.plan_required if member else False,
                "task": held.id if held else None,
                "epoch": held.epoch if held else None,
                "worktree": held.worktree if held else None,
            }
        )
    return {"team": state.name, "members": members, "seq": state.team_seq}


def _encode(obj: dict[str, Any]) -> bytes:
    """One key per line (and one list item per line for lists of objects): readable, and each
    value goes through the C JSON encoder (``indent=`` would use the slow pure-Python one).

    The same bytes as ``json.dumps(value, ensure_ascii=False)`` per key and value, without its
    cost per call (a new encoder each time): one task file in ~8 us instead of ~90.
    """
    lines = []
    for key, value in obj.items():
        head = _KEYS.get(key) or _key(key)
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            items = ",\n    ".join(map(_dumps, value))
            lines.append(f"{head}[\n    {items}\n  ]")
        else:
            lines.append(head + _dumps(value))
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode("utf-8")


_ENCODER = json.JSONEncoder(ensure_ascii=False)
_KEYS: dict[str, str] = {}
_SCALARS: dict[Any, str] = {None: "null", True: "true", False: "false"}


def _key(key: str) -> str:
    """``  "key": `` (the first keys seen are kept: they are the fixed fields of the files)."""
    head = f"  {_dumps(key)}: "
    if len(_KEYS) < 256:
        _KEYS[key] = head
    return head


def _dumps(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)``."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if kind is int:
        return int.__repr__(value)
    if value is None or kind is bool:
        return _SCALARS[value]
    if kind is float and isfinite(value):  # a task's times
        return float.__repr__(value)
    if not value and (kind is list or kind is dict):
        return "[]" if kind is list else "{}"
    if _C_ENCODE is not None and (kind is dict or kind is list):
        # The C encoder ``JSONEncoder.encode`` would make for this one call, made once.
        return "".join(_C_ENCODE(value, 0))
    return _ENCODER.encode(value)


_C_ENCODE = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _ENCODER.default, encode_basestring, None, ": ", ", ", False, False, True
    )
)


class Projections:
    """The projection files of one repository (``root`` holds ``.tasks/`` and ``.team/``)."""

    def __init__(self, root: Path, *, durable: bool = False) -> None:
        self.root = root
        self.tasks_dir = root / ".tasks"
        self.team_file = root / ".team" / "team.json"
        self.lock_file = root / ".team" / "projections.lock"
        self._durable = durable
        self._made_dirs = False
        self._scan: _FileScan | None = None
        self._swapper = _Swapper()

    def task_file(self, tid: str) -> Path:
        """Where task ``tid`` is projected."""
        return self.tasks_dir / f"{tid}.json"

    # --- syncing with the journal ----------------------------------------------------------------

    def sync(self, refresh: Callable[[], TeamState], *, own: int | None = None) -> None:
        """Bring the files up to the journal, unless another writer holds the lock (it will).

        ``refresh`` catches up with the journal and returns the state at its end. Never blocks
        on the projection lock: under contention the one holder writes for everybody. ``own``:
        the seq of the caller's last appended event; when the journal is already past it, other
        processes are writing, and the holder waits ``GROUP_WAIT_S`` to write theirs in the same
        pass (see the module docstring).

        Why no appended event is left unprojected: let event ``e`` be appended (durably, before
        its writer calls ``sync``), and let the writer's non-blocking try fail. Then some holder
        ``H`` held the lock at that moment, after ``e`` was appended. Every holder, after
        releasing, catches up with the journal (which now contains ``e``) and, if that is past
        the mark, tries again: either it gets the lock and writes up to the journal's end (so
        ``e`` is covered), or the try fails because a newer holder ``H'`` took the lock after
        ``e`` was appended, and ``H'`` is in ``H``'s position. Each hand-over needs a new lock
        acquisition that happened after ``e``, so when appends stop the chain ends with ``e``
        written. ``repair_all`` (the only blocking holder) follows the same rule on release.

        A write that fails (disk full, something in the way) is logged, not raised: the command
        is already committed in the journal, and reporting it as failed would invite a retry
        that does it twice. The mark stays put, so the next sync or ``repair_all`` redoes it.
        """
        try:
            while True:
                mark = self._drain(refresh, own)
                # Checked after the release: see the proof above.
                if mark is None or refresh().seq <= mark:
                    return
                own = None  # one wait per command at most
        except OSError as exc:
            log.warning("projections not updated (fixed at the next sync): %s", exc)

    def _drain(self, refresh: Callable[[], TeamState], own: int | None = None) -> int | None:
        """If the lock is free: write until a catch-up finds nothing new; the mark reached.
        None if another writer holds the lock. ``own``: as in ``sync``."""
        self._dirs()
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None
            mark = _read_mark(fd)
            state = refresh()
            if own is not None and state.seq > max(own, mark):
                # Others appended after us: their syncs, finding the lock taken, leave their
                # events to us. A moment's wait lets more of them join this pass.
                _pause(GROUP_WAIT_S)
                state = refresh()
            while state.seq > mark:
                self.write(state, since=mark + 1)
                _write_mark(fd, state.seq)
                mark = state.seq
                state = refresh()
            return mark
        finally:
            os.close(fd)  # releases the flock

    def repair_all(self, catch_up: Callable[[], TeamState]) -> list[str]:
        """Under the projection lock: catch up, repair every drifted file, move the mark.

        Then syncs once more: a writer that found the lock busy meanwhile relies on us.
        A write that fails (disk full) is logged, not raised: the journal is the truth, and a
        command that only reads it must not fail for a view (the next open repairs it).
        """
        scan, self._scan = self._scan, None
        try:
            with self.locked() as fd:
                state = catch_up()
                mark = _read_mark(fd)
                # Mark current and written since this boot: only files touched since it was
                # written can have drifted. After a reboot (a power cut may have kept the mark
                # but lost later bytes of a file written before it) every file is compared.
                this_boot = _mark_boot(fd) == _boot_id()
                since = os.fstat(fd).st_mtime_ns if mark == state.seq and this_boot else None
                lines, fixed = self._repair(state, since, scan)
                # An unchanged mark keeps its time: a file edited while this open scanned (after
                # the scan looked at it) is still newer than the mark at the next open. One from
                # another boot is written again once every file was compared.
                if fixed or mark != state.seq or not this_boot:
                    _write_mark(fd, state.seq)
        except OSError as exc:
            reason = exc.strerror or exc  # the path would name a tmp file
            log.warning("projections not repaired (fixed at the next open): %s", reason)
            return []
        finally:
            if scan is not None:
                scan.close()
        self.sync(catch_up)
        return lines

    def prefetch(self) -> None:
        """Start looking for task files modified since the mark (``_FileScan``) in another
        process, to be used by the next ``repair_all``: a board calls this before it loads its
        snapshot and folds the journal, so the look (one ``stat`` per task file, kernel time)
        runs on another core meanwhile. Only for folders big enough to be worth a process;
        anything unexpected leaves ``repair_all`` to look itself."""
        self.drop_prefetch()
        try:
            if os.stat(self.tasks_dir).st_size < PREFETCH_MIN_DIR_BYTES:
                return
            since = os.stat(self.lock_file).st_mtime_ns
        except OSError:
            return
        self._scan = _FileScan.start(self.tasks_dir, self.lock_file, since)

    def drop_prefetch(self) -> None:
        """Forget a ``prefetch`` not used (its process is stopped and reaped)."""
        scan, self._scan = self._scan, None
        if scan is not None:
            scan.close()

    @contextmanager
    def locked(self) -> Iterator[int]:
        """Hold the projection lock; yields the lock file's descriptor, which holds the mark.

        Each call is its own ``open()``, so threads of one process exclude each other too. A
        holder must sync after releasing (see ``sync``): writers do not wait for the lock.
        """
        self._dirs()
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)

    def projected_seq(self) -> int:
        """The seq every projection reflects (0 if unknown: then everything is rewritten).

        Read without the lock (holding it would make a writer skip its sync): the mark is one
        fixed-width ``pwrite``, and a read that raced one is retried until two reads agree.
        """
        self._dirs()
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            seen = _read_mark(fd)
            while (again := _read_mark(fd)) != seen:
                seen = again
            return seen
        finally:
            os.close(fd)

    # --- writing -------------------------------------------------------------------------------

    def write(self, state: TeamState, *, since: int) -> None:
        """Write what changed at or after seq ``since`` (tasks, and the team view)."""
        self._dirs()
        changed = state.changed_since(since)
        # A task file made by a command (not a bulk import) gets its spare at once, so that
        # claiming and completing the task make no inode (``_Swapper``).
        born = len(changed) <= SPARES_AT_BIRTH
        for task in changed:
            self._put(self.task_file(task.id), render_task(task), born=born)
        if state.team_seq >= since:
            self._put(self.team_file, render_team(state), born=True)

    def write_all(self, state: TeamState) -> None:
        """Write every projection of ``state``."""
        self.write(state, since=0)

    def repair(self, state: TeamState, *, changed_since: int | None = None) -> list[str]:
        """Rewrite every drifted file (and remove task files the journal never made).

        ``changed_since`` (nanoseconds): the projections were complete at that time (the mark's
        last write), so only task files modified since then, missing ones and extra ones are
        compared (opening a team of 20,000 tasks then costs one directory scan, not 20,000
        renders); None compares every file. Returns one line per repair; each is also logged
        as a warning.
        """
        return self._repair(state, changed_since, None)[0]

    def _repair(
        self, state: TeamState, changed_since: int | None, scan: _FileScan | None
    ) -> tuple[list[str], int]:
        """``repair``, and how many files it rewrote or removed. ``scan``: a ``prefetch`` that
        may already know which task files were modified at or after ``changed_since``."""
        self._dirs()
        if changed_since is None:  # else the one scan of the folder in _changed_drift does it
            remove_orphan_tmp(self.tasks_dir)
        remove_orphan_tmp(self.team_file.parent)
        lines = []
        drifts = (
            verify(state, self.root)
            if changed_since is None
            else self._changed_drift(state, changed_since, scan)
        )
        for drift in drifts:
            if drift.kind == "extra":
                drift.path.unlink(missing_ok=True)
                line = f"removed projection {drift}"
            else:
                if drift.path == self.team_file:
                    self._put(drift.path, render_team(state))
                else:
                    self._put(drift.path, render_task(state.task(drift.path.stem)))
                line = f"rewrote projection {drift}"
            if state.seq > 0:  # creating the files of a brand-new team is not a repair
                # A stale file is what a concurrent writer leaves for an instant between its
                # append and its projection write (or a writer that died there): routine, so
                # not worth a warning. Anything else means someone edited the files by hand.
                log.log(logging.INFO if drift.kind == "stale" else logging.WARNING, line)
                lines.append(line)
        return lines, len(drifts)

    def _changed_drift(
        self, state: TeamState, since_ns: int, scan: _FileScan | None = None
    ) -> list[Drift]:
        """``verify`` limited to task files modified at or after ``since_ns``, empty or missing
        task files, files of tasks the journal never made, and ``team.json``. Deletes the temporary
        files of writers that died mid-write on the way (``remove_orphan_tmp``). ``scan``: when
        its answer is complete (``_FileScan.result``), only names are listed here, without a
        ``stat`` per file."""
        tasks = state.tasks
        touched: set[str] = set()
        present: set[str] = set()
        extra: list[Path] = []
        known = None
        if scan is not None:
            # Listed while the scan may still run: at C speed (no Python code per name), 20,000
            # names on a big team. ``present`` keeps the extra ones: only
            # ``tasks.keys() - present`` is used below.
            names = os.listdir(self.tasks_dir)
            present = set(map(_STEM, compress(names, map(_IS_JSON, names))))
            known = scan.result(since_ns)
        if known is not None:
            for name in known:
                tid = name[:-5]
                if tid in tasks and name.endswith(".json"):
                    touched.add(tid)
                elif name[:1] == "." and name[1:].endswith(".tmp"):  # remove_orphan_tmp's .*.tmp
                    (self.tasks_dir / name).unlink(missing_ok=True)
            for tid in present - tasks.keys():
                if tid.startswith("task_") and tid[5:].isdigit():
                    extra.append(self.task_file(tid))
        else:
            present = set()
            with os.scandir(self.tasks_dir) as entries:  # one pass; 20,000 files on a big team
                for entry in entries:
                    name = entry.name
                    tid = name[:-5]
                    if tid in tasks and name.endswith(".json"):  # the ids are all task_<n>
                        present.add(tid)
                        stat = entry.stat()
                        # An empty file is what a power cut leaves of one written shortly
                        # before (``swap_in`` does not fsync), even when the mark made it to
                        # disk.
                        if stat.st_mtime_ns >= since_ns or stat.st_size == 0:
                            touched.add(tid)
                    elif name.startswith("task_") and name.endswith(".json") and tid[5:].isdigit():
                        extra.append(Path(entry.path))
                    elif name[:1] == "." and name[1:].endswith(".tmp"):  # .*.tmp
                        Path(entry.path).unlink(missing_ok=True)
        drifts = []
        # Touched or missing files, in id order (ids are dense in creation order).
        for tid in sorted(touched | (tasks.keys() - present), key=task_number):
            drift = _check(self.task_file(tid), render_task(tasks[tid]))
            if drift is not None:
                drifts.append(drift)
        for path in sorted(extra, key=lambda p: int(p.stem[5:])):
            drifts.append(Drift(path, "extra", "no such task in the journal"))
        drift = _check(self.team_file, render_team(state))
        if drift is not None:
            drifts.append(drift)
        return drifts

    def _dirs(self) -> None:
        if not self._made_dirs:
            self.tasks_dir.mkdir(parents=True, exist_ok=True)
            self.team_file.parent.mkdir(parents=True, exist_ok=True)
            self._made_dirs = True

    def _put(self, path: Path, obj: dict[str, Any], *, born: bool = False) -> None:
        if self._durable:
            atomic_write(path, _encode(obj), durable=True)
            return
        # A finished task's file is not written again: its old inode is not kept as a spare.
        keep = obj.get("status") not in ("completed", "deleted")
        if not self._swapper.put(path, _encode(obj), keep=keep, born=born):
            swap_in(path, _encode(obj))

    # --- reading -------------------------------------------------------------------------------

    def read_task(self, tid: str) -> dict[str, Any] | None:
        """A task file as written (None if absent or malformed)."""
        return _read(self.task_file(tid))

    def read_tasks(self) -> list[dict[str, Any]]:
        """Every readable task file, in id order."""
        found = []
        for path in _task_files(self.tasks_dir):
            obj = _read(path)
            if obj is not None:
                found.append(obj)
        return found

    def read_team(self) -> dict[str, Any] | None:
        """``team.json`` as written (None if absent or malformed)."""
        return _read(self.team_file)


PREFETCH_MIN_DIR_BYTES = 64 * 1024
"""``prefetch`` starts no process for a ``.tasks/`` folder smaller than this (about 2,000 files
on ext4): ``repair_all`` then stats the files itself, which costs less than a process."""
_IS_JSON = methodcaller("endswith", ".json")
_STEM = itemgetter(slice(None, -5))  # task_<n>.json -> task_<n>


class _FileScan:
    """A ``find`` process listing the task files modified at or after ``since`` (the mark's
    time) or empty, and writers' tmp files: one ``stat`` per file, as ``_changed_drift`` would
    do, but on another core while this process decodes its snapshot (the ``stat`` calls are
    kernel time: ``find`` makes them no faster, only in parallel; docs/ARCHITECTURE.md,
    "Snapshots"). Its answer (``result``) is used only when it is sure to be complete:

    - ``find`` exited 0 (it could look at every file);
    - it listed the lock file itself, whose time is ``since``: proof that it compared times to
      the nanosecond rather than rounding the reference up (the reference is ``since`` - 1 ns,
      as ``-newermt`` means strictly newer);
    - the mark's time read under the projection lock is still ``since``: no writer moved the
      mark, so none wrote projections, since the scan began.

    Anything else (no ``find``, another ``find``, an error) makes ``repair_all`` look itself.
    """

    def __init__(self, pid: int, fd: int, folder: Path, lock_file: Path, since: int) -> None:
        self._pid: int | None = pid
        self._fd: int | None = fd
        self._folder = os.fsencode(folder)
        self._lock_file = os.fsencode(lock_file)
        self._since = since

    @classmethod
    def start(cls, folder: Path, lock_file: Path, since: int) -> _FileScan | None:
        """Start the scan (None when ``find`` cannot be started)."""
        seconds, nanos = divmod(since - 1, 1_000_000_000)
        # -L: the times of the files links point to, as ``_changed_drift``'s ``stat`` sees. A
        # name gone before find looked at it (a writer's tmp file) is no error: names are listed
        # again under the lock.
        args = ["find", "-L", os.fspath(lock_file), os.fspath(folder), "-maxdepth", "1"]
        args.append("-ignore_readdir_race")
        args += ["(", "-newermt", f"@{seconds}.{nanos:09d}", "-o", "-empty", "-o", "-name"]
        args += [".*.tmp", ")", "-print0"]
        try:
            read, write = os.pipe()
        except OSError:  # out of descriptors: the board looks itself
            return None
        try:
            pid = os.posix_spawnp(
                "find",
                args,
                {**os.environ, "LC_ALL": "C"},
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, write, 1),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
            )
        except OSError:
            os.close(read)
            return None
        finally:
            os.close(write)
        return cls(pid, read, folder, lock_file, since)

    def result(self, since: int | None) -> set[str] | None:
        """The names of the files found, if the scan is complete for a mark of time ``since``
        (see the class); None if not (or ``since`` is None: the mark is not current)."""
        if self._fd is None or self._pid is None:
            return None
        chunks = []
        try:
            while chunk := os.read(self._fd, 1 << 16):
                chunks.append(chunk)
        except OSError:
            return None
        try:
            _, status = os.waitpid(self._pid, 0)
        except ChildProcessError:  # reaped already (SIGCHLD ignored): no exit status
            self._pid = None
            return None
        self._pid = None
        if since != self._since or os.waitstatus_to_exitcode(status) != 0:
            return None
        names: set[str] = set()
        complete = False
        for path in b"".join(chunks).split(b"\0")[:-1]:
            folder, _, name = path.rpartition(b"/")
            if path == self._lock_file:
                complete = True
            elif folder == self._folder:
                names.add(os.fsdecode(name))
        return names if complete else None

    def close(self) -> None:
        """Stop the process if it still runs, reap it, close the pipe."""
        if self._pid is not None:
            with suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            with suppress(ChildProcessError):
                os.waitpid(self._pid, 0)
            self._pid = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def verify(state: TeamState, root: Path) -> list[Drift]:
    """Every difference between the projections ``state`` renders and the files under ``root``.

    Used by ``teamctl replay --verify`` (fold the whole journal, then compare) and by repair.
    """
    proj = Projections(root)
    drifts = []
    for task in state.tasks.values():
        drift = _check(proj.task_file(task.id), render_task(task))
        if drift is not None:
            drifts.append(drift)
    for path in _task_files(proj.tasks_dir):
        if path.stem not in state.tasks:
            drifts.append(Drift(path, "extra", "no such task in the journal"))
    drift = _check(proj.team_file, render_team(state))
    if drift is not None:
        drifts.append(drift)
    return drifts


def _check(path: Path, expected: dict[str, Any]) -> Drift | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Drift(path, "missing")
    if raw == _encode(expected):
        return None
    try:
        found = strict_loads(raw)
    except BadJson as exc:
        return Drift(path, "malformed", str(exc))
    if not isinstance(found, dict):
        return Drift(path, "malformed", "not a JSON object")
    seq = found.get("seq")
    if isinstance(seq, int) and seq < expected["seq"]:
        return Drift(path, "stale", f"reflects seq {seq}, the journal is at {expected['seq']}")
    fields = sorted(k for k in expected.keys() | found.keys() if found.get(k) != expected.get(k))
    return Drift(path, "differs", "fields " + ", ".join(fields) if fields else "formatting")


def _read_mark(fd: int) -> int:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").split(" ", 1)[0].strip()
    return int(text) if text.isdigit() else 0


def _mark_boot(fd: int) -> str:
    """The boot id written with the mark ("" for a mark without one)."""
    fields = os.pread(fd, _MARK_BYTES, 0).decode("ascii", "replace").split()
    return fields[1] if len(fields) == 2 else ""


def _write_mark(fd: int, seq: int) -> None:
    # Fixed width, written in place under the lock: no rename per command. One small pwrite is
    # not torn by the writer's death. The boot id says which boot wrote it: repair_all trusts
    # the mark's time only within that boot (after a reboot it checks every file).
    os.pwrite(fd, b"%020d %s\n" % (seq, _BOOT_ID), 0)


def _boot_id() -> str:
    return _BOOT_ID.decode("ascii")


def _read_boot_id() -> bytes:
    """This boot's id (Linux: ``/proc/sys/kernel/random/boot_id``); without one, a fixed
    placeholder (the mark's time is then trusted across boots, as before)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            found = f.read(64).strip()
    except OSError:
        return b"-"
    return found if found and found.replace(b"-", b"").isalnum() else b"-"


_BOOT_ID = _read_boot_id()
_MARK_BYTES = 21 + 64 + 1


class _Swapper:
    """Replaces a projection file without making a new inode each time (``put``).

    ``swap_in`` writes a new file and exchanges it with the old one, whose inode is then
    deleted: every write makes one inode and frees one. Where inodes are costly to make (on an
    ext4 without a journal, the allocator checks every inode freed in the last minutes before
    it reuses one: ~0.1-0.5 ms of CPU per file under a claim race), ``put`` keeps the old
    inode instead, under a spare name next to the file (``.<name>.spare``), and at the next
    write of that file fills the spare and exchanges it back in.

    A spare may still be open by a reader that opened the file before the exchange: it is
    refilled only under a write lease (``F_SETLEASE``), which the kernel grants only while
    nobody else has the file open and which holds anyone who opens it meanwhile (as ``open``
    waits for a lease to be given up) until the spare is whole and exchanged in: so a reader
    sees one whole version, never a torn file, and only ever a version of the file it named
    (a spare belongs to one path). No lease (someone has the spare open, leases not allowed
    here): the spare is dropped and the file replaced as ``swap_in`` does. The lease's owner
    is cleared as soon as it is taken, so an open that waits on it sends no signal (SIGIO
    would end the process). Callers hold the projection lock: one writer per spare.
    """

    def __init__(self) -> None:
        self.works = sys.platform == "linux" and hasattr(fcntl, "F_SETLEASE")

    def put(self, path: Path, data: bytes, *, keep: bool, born: bool = False) -> bool:
        """Replace ``path`` with ``data``; False if not done (the caller uses ``swap_in``).
        ``keep``: keep the replaced inode as the spare of ``path`` (else delete it); ``born``:
        if ``path`` is new, give it a spare at once, so even its first rewrite makes no
        inode."""
        if not (self.works and exchange.works):
            return False
        target = os.fspath(path)
        spare = _spare_for(target)
        try:
            # Non-blocking: a FIFO in the way fails at once instead of waiting for a reader.
            fd = os.open(spare, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return self._first(path, spare, data, keep=keep, born=born)
        except OSError:
            return False  # something else in the way: swap_in replaces the file as before
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return False
            if not self._lease(fd, spare):
                # Someone has the spare open: a new file; leases not allowed here: as before.
                return self.works and self._first(path, spare, data, keep=keep)
            try:
                _hook("leased", fd)
                os.pwrite(fd, data, 0)
                if info.st_size > len(data):  # else the write covered every old byte
                    os.ftruncate(fd, len(data))
                if not exchange(spare, target):
                    return False  # no file to exchange with: the caller makes it
                _swapped_out(spare, target, keep=keep)
            finally:
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        finally:
            os.close(fd)
        return True

    def _lease(self, fd: int, spare: str) -> bool:
        """Take a write lease on the spare (its owner cleared); on failure delete the spare
        (someone reads it, or it is not ours to lease) and say so."""
        try:
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EBUSY):
                self.works = False  # leases not allowed here (not ours, no support): as before
            os.unlink(spare)
            return False
        try:
            fcntl.fcntl(fd, fcntl.F_SETOWN, 0)
        except OSError:
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            self.works = False
            os.unlink(spare)
            return False
        return True

    def _first(
        self, path: Path, spare: str, data: bytes, *, keep: bool, born: bool = False
    ) -> bool:
        """No spare: a new file exchanged in, and the old one kept as the spare (a new file:
        renamed in, and with ``born`` a spare made beside it)."""
        if not keep:
            return False
        target = os.fspath(path)
        tmp = os.fspath(tmp_for(path))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
            if not exchange(tmp, target):
                os.replace(tmp, target)  # a first write: nothing to keep
                if born:
                    _born_spare(spare, data)
                return True
            if _swapped_out(tmp, target, keep=True):
                os.rename(tmp, spare)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise
        return True


def _swapped_out(name: str, target: str, *, keep: bool) -> bool:
    """After exchanging a new file in at ``target``, what came out (now at ``name``): a folder
    in the way is put back and refused as a rename over it would be; anything but a regular
    file is deleted, as is a regular one not kept. True if a file to keep is at ``name``."""
    mode = os.lstat(name).st_mode
    if stat.S_ISDIR(mode):
        exchange(name, target)
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target)
    if keep and stat.S_ISREG(mode):
        return True
    os.unlink(name)
    return False


def _born_spare(spare: str, data: bytes) -> None:
    """A new file's first spare, a copy of its bytes (never under the file's name, so no reader
    can have it open); optional: if it cannot be made whole (disk full) it is not left."""
    try:
        fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except OSError:
        return
    try:
        write_all(fd, data)
    except OSError:
        os.unlink(spare)
    finally:
        os.close(fd)


def _spare_for(target: str) -> str:
    folder, _, name = target.rpartition("/")
    return f"{folder}/.{name}{SPARE_SUFFIX}"


GROUP_WAIT_S = 0.001
"""How long a projection writer that finds other processes writing waits before its pass, so the
pass covers their commands too (``sync``). With 16 processes racing for claims on 2 cores it
cuts the writing passes by a quarter (0.96 to 0.72 per claim) and the files written by a tenth
(2.9 to 2.6 per claim). A command with nobody writing beside it never waits."""

_pause: Callable[[float], None] = time.sleep
"""Test seam: how ``_drain`` waits ``GROUP_WAIT_S``."""

SPARES_AT_BIRTH = 16
"""A write of at most this many task files gives a new one its spare at once (``born``); a
bigger one (``teamctl task import``) does not: the first rewrite of each makes it."""

SPARE_SUFFIX = ".spare"
"""A projection file's spare inode is ``.<name>.spare`` beside it (``_Swapper``)."""


def _no_hook(_point: str, _fd: int) -> None:
    return None


_hook: Callable[[str, int], None] = _no_hook
"""Test seam: called with ``"leased"`` and the spare's descriptor once it is leased, before it
is written."""


def _read(path: Path) -> dict[str, Any] | None:
    try:
        obj = strict_loads(path.read_bytes())
    except (FileNotFoundError, BadJson):
        return None
    return obj if isinstance(obj, dict) else None


def _task_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    files = [p for p in folder.glob("task_*.json") if p.stem[5:].isdigit()]
    return sorted(files, key=lambda p: int(p.stem[5:]))
