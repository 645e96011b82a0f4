"""Durable per-agent inboxes on disk: one Maildir per agent under ``.team/mailboxes``.

Layout: ``<root>/<agent>/{tmp,new,cur,bad}``. A sender writes ``tmp/<name>``, fsyncs it, links
it into ``new/<name>`` (never replacing a file already there), removes the ``tmp`` name and fsyncs
``new/``; only then is the delivery acknowledged. Readers list ``new/`` and so never see a partial
message. ``<name>`` is ``<ns:020>.<pid>-<seq:010>-<host>.<msg_id>`` (``UniqueNames``): it sorts by
delivery time and is unique across processes and hosts even when two of them deliver the same
message id in the same nanosecond; should a name still be taken, in ``tmp/`` or in ``new/``, the
sender retries with a fresh one. Ack renames ``new/<name>`` to ``cur/<name>``. A file in ``new``
that is not a valid envelope is moved to ``bad/`` with a warning, never retried.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from mailboxes.errors import BadMessage, UnknownRecipient, WriteFailed
from mailboxes.fsutil import Fsync, fsync_dir, write_all
from mailboxes.names import BROADCAST, InvalidEnvelope, check_agent_name
from mailboxes.ports import Clock, IdSource
from teamctl_base.clock import SystemClock, UuidIds
from teamctl_base.crashpoints import crash_point

if TYPE_CHECKING:  # the envelope models load on first delivery or read (mailboxes/names.py)
    from mailboxes.messages import Envelope
    from mailboxes.messages import MessageDraft as MessageDraft

__all__ = ["Maildir", "MessageDraft", "UniqueNames"]


def __getattr__(name: str) -> object:
    """``MessageDraft``, long importable from here, loads the envelope models only when asked
    for (importing this module does not)."""
    if name == "MessageDraft":
        return _models().MessageDraft
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{20})\.([A-Za-z0-9-]{1,80})\.([A-Za-z0-9_-]{1,64})$")
_NAME_ATTEMPTS = 100
"""Fresh names tried for one message before a delivery gives up (each collision is a bug or an
adversary: ``UniqueNames`` never repeats one)."""
_NO_LINK = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK})
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FOLDERS_KEPT = 1024
"""Agent names whose folder paths a ``Maildir`` keeps (a team has a few dozen at most)."""
_SUBDIRS = ("tmp", "cur", "bad", "new")  # ``new`` last: its presence means "known agent"

Step = Callable[[str], None]
"""Fault-injection hook called after each delivery step: ``tmp_written``, ``tmp_synced``,
``renamed`` (per message) and ``dir_synced`` (per inbox)."""


NameSource = Callable[[int, str], str]
"""Makes a delivery's file name from its time (integer nanoseconds) and message id; called
again with the same arguments after a collision, it must eventually return a different name."""


_pid = [os.getpid()]
"""This process's id, kept rather than asked for on every delivery; a forked child re-reads it."""


def _forked() -> None:
    _pid[0] = os.getpid()


os.register_at_fork(after_in_child=_forked)


class UniqueNames:
    """The production ``NameSource``: ``<ns:020>.<pid>-<seq:010>-<host>.<msg_id>``.

    ``seq`` counts per process, so names from one host never repeat, and the host (letters, digits
    and ``-`` only) keeps two hosts sharing a folder apart. Thread-safe."""

    def __init__(self, host: str | None = None) -> None:
        raw = socket.gethostname() if host is None else host
        self.host = re.sub(r"[^A-Za-z0-9-]", "-", raw)[:40] or "host"
        self._seq = itertools.count(1)  # ``next`` on it is atomic (one C call under the GIL)

    def __call__(self, ns: int, msg_id: str) -> str:
        # ``seq`` zero-padded: at one ``ns`` (a fixed clock, two Maildirs in one process) the
        # names then still sort in send order when the count gains a digit (9 -> 10).
        # (``str.zfill`` pads as ``:020d`` does, in half the time.)
        seq = str(next(self._seq)).zfill(10)
        return f"{str(ns).zfill(20)}.{_pid[0]}-{seq}-{self.host}.{msg_id}"


