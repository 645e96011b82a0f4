"""The team's commit service: the runtime processes of one host share their board commits
(docs/ARCHITECTURE.md, "One commit queue per host").

``SharedCommits`` gathers the writes of one process's threads into one journal commit. Between
processes, the journal's lock alone orders the writers: with sixteen processes on two cores, each
of them reads and folds every event of the others, and most of the machine went to handing the
lock from one to the next. Here the first runtime of a team on a host (``teamctl run``, or the
first ``teamctl join``) holds the team's service address (``ServiceHandOff``); the other runtime
processes of the host send their claims, completions and status changes there, and one commit
carries the writes of every process that asked meanwhile. When the first of them connects, the
holder hands the socket to a process of its own (``actors.runtime.commit_host``), which serves it
with a ``SharedCommits`` of its own board (``CommitServer``): a busy lead's thread then never
holds up another process's claim. Nothing else changes: each write is decided under the journal
lock against the caught-up state (the server's board) and answered only once its commit is
durable. Writers outside the service (the runtime holding it, ``teamctl task …`` commands, a
runtime on another host) still take the journal lock and stay correct.

The socket is in Linux's abstract namespace (no file to go stale, no path-length limit), named
after the team folder and the journal file's identity. Both ends check the peer's user id
(``SO_PEERCRED``): anyone on the host can reach an abstract socket, so a process of another user
is never served, and a client never trusts a server run by someone else.

A client that cannot reach the service commits locally, as before (``ServiceUnavailable``). One
whose request was sent but not answered (the serving process died, or did not answer within
``ANSWER_TIMEOUT_S``: then the client closes its connection, and the service, if it comes back,
skips a request whose client is gone) cannot know whether it was committed: it decides again
locally, and each write recognises its own earlier commit by the
fencing it already has (``actors.runtime.commits``: a claim its owner holds, a completion with
its owner and epoch, a status already set), so no write is carried out twice.

Wire format: each message is a 4-byte big-endian length and a JSON object. A request is
``{"writes": [spec, ...]}`` (specs: ``actors.runtime.commits``); the answer is ``{"seq": N,
"answers": [...]}`` in the same order (``seq``: the journal's last seq after the commit), each
answer ``{"ok": value}``, or ``{"error": "message"}`` for a write that was refused or whose
commit failed (nothing of it written): the client then decides that write again itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import selectors
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "ANSWER_TIMEOUT_S",
    "COMMIT_SERVICE_LOG",
    "MAX_MESSAGE_BYTES",
    "MAX_RESTARTS",
    "AnswerLost",
    "CommitClient",
    "CommitServer",
    "ServiceHandOff",
    "ServiceUnavailable",
    "service_address",
]

log = logging.getLogger(__name__)

COMMIT_SERVICE_LOG = "commit-service.log"
"""Under ``.team/``: the stderr of the process serving the commit service (``ServiceHandOff``)."""
MAX_MESSAGE_BYTES = 4 << 20
"""The largest request or answer either end accepts (a commit's specs are a few hundred bytes)."""
ANSWER_TIMEOUT_S = 30.0
"""How long a client waits for an answer before it decides its writes itself (the serving
process is stopped or stuck; its commit takes milliseconds)."""
MAX_RESTARTS = 3
"""How many times a service process that exited by itself is started again (at the next
connection) before its runtime gives up and every process commits its own writes."""
SEND_TIMEOUT_S = 5.0
"""How long the service waits for a client to take its answer before dropping it."""
_HEADER = struct.Struct("!I")
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid

Serve = Callable[[Sequence[Mapping[str, Any]]], Mapping[str, Any]]
"""Commits one request's write specs (with any others waiting) and returns its answer."""


class ServiceUnavailable(Exception):
    """No service to send to (none runs, or it is not ours): nothing was sent."""


class AnswerLost(Exception):
    """The request was sent, and the service went away before answering: it may or may not have
    been committed."""


def service_address(journal: Path) -> bytes:
    """The abstract socket name of the team whose journal file is ``journal``: the file's real
    path, device and inode, so a team made again at the same path is another team. Raises
    ``OSError`` when the journal does not exist."""
    info = os.stat(journal)
    key = f"{os.path.realpath(journal)}\0{info.st_dev}\0{info.st_ino}".encode()
    return b"\0teamctl-commits-" + hashlib.sha256(key).hexdigest()[:40].encode()


def _bind(address: bytes) -> socket.socket | None:
    """A socket listening on ``address``; None when another process of the host has it."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        listener.bind(address)
    except OSError:  # EADDRINUSE: another process serves this team on this host
        listener.close()
        return None
    listener.listen(128)
    return listener


def _still_there(conn: socket.socket) -> bool:
    """Whether the client at ``conn`` still waits (it has not closed its end)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except (BlockingIOError, InterruptedError):
        return True  # nothing more to read, and open
    except OSError:
        return False


def _peer_uid(sock: socket.socket) -> int:
    return int(_CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[1])


def _frame(message: Mapping[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


def _take(buffer: bytearray) -> Any | None:
    """The next whole message in ``buffer`` (removed from it), or None; ValueError if bad."""
    if len(buffer) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack_from(buffer)
    if size > MAX_MESSAGE_BYTES:
        raise ValueError(f"a message of {size} bytes is over the limit")
    if len(buffer) < _HEADER.size + size:
        return None
    body = bytes(buffer[_HEADER.size : _HEADER.size + size])
    del buffer[: _HEADER.size + size]
    return json.loads(body)


class CommitServer:
    """Serves ``serve`` on the team's abstract socket from one thread; ``start`` returns False
    when another process of the host serves the team already."""

    def __init__(
        self, address: bytes, serve: Serve, *, listener: socket.socket | None = None
    ) -> None:
        self.address = address
        self._serve = serve
        self._given = listener
        """A socket already bound to ``address`` and listening (``ServiceHandOff``'s)."""
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self.requests = 0
        """Requests answered (for tests and diagnostics)."""
        self.commits = 0
        """Rounds of commits made for them: fewer than ``requests`` when processes met."""

    def start(self) -> bool:
        listener = self._given or _bind(self.address)
        if listener is None:
            return False
        listener.setblocking(False)
        self._listener = listener
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread = threading.Thread(
            target=self._run, name="teamctl-commit-service", daemon=True
        )
        self._thread.start()
        return True

    def stop(self) -> None:
        """Stop serving: clients connected now see the connection close and commit locally."""
        if self._thread is None:
            return
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=10)
        self._thread = None
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _run(self) -> None:
        assert self._listener is not None
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, None)
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        buffers: dict[socket.socket, bytearray] = {}
        try:
            while True:
                waiting: list[tuple[socket.socket, Any]] = []
                for key, _mask in sel.select():
                    if key.fileobj is self._listener:
                        self._accept(sel, buffers)
                    elif key.fileobj == self._wake_r:
                        return
                    else:
                        conn = key.fileobj
                        assert isinstance(conn, socket.socket)
                        waiting += self._read(sel, buffers, conn)
                if waiting:
                    self._answer(waiting, sel, buffers)
        except Exception:  # the service ends; its clients commit locally from now on
            log.exception("the commit service stopped")
        finally:
            for conn in list(buffers):
                conn.close()
            sel.close()
            self._listener.close()

    def _accept(self, sel: selectors.BaseSelector, buffers: dict[socket.socket, bytearray]) -> None:
        assert self._listener is not None
        try:
            conn, _ = self._listener.accept()
        except BlockingIOError:
            return
        if _peer_uid(conn) != os.getuid():
            log.warning("commit service: refused a connection from another user")
            conn.close()
            return
        conn.setblocking(False)
        buffers[conn] = bytearray()
        sel.register(conn, selectors.EVENT_READ, None)

    def _read(
        self,
        sel: selectors.BaseSelector,
        buffers: dict[socket.socket, bytearray],
        conn: socket.socket,
    ) -> list[tuple[socket.socket, Any]]:
        try:
            data = conn.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        if not data:
            self._drop(sel, buffers, conn)
            return []
        buffer = buffers[conn]
        buffer += data
        found = []
        try:
            while (message := _take(buffer)) is not None:
                found.append((conn, message))
        except ValueError as exc:
            log.warning("commit service: dropped a client that sent a bad message: %s", exc)
            self._drop(sel, buffers, conn)
            return []
        return found

    @staticmethod
    def _drop(
        sel: selectors.BaseSelector, buffers: dict[socket.socket, bytearray], conn: socket.socket
    ) -> None:
        sel.unregister(conn)
        buffers.pop(conn, None)
        conn.close()

    def _answer(
        self,
        waiting: list[tuple[socket.socket, Any]],
        sel: selectors.BaseSelector,
        buffers: dict[socket.socket, bytearray],
    ) -> None:
        """Commit every request read in this round together, then answer each."""
        # A client that gave up waiting (``ANSWER_TIMEOUT_S``: this process was stopped, say)
        # closed its connection and decided its writes itself: they are not made here as well.
        waiting = [(conn, message) for conn, message in waiting if _still_there(conn)]
        if not waiting:
            return
        specs: list[Mapping[str, Any]] = []
        spans: list[tuple[int, int]] = []
        for _conn, message in waiting:
            writes = message.get("writes") if isinstance(message, dict) else None
            if not isinstance(writes, list) or not all(isinstance(w, dict) for w in writes):
                writes = []  # answered with no answers: the client reports a bad request
            spans.append((len(specs), len(writes)))
            specs += writes
        result = self._serve(specs)
        self.commits += 1
        for (conn, _message), (start, count) in zip(waiting, spans, strict=True):
            answer = {"seq": result["seq"], "answers": result["answers"][start : start + count]}
            self.requests += 1
            try:
                conn.settimeout(SEND_TIMEOUT_S)  # a client that does not read is dropped
                conn.sendall(_frame(answer))
                conn.setblocking(False)
            except OSError:
                if conn in buffers:
                    self._drop(sel, buffers, conn)


class ServiceHandOff:
    """Holds the team's service address for this process and, when the first client connects,
    hands the listening socket to a process of its own that serves it (``command``, with the
    socket's descriptor number appended: ``actors.runtime.commit_host``). That process shares no
    GIL with this one's lead and members, so a busy lead does not slow the other processes'
    claims; this process keeps committing its own writes itself. A team that no other process
    joins never starts it. If it cannot be started, this process serves, as ``CommitServer``.

    The child's standard input is a pipe from here: it stops serving when the pipe closes, that
    is when ``stop`` is called or this process dies, even by SIGKILL. It runs in a session of its
    own, so a Ctrl-C meant for the terminal's program does not stop it; its stderr goes to
    ``log_path``. If it exits by itself, this process takes the address back and starts another
    at the next connection, up to ``MAX_RESTARTS`` times."""

    def __init__(
        self, address: bytes, command: Sequence[str], *, log_path: Path, fallback: Serve
    ) -> None:
        self.address = address
        self._command = list(command)
        self._log_path = log_path
        self._fallback = fallback
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self.child: subprocess.Popen[bytes] | None = None
        """The serving process, once a client came."""
        self.in_process: CommitServer | None = None
        """The service served from this process, when the child could not be started."""
        self.starts = 0
        """Processes started to serve (one, unless one exited by itself: see ``MAX_RESTARTS``)."""

    @classmethod
    def for_team(cls, address: bytes, repo_root: Path, *, fallback: Serve) -> ServiceHandOff:
        """The hand-off of the team at ``repo_root``: ``actors.runtime.commit_host`` run by this
        interpreter, its stderr in ``.team/commit-service.log``."""
        command = [sys.executable, "-m", "actors.runtime.commit_host", str(repo_root)]
        log_path = repo_root / ".team" / COMMIT_SERVICE_LOG
        return cls(address, command, log_path=log_path, fallback=fallback)

    def start(self) -> bool:
        """Take the address; False when another process of the host serves the team already."""
        listener = _bind(self.address)
        if listener is None:
            return False
        self._listener = listener
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread = threading.Thread(
            target=self._hand_off, name="teamctl-commit-hand-off", daemon=True
        )
        self._thread.start()
        return True

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop serving (this process's thread, or the child: asked by closing its input,
        killed if it has not ended within ``timeout_s``)."""
        if self._thread is None:
            return
        os.write(self._wake_w, b"x")
        self._thread.join()
        self._thread = None
        os.close(self._wake_r)
        os.close(self._wake_w)
        if self.in_process is not None:
            self.in_process.stop()
        child = self.child
        if child is not None:
            assert child.stdin is not None
            child.stdin.close()
            try:
                child.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("commit service: process %d did not stop; killed", child.pid)
                child.kill()
                child.wait()

    def _hand_off(self) -> None:
        listener: socket.socket | None = self._listener
        while listener is not None:
            if not self._until_ready(listener):  # stopped before anyone came
                listener.close()
                return
            try:
                child = self._spawn(listener)
            except OSError as exc:
                log.warning("commit service: no process of its own (%s); served from here", exc)
                self.in_process = CommitServer(self.address, self._fallback, listener=listener)
                self.in_process.start()
                return
            self.child = child
            self.starts += 1
            listener.close()  # the child has it now
            if not self._until_exit(child):
                return  # stopping: ``stop`` ends the child
            if self.starts > MAX_RESTARTS:
                log.warning(
                    "commit service: its process exited (status %s) %d times; not started "
                    "again (each process commits its own writes)",
                    child.returncode,
                    self.starts,
                )
                return
            log.warning(
                "commit service: its process exited (status %s); started again at the next "
                "connection",
                child.returncode,
            )
            listener = _bind(self.address)  # None: another process has the address now

    def _until_ready(self, listener: socket.socket) -> bool:
        """Wait for a client at ``listener``; False if ``stop`` came first."""
        return self._until(listener.fileno())

    def _until_exit(self, child: subprocess.Popen[bytes]) -> bool:
        """Wait for ``child`` to exit by itself (True, reaped) or for ``stop`` (False)."""
        pidfd = os.pidfd_open(child.pid)
        try:
            if not self._until(pidfd):
                return False
        finally:
            os.close(pidfd)
        child.wait()
        return True

    def _until(self, fd: int) -> bool:
        """Wait until ``fd`` is readable (True) or ``stop`` is called (False, first if both)."""
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ, None)
            sel.register(self._wake_r, selectors.EVENT_READ, None)
            ready = [key.fileobj for key, _mask in sel.select()]
        return self._wake_r not in ready

    def _spawn(self, listener: socket.socket) -> subprocess.Popen[bytes]:
        fd = listener.fileno()
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        log_fd = os.open(self._log_path, flags, 0o600)
        try:
            return subprocess.Popen(
                [*self._command, str(fd)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=log_fd,
                pass_fds=(fd,),
                start_new_session=True,
            )
        finally:
            os.close(log_fd)


class CommitClient:
    """One process's connection to the team's service, made on first use and again after the
    service went away. ``call`` raises ``ServiceUnavailable`` (nothing sent) or ``AnswerLost``."""

    def __init__(self, address: bytes, *, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._buffer = bytearray()
        self.answered = 0
        """Answers received (for tests and diagnostics)."""

    def call(self, specs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
        with self._lock:
            sock = self._connected()
            try:
                sock.sendall(_frame({"writes": list(specs)}))
            except OSError:
                self.close()  # a service that went away since the last call: nothing sent
                raise ServiceUnavailable("the commit service closed the connection") from None
            try:
                sock.settimeout(self.timeout_s)
                while (answer := _take(self._buffer)) is None:
                    data = sock.recv(1 << 16)
                    if not data:
                        raise AnswerLost("the commit service went away before answering")
                    self._buffer += data
                if not isinstance(answer, dict):
                    raise AnswerLost("the commit service answered something not an object")
            except (OSError, ValueError) as exc:
                self.close()
                raise AnswerLost(f"no answer from the commit service: {exc}") from None
            except AnswerLost:
                self.close()
                raise
            self.answered += 1
            return answer

    def _connected(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.connect(self.address)
            if _peer_uid(sock) != os.getuid():
                raise ServiceUnavailable("the commit service runs as another user; not used")
        except OSError as exc:
            sock.close()
            raise ServiceUnavailable(f"no commit service: {exc.strerror or exc}") from None
        except ServiceUnavailable:
            sock.close()
            raise
        self._sock, self._buffer = sock, bytearray()
        return sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buffer = bytearray()