_MODELS: list[ModuleType] = []


def _models() -> ModuleType:
    """``mailboxes.messages``, imported at the first delivery (it loads pydantic: see
    mailboxes/names.py) and kept: a cached reference costs a delivery less than an ``import``
    statement does (~7,500 instructions)."""
    if not _MODELS:
        import mailboxes.messages

        _MODELS.append(mailboxes.messages)
    return _MODELS[0]


_UNIQUE_NAMES = UniqueNames()  # one counter per process, shared by every Maildir in it


def _id_of(name: str) -> str | None:
    match = _NAME.fullmatch(name)
    return match.group(3) if match else None


class Maildir:
    """The file ``Mailbox``: safe for many threads and processes sending to one inbox; one
    reader per inbox is expected (two readers may both see a message before either acks)."""

    def __init__(
        self,
        root: Path,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        *,
        max_message_bytes: int = 1_048_576,
        on_step: Step | None = None,
        fsync: Fsync = os.fsync,
        names: NameSource | None = None,
    ) -> None:
        self.root = Path(root)
        self._clock: Clock = clock or SystemClock()
        self._ids: IdSource = ids or UuidIds()
        self.max_message_bytes = max_message_bytes
        self._on_step = on_step
        self._fsync = fsync
        self._names: NameSource = names or _UNIQUE_NAMES
        self._system_clock = clock is None
        self._base = os.fspath(self.root)  # plain strings: pathlib costs more than a syscall
        self._folders: dict[str, tuple[str, str, str]] = {}  # see ``_folders_of``
        self._lock = threading.Lock()
        self._last_ns = 0
        # Per inbox: the envelopes ``pending`` parsed, by file name, with the file's identity
        # (``_identity``): a message kept unacked (a lead holding notices) is read once, not at
        # every wake. Only names still in ``new/`` at the last listing are kept.
        self._parsed: dict[str, dict[str, tuple[tuple[int, ...], Envelope, int]]] = {}

    # -- inboxes -------------------------------------------------------------------------------

    def inbox(self, agent: str) -> Path:
        """The folder of ``agent``'s inbox (validated name; may not exist)."""
        return self.root / check_agent_name(agent)

    def ensure_inbox(self, agent: str) -> None:
        """Create ``agent``'s inbox if missing (idempotent, durable)."""
        box = self.inbox(agent)
        if (box / "new").is_dir():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        box.mkdir(exist_ok=True)
        fsync_dir(self.root, self._fsync)
        for sub in _SUBDIRS:
            (box / sub).mkdir(exist_ok=True)
        fsync_dir(box, self._fsync)

    def agents(self) -> list[str]:
        """Known agents (those with an inbox), sorted."""
        try:
            entries = os.listdir(self.root)
        except FileNotFoundError:
            return []
        return sorted(
            name for name in entries if _is_agent_name(name) and (self.root / name / "new").is_dir()
        )

    def agent_for_path(self, path: Path) -> str | None:
        """The agent whose inbox contains ``path`` (for watcher hints), or ``None``."""
        path = Path(path)
        for root in (self.root.absolute(), self.root.resolve()):  # hints come as absolute paths
            if path.is_relative_to(root):
                parts = path.relative_to(root).parts
                return parts[0] if parts and _is_agent_name(parts[0]) else None
        return None

    def _require(self, agent: str) -> Path:
        box = self.inbox(agent)
        if not (box / "new").is_dir():
            raise UnknownRecipient(agent, self.agents())
        return box

    # -- delivery ------------------------------------------------------------------------------
    #
    # One durable delivery is, in system calls: create ``tmp/<name>`` exclusively, write, fsync,
    # close; move it into ``new/<name>`` without replacing anything there (``link`` + ``unlink``:
    # a rename would replace a file of that name); open, fsync and close ``new/``. The folder is
    # opened by path each time, not kept open: a descriptor kept from earlier would still point
    # at an inbox that was since removed and made again, and the message would be lost with it.
    # The Python around those calls is only what the envelope needs (its id, JSON and name):
    # benchmarks/bench_mailbox.py measures a delivery against the same calls made bare.

    def deliver(self, sender: str, draft: MessageDraft) -> list[Envelope]:
        """Deliver ``draft`` durably; ``*`` = one copy (own id) per known agent but ``sender``."""
        if draft.to == BROADCAST:
            return self._deliver(sender, [draft], self._ids.new_id)
        return [self._deliver_one(self._checked(sender), draft, self._ids.new_id)]

    def deliver_keyed(self, sender: str, draft: MessageDraft, message_id: str) -> bool:
        """Deliver ``draft`` to one agent under ``message_id`` unless its inbox already holds
        that id (acked or not); True if it was delivered now."""
        if self.holds(draft.to, message_id):
            return False
        self._deliver_one(self._checked(sender), draft, lambda: message_id)
        return True

    def deliver_many(self, sender: str, drafts: Sequence[MessageDraft]) -> list[Envelope]:
        """Deliver several drafts with one group commit (one fsync per touched inbox folder).

        All recipients are checked first: an unknown one refuses the whole call, writing nothing.
        """
        if len(drafts) == 1:
            return self.deliver(sender, drafts[0])
        return self._deliver(sender, drafts, self._ids.new_id)

    def _deliver_one(self, sender: str, draft: MessageDraft, new_id: Callable[[], str]) -> Envelope:
        """One message to one agent (``sender`` checked). No stat up front: a missing inbox
        fails the create in ``tmp/`` or the move into ``new/``, which become the same refusal
        as ``_deliver``'s."""
        # The common case runs inline (each call here costs more than it seems: a delivery that
        # follows a disk wait finds the CPU caches cold); collisions, errors and file systems
        # without hard links go through the same helpers as ``_deliver``.
        models = _MODELS[0] if _MODELS else _models()
        to = draft.to
        _, tmp_dir, new_dir = self._folders.get(to) or self._folders_of(to)
        ns, ts = self._stamp()
        envelope: Envelope = models.envelope_for(draft, id=new_id(), sender=sender, to=to, ts=ts)
        data = self._encode(envelope, models.dump_envelope)
        tmp, name = self._write_tmp(tmp_dir, self._names(ns, envelope.id), envelope, data)
        try:
            crash_point("maildir.before_rename")
            try:
                os.link(tmp, f"{new_dir}/{name}")
            except OSError:  # taken, no hard links here, no ``new/``: the careful way
                self._publish(tmp, name, new_dir, envelope)
            else:
                os.unlink(tmp)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)  # a failed call leaves no orphan behind
            raise
        step = self._on_step
        if step is not None:
            step("renamed")
        dir_fd = os.open(new_dir, _DIRECTORY)
        try:
            self._fsync(dir_fd)
        finally:
            os.close(dir_fd)
        if step is not None:
            step("dir_synced")
        return envelope

    def _deliver(
        self, sender: str, drafts: Sequence[MessageDraft], new_id: Callable[[], str]
    ) -> list[Envelope]:
        """Several drafts or a broadcast: every recipient checked first, one fsync per inbox."""
        models = _models()
        self._checked(sender)
        targets: list[tuple[MessageDraft, str]] = []
        for draft in drafts:
            if draft.to == BROADCAST:
                targets.extend((draft, agent) for agent in self.agents() if agent != sender)
            elif os.path.isdir(self._folders_of(draft.to)[2]):
                targets.append((draft, draft.to))
            else:
                raise UnknownRecipient(draft.to, self.agents())
        staged: list[tuple[Envelope, int, bytes]] = []
        for draft, recipient in targets:
            ns, ts = self._stamp()
            envelope = models.envelope_for(draft, id=new_id(), sender=sender, to=recipient, ts=ts)
            staged.append((envelope, ns, self._encode(envelope, models.dump_envelope)))
        written: dict[str, None] = {}  # ``tmp/`` files not moved into ``new/`` yet
        new_dirs: dict[str, None] = {}
        tmp_names: list[tuple[str, str]] = []  # (path, name) of each message's ``tmp/`` file
        try:
            for envelope, ns, data in staged:
                tmp_dir = self._folders_of(envelope.to)[1]
                tmp, name = self._write_tmp(tmp_dir, self._names(ns, envelope.id), envelope, data)
                written[tmp] = None
                tmp_names.append((tmp, name))
            crash_point("maildir.before_rename")
            for (envelope, _, _), (tmp, name) in zip(staged, tmp_names, strict=True):
                new_dir = self._folders_of(envelope.to)[2]
                self._publish(tmp, name, new_dir, envelope)
                del written[tmp]
                new_dirs[new_dir] = None
                self._step("renamed")
        finally:
            for tmp in written:  # a failed call leaves no orphan behind
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        for new_dir in new_dirs:
            self._sync_dir(new_dir)
        return [envelope for envelope, _, _ in staged]

    def _checked(self, agent: str) -> str:
        """``agent`` if it is a valid agent name (``InvalidAgentName`` if not), remembered."""
        if agent not in self._folders:
            self._folders_of(agent)
        return agent

    def _folders_of(self, agent: str) -> tuple[str, str, str]:
        """The inbox, ``tmp/`` and ``new/`` paths of ``agent``, as strings, after checking the
        name (``InvalidAgentName``); kept per name (up to ``_FOLDERS_KEPT``), so a delivery
        neither checks a known name again nor builds its paths. Only the strings are kept: every
        delivery still opens the folders by path (see above)."""
        folders = self._folders.get(agent)
        if folders is None:
            box = f"{self._base}/{check_agent_name(agent)}"
            folders = (box, f"{box}/tmp", f"{box}/new")
            if len(self._folders) < _FOLDERS_KEPT:
                self._folders[agent] = folders
        return folders

    def _stamp(self) -> tuple[int, float]:
        """The delivery time, one clock read: integer nanoseconds for the file name (strictly
        increasing per ``Maildir``, so its names sort in send order even if the wall clock steps
        back) and seconds for the envelope's ``ts``."""
        if self._system_clock:
            now_ns = time.time_ns()  # integer: a float ``now()`` has ~250 ns resolution
            ts = now_ns / 1e9
        else:
            ts = self._clock.now()
            now_ns = round(ts * 1e9)
        with self._lock:
            ns = self._last_ns = max(now_ns, self._last_ns + 1)
        return ns, ts

    def _encode(self, envelope: Envelope, dump_envelope: Callable[[Envelope], bytes]) -> bytes:
        data = dump_envelope(envelope)
        if len(data) > self.max_message_bytes:
            raise InvalidEnvelope(
                f"message of {len(data)} bytes exceeds the limit of {self.max_message_bytes} bytes",
                data[:200],
            )
        return data

    def _next_name(self, msg_id: str) -> str:
        return self._names(self._stamp()[0], msg_id)

    def _step(self, name: str) -> None:
        if self._on_step is not None:
            self._on_step(name)

    def _write_tmp(
        self, tmp_dir: str, name: str, envelope: Envelope, data: bytes
    ) -> tuple[str, str]:
        """``data`` written and fsynced in ``tmp_dir`` under ``name`` or, if that is taken, a
        fresh one; returns the file's path and name. Nothing is left behind on failure; no
        ``tmp_dir`` is ``UnknownRecipient``."""
        tmp = f"{tmp_dir}/{name}"
        try:
            fd = os.open(tmp, _CREATE, 0o600)
        except OSError:  # taken (a fresh name is tried) or no ``tmp/``
            try:
                fd, tmp, name = self._create_tmp(tmp_dir, name, envelope.id)
            except FileNotFoundError:
                raise UnknownRecipient(envelope.to, self.agents()) from None
        step = self._on_step
        try:
            try:
                written = os.write(fd, data)
                if written < len(data):  # a short write (a signal): the rest, looping
                    write_all(fd, data[written:])
                if step is not None:
                    step("tmp_written")
                self._fsync(fd)
            except OSError as exc:  # disk full, size limit
                raise WriteFailed(f"delivering to {envelope.to!r}", exc) from exc
            finally:
                os.close(fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        if step is not None:
            step("tmp_synced")
        return tmp, name

    def _create_tmp(self, tmp_dir: str, name: str, msg_id: str) -> tuple[int, str, str]:
        """Create ``tmp_dir/<name>`` exclusively, under a fresh name if that one is taken
        (``FileNotFoundError``: no ``tmp_dir``). Returns the descriptor, path and name."""
        for attempt in range(_NAME_ATTEMPTS):
            if attempt:
                log.warning(
                    "maildir name %s is taken in %s; retrying with a new one", name, tmp_dir
                )
                name = self._next_name(msg_id)
            path = f"{tmp_dir}/{name}"
            try:
                return os.open(path, _CREATE, 0o600), path, name
            except FileExistsError:
                continue
        raise _names_taken(msg_id)

    def _publish(self, tmp: str, name: str, new_dir: str, envelope: Envelope) -> None:
        """Move ``tmp`` into ``new_dir`` under its name or, if a file already has that name
        there, under a fresh one: the move never replaces a file, where a plain rename would
        silently drop the message already there. No ``new_dir`` is ``UnknownRecipient``."""
        try:
            for attempt in range(_NAME_ATTEMPTS):
                if attempt:
                    log.warning(
                        "maildir name %s is taken in %s; retrying with a new one", name, new_dir
                    )
                    name = self._next_name(envelope.id)
                if self._move_into(tmp, f"{new_dir}/{name}"):
                    return
        except FileNotFoundError:  # no ``new/``: not a (complete) inbox
            if os.path.isdir(new_dir):
                raise
            raise UnknownRecipient(envelope.to, self.agents()) from None
        raise _names_taken(envelope.id)

    @staticmethod
    def _move_into(tmp: str, target: str) -> bool:
        """Move ``tmp`` to ``target`` unless a file has that name (False, nothing changed): a
        link, which never replaces a file, then an unlink. File systems without hard links fall
        back to a rename."""
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_LINK:
                raise
            os.rename(tmp, target)
            return True
        os.unlink(tmp)
        return True

    def _sync_dir(self, path: str) -> None:
        dir_fd = os.open(path, _DIRECTORY)
        try:
            self._fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._step("dir_synced")

    # -- reading -------------------------------------------------------------------------------

    def pending(
        self, agent: str, *, max_messages: int = 50, max_bytes: int = 256_000
    ) -> list[Envelope]:
        """Unacked messages, oldest first: at most ``max_messages``, and at most ``max_bytes``
        of files unless the first message alone is larger (it is then returned alone).
        Duplicates by id are not returned (one already in ``cur`` is acked away); a file that
        is not a valid envelope is moved to ``bad/``."""
        from mailboxes.messages import parse_envelope

        folder = f"{self._base}/{check_agent_name(agent)}"
        base = f"{folder}/new"
        try:
            names = os.listdir(base)
        except (FileNotFoundError, NotADirectoryError):
            raise UnknownRecipient(agent, self.agents()) from None
        batch: list[Envelope] = []
        seen: set[str] = set()
        done: set[str] | None = None
        total = 0
        known = self._parsed.get(agent, {})
        kept: dict[str, tuple[tuple[int, ...], Envelope, int]] = {}
        for name in sorted(names):
            if len(batch) >= max_messages:
                break
            cached = known.get(name)
            identity = _identity(f"{base}/{name}") if cached is not None else None
            if cached is not None and identity == cached[0]:
                # Read before and found in no ``cur/``: a copy acked since was swept from
                # ``new/`` by that ack (``ack``), so this file is still unacked.
                _, envelope, size = kept[name] = cached
            else:
                raw, identity = self._read(f"{base}/{name}")
                if raw is None:
                    continue  # acked or quarantined meanwhile
                try:
                    envelope = _check(parse_envelope(raw), name, agent, raw)
                except BadMessage as exc:
                    self._quarantine(Path(folder), name, str(exc))
                    continue
                size = len(raw)
                if done is None:
                    done = {i for i in map(_id_of, os.listdir(f"{folder}/cur")) if i is not None}
                if envelope.id in done:
                    log.info("dropping duplicate message %s for %s", envelope.id, agent)
                    self._move(Path(folder), "new", "cur", [name])
                    continue
                if identity is not None:
                    kept[name] = (identity, envelope, size)
            if envelope.id in seen:
                continue  # a second copy: swept away by the ack of the first
            if batch and total + size > max_bytes:
                break
            batch.append(envelope)
            seen.add(envelope.id)
            total += size
        self._parsed[agent] = kept
        return batch

    def _read(self, path: str) -> tuple[bytes | None, tuple[int, ...] | None]:
        """The bytes of a regular file in ``new`` (oversize, links and others become garbage;
        None: gone) and its ``_identity`` as read (None for garbage)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EACCES):
                raise
            return b"<not a regular file>", None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return b"<not a regular file>", None
            if info.st_size > self.max_message_bytes:
                return b"<oversize file>", None
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            return b"".join(chunks), _identity_of(info)
        finally:
            os.close(fd)

    def _quarantine(self, box: Path, name: str, reason: str) -> None:
        log.warning("moving bad message %s/new/%s to bad/: %s", box, name, reason)
        (box / "bad").mkdir(exist_ok=True)
        try:
            os.rename(box / "new" / name, box / "bad" / name)
        except FileNotFoundError:
            return
        except OSError:
            # bad/ holds a directory of that name, or the like: drop the file rather than loop.
            log.exception("could not move %s to bad/; deleting it", name)
            _remove(box / "new" / name)

    def ack(self, agent: str, message_ids: Sequence[str]) -> None:
        """Move every ``new`` file of these ids (duplicates included) to ``cur``, durably.
        Unknown or already-acked ids are ignored."""
        box = self._require(agent)
        wanted = set(message_ids)
        if not wanted:
            return
        names = [n for n in os.listdir(box / "new") if _id_of(n) in wanted]
        self._move(box, "new", "cur", names)

    def _move(self, box: Path, src: str, dst: str, names: Iterable[str]) -> None:
        moved = False
        for name in names:
            try:
                os.rename(box / src / name, box / dst / name)
                moved = True
            except FileNotFoundError:
                continue
        if moved:
            fsync_dir(box / dst, self._fsync)
            fsync_dir(box / src, self._fsync)

    # -- housekeeping --------------------------------------------------------------------------

    def holds(self, agent: str, message_id: str) -> bool:
        """Whether ``agent``'s ``new`` or ``cur`` has a message with this id (keyed re-delivery)."""
        box = self._require(agent)
        return any(_id_of(n) == message_id for sub in ("new", "cur") for n in os.listdir(box / sub))

    def history(self, agent: str) -> list[Envelope]:
        """Every message in ``new`` and ``cur`` (``MailArchive``), oldest first by file name;
        a file that is not a valid envelope is ``BadMessage``."""
        from mailboxes.messages import parse_envelope

        box = self._require(agent)
        names = [(n, sub) for sub in ("new", "cur") for n in os.listdir(box / sub)]
        found = []
        for name, sub in sorted(names):
            for folder in dict.fromkeys((sub, "cur")):  # acked (moved to cur) meanwhile
                try:
                    found.append(parse_envelope((box / folder / name).read_bytes()))
                    break
                except FileNotFoundError:
                    continue
        return found

    def unread(self, agent: str) -> int:
        """How many messages wait in ``new`` (not acked yet)."""
        return len(os.listdir(self._require(agent) / "new"))

    def has_unread(self, agent: str) -> bool:
        """Whether ``new`` holds anything (one listdir, no parsing); False without an inbox."""
        try:
            return bool(os.listdir(self.inbox(agent) / "new"))
        except FileNotFoundError:
            return False

    def counts(self, agent: str) -> tuple[int, int]:
        """(messages in ``new``, messages in ``cur``)."""
        box = self._require(agent)
        return len(os.listdir(box / "new")), len(os.listdir(box / "cur"))

    def prune(
        self, agent: str, *, max_age_s: float | None = None, max_count: int | None = None
    ) -> int:
        """Delete acked messages older than ``max_age_s`` (by delivery time), then the oldest
        beyond ``max_count``. Only ``cur`` is pruned, never ``new``. Returns how many went."""
        box = self._require(agent)
        cur = box / "cur"
        names = sorted(n for n in os.listdir(cur) if _NAME.fullmatch(n))
        doomed: list[str] = []
        if max_age_s is not None:
            cutoff = int((self._clock.now() - max_age_s) * 1e9)
            doomed = [n for n in names if int(n[:20]) < cutoff]
        keep = names[len(doomed) :]
        if max_count is not None and len(keep) > max_count:
            doomed += keep[: len(keep) - max_count]
        for name in doomed:
            _remove(cur / name)
        if doomed:
            fsync_dir(cur, self._fsync)
        return len(doomed)

    def recover(self, *, older_than_s: float = 60.0) -> int:
        """Remove ``tmp`` files left by senders that died mid-delivery (none of them was
        acknowledged). Files younger than ``older_than_s`` may belong to a live sender and are
        kept; ``0`` removes all. Returns how many were removed."""
        removed = 0
        now = self._clock.now()
        for agent in self.agents():
            tmp_dir = self.root / agent / "tmp"
            for name in os.listdir(tmp_dir):
                path = tmp_dir / name
                try:
                    if older_than_s > 0 and now - path.lstat().st_mtime < older_than_s:
                        continue
                    _remove(path)
                    removed += 1
                except FileNotFoundError:
                    continue
        return removed

    def close(self) -> None:
        """Nothing to release (the ``Mailbox`` port's ``close``)."""


def _is_agent_name(name: str) -> bool:
    try:
        check_agent_name(name)
    except ValueError:
        return False
    return True


def _identity(path: str) -> tuple[int, ...] | None:
    """What tells a file in ``new/`` from any other under the same name: its inode, size and
    change times (a file written again or swapped in changes its ctime); None for anything but
    a regular file, or a file gone."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return _identity_of(info) if stat.S_ISREG(info.st_mode) else None


def _identity_of(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _check(envelope: Envelope, name: str, agent: str, raw: bytes) -> Envelope:
    """A stored envelope must match its file name and inbox."""
    if _id_of(name) != envelope.id:
        raise InvalidEnvelope(f"file name {name!r} does not match id {envelope.id!r}", raw)
    if envelope.to != agent:
        raise InvalidEnvelope(f"addressed to {envelope.to!r}, found in {agent!r}'s inbox", raw)
    return envelope


def _names_taken(msg_id: str) -> WriteFailed:
    taken = FileExistsError(errno.EEXIST, f"{_NAME_ATTEMPTS} file names in a row were taken")
    return WriteFailed(f"delivering {msg_id!r}", taken)


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            for child in path.iterdir():
                _remove(child)
            path.rmdir()
        else:
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        return
