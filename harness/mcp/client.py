"""``McpManager``: one client session per MCP server, shared by every agent of a runtime.

The ``mcp`` SDK is async; the manager owns one background event-loop thread and each server gets
one long-lived task there that enters the transport and the ``ClientSession`` (anyio contexts must
be left by the task that entered them) and holds them until the server is stopped. Callers on any
thread use the sync methods, which submit coroutines to that loop and wait with a bound.

Lifecycle of a server: nothing starts until first use (``connect``, ``tools``, a call); the start
(spawn or HTTP connect, ``initialize``, the first ``tools/list``) must finish within
``init_timeout_s``. A server whose connection closes during a call (it crashed) fails that call
with ``McpServerCrashed`` and is restarted on the next use; a failed start is retried the same
way; after ``max_restarts`` restarts the server stays failed. ``close`` stops every server (the SDK
closes stdin, then terminates and kills the process group) and the loop thread.

A configured entry that is not a valid server (``McpConfig.invalid``) is ``failed`` from the start,
with its reason; ``from_config`` logs one warning line per such entry and per ignored key.

Environment of a stdio server: what Claude Code gives one, this process's environment and the
entry's ``env`` (``${VAR}`` expanded), plus ``CLAUDE_PROJECT_DIR`` (the root), minus the model
credentials and the settings' secrets (``harness.shell.environment``; a server's own ``env`` may
pass one on explicitly, e.g. ``"GITHUB_TOKEN": "${GITHUB_TOKEN}"``). Server logs are mode 0600.

``import mcp`` is slow, so it happens only inside the loop thread, when a server is first used;
the functions at the end of this module (transports, paged listings, error classification) are
the only ones that touch the SDK, and run there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar

from harness.mcp.config import (
    McpConfigError,
    McpError,
    McpOptions,
    McpServerConfig,
    load_mcp_config,
)
from harness.shell.environment import CommandEnv

__all__ = [
    "McpCallError",
    "McpManager",
    "McpResourceInfo",
    "McpServerCrashed",
    "McpTimeout",
    "McpToolInfo",
    "ServerStatus",
]

State = Literal["idle", "starting", "ready", "crashed", "failed", "stopped"]


class McpServerCrashed(McpError):
    """The server's connection closed under a call (it will be restarted on next use)."""


class McpTimeout(McpError):
    """A start or a call took longer than its timeout."""


class McpCallError(McpError):
    """The server answered a request with a protocol error."""


@dataclass(frozen=True)
class McpToolInfo:
    """A tool as a server lists it (``annotations`` are the server's unverified hints)."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] = field(default_factory=dict)
    title: str | None = None


@dataclass(frozen=True)
class McpResourceInfo:
    """A resource as a server lists it."""

    server: str
    uri: str
    name: str
    description: str = ""
    mime_type: str | None = None


@dataclass(frozen=True)
class ServerStatus:
    """What ``teamctl mcp list`` shows for one server."""

    name: str
    transport: str
    state: State
    error: str | None
    restarts: int
    tools: tuple[McpToolInfo, ...]
    server_name: str | None = None
    server_version: str | None = None


log = logging.getLogger(__name__)

T = TypeVar("T")
_SLACK_S = 5.0
"""Extra seconds the caller waits beyond the SDK's own timeout before giving up itself."""


@dataclass
class _Conn:
    name: str
    config: McpServerConfig | None  # None: an invalid entry, failed for good
    lock: threading.Lock = field(default_factory=threading.Lock)
    state: State = "idle"
    error: str | None = None
    restarts: int = 0
    session: Any = None
    tools: tuple[McpToolInfo, ...] = ()
    server_name: str | None = None
    server_version: str | None = None
    stop: asyncio.Event | None = None
    holder: concurrent.futures.Future[None] | None = None
    log_path: Path | None = None
    log_start: int = 0


class McpManager:
    """The MCP servers of one runtime (thread-safe; call ``close`` once at shutdown)."""

    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        *,
        root: Path,
        options: McpOptions | None = None,
        environ: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        invalid: Mapping[str, str] | None = None,
        command_env: CommandEnv | None = None,
    ) -> None:
        """``environ``: where ``${VAR}`` is looked up (default: this process's environment with
        the settings' ``env`` on top); ``invalid``: disabled entries, name → why;
        ``command_env``: the environment policy of stdio servers (default: no credentials)."""
        self.root = root
        self.options = options or McpOptions()
        self.command_env = command_env or CommandEnv()
        self.environ = environ
        self.log_dir = log_dir
        conns = {name: _Conn(name, cfg) for name, cfg in servers.items()}
        for name, why in (invalid or {}).items():
            conns[name] = _Conn(name, None, state="failed", error=why)
        self._conns = dict(sorted(conns.items()))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()
        self._closed = False

    @classmethod
    def from_config(
        cls,
        root: Path,
        settings_servers: Mapping[str, Any] | None = None,
        *,
        options: McpOptions | None = None,
        command_env: CommandEnv | None = None,
    ) -> McpManager:
        """The servers of ``<root>/.mcp.json`` and the settings' ``mcpServers``, with server
        stderr logged to ``<root>/.team/mcp/<name>.log``. A bad entry disables that server (one
        warning line); ``McpConfigError`` only for a file that is not JSON."""
        config = load_mcp_config(root, settings_servers)
        for line in (*config.warnings, *config.invalid.values()):
            log.warning("%s", line)
        return cls(
            config.servers,
            root=root,
            options=options,
            log_dir=root / ".team" / "mcp",
            invalid=config.invalid,
            command_env=command_env,
        )

    # -- public, sync ------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Configured server names, sorted."""
        return list(self._conns)

    def connect(self, name: str) -> ServerStatus:
        """Start ``name`` now if it is not running (``connect_mcp``); raises ``McpError``."""
        self._ready(name)
        return self.status(name)

    def tools(self, name: str) -> tuple[McpToolInfo, ...]:
        """The tools ``name`` listed when it started (starts it if needed)."""
        return self._ready(name).tools

    def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], *, timeout_s: float | None = None
    ) -> Any:
        """Call ``tool`` and return the SDK's ``CallToolResult`` (``McpError`` on failure)."""
        conn = self._ready(server)
        timeout = timeout_s or self.options.call_timeout_s
        coro = conn.session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        return self._request(conn, coro, timeout, f"tool {tool!r}")

    def list_resources(self, server: str) -> tuple[McpResourceInfo, ...]:
        """Every resource ``server`` lists (all pages)."""
        conn = self._ready(server)
        timeout = self.options.call_timeout_s
        found: tuple[McpResourceInfo, ...] = self._request(
            conn, _list_resources(conn.session, server), timeout, "resources/list"
        )
        return found

    def read_resource(self, server: str, uri: str) -> Any:
        """Read ``uri`` from ``server``; returns the SDK's ``ReadResourceResult``."""
        conn = self._ready(server)
        timeout = self.options.call_timeout_s
        return self._request(conn, conn.session.read_resource(uri), timeout, f"resource {uri!r}")

    def status(self, name: str | None = None) -> ServerStatus:
        """The state of ``name`` (without starting it)."""
        if name is None or name not in self._conns:
            raise McpError(self._unknown(name or ""))
        c = self._conns[name]
        return ServerStatus(
            name=c.name,
            transport=c.config.type if c.config is not None else "invalid",
            state=c.state,
            error=c.error,
            restarts=c.restarts,
            tools=c.tools,
            server_name=c.server_name,
            server_version=c.server_version,
        )

    def statuses(self) -> list[ServerStatus]:
        """Every server's state, sorted by name."""
        return [self.status(n) for n in self._conns]

    def close(self) -> None:
        """Stop every server and the loop thread (idempotent; later calls fail clearly)."""
        with self._guard:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        holders = []
        for conn in self._conns.values():
            with conn.lock:
                holders.append(self._signal_stop(conn))
                conn.state = "stopped"
        for holder in holders:
            if holder is not None:
                with contextlib.suppress(Exception):
                    holder.result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()

    def __enter__(self) -> McpManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- starting and stopping ---------------------------------------------------------------

    def _unknown(self, name: str) -> str:
        known = ", ".join(self._conns) or "(none configured)"
        return f"unknown MCP server {name!r}; configured: {known}"

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._guard:
            if self._closed:
                raise McpError("the MCP manager is shut down")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="mcp-loop", daemon=True)
                self._thread.start()
                started.wait(timeout=10)
                self._loop = loop
            return self._loop

    def _ready(self, name: str) -> _Conn:
        conn = self._conns.get(name)
        if conn is None:
            raise McpError(self._unknown(name))
        with conn.lock:
            if conn.state == "ready":
                return conn
            if self._closed or conn.state == "stopped":
                raise McpError(f"MCP server {name!r}: the runtime is shutting down")
            if conn.state == "failed":
                raise McpError(f"MCP server {name!r} is unavailable: {conn.error}")
            if conn.state == "crashed":
                if conn.restarts >= self.options.max_restarts:
                    conn.state = "failed"
                    conn.error = (
                        f"{conn.error}; gave up after {conn.restarts} restart(s) "
                        f"(max_restarts={self.options.max_restarts})"
                    )
                    raise McpError(f"MCP server {name!r} is unavailable: {conn.error}")
                conn.restarts += 1
                holder = self._signal_stop(conn)
                if holder is not None:
                    with contextlib.suppress(Exception):
                        holder.result(timeout=30)
            self._start(conn)
            return conn

    def _start(self, conn: _Conn) -> None:
        """Start ``conn`` and wait for its handshake (caller holds ``conn.lock``)."""
        assert conn.config is not None  # invalid entries are failed and never started
        environ = self.environ
        if environ is None:
            environ = {**os.environ, **self.command_env.env}
        try:
            config = conn.config.expanded(conn.name, environ)
        except McpConfigError as exc:
            conn.state, conn.error = "failed", str(exc)
            raise
        loop = self._ensure_loop()
        conn.state, conn.error = "starting", None
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        errlog = self._open_errlog(conn)
        conn.holder = asyncio.run_coroutine_threadsafe(
            self._hold(conn, config, errlog, ready), loop
        )
        timeout = self.options.init_timeout_s
        try:
            ready.result(timeout=timeout + _SLACK_S)
        except BaseException as exc:
            holder = self._signal_stop(conn)
            if holder is not None:
                with contextlib.suppress(Exception):
                    holder.result(timeout=30)
            conn.state = "crashed"  # a failed start is retried on next use, like a crash
            cause = _leaf(exc)
            conn.error = _start_error(cause, timeout) + _log_tail(conn)
            raise (McpTimeout if _is_timeout(cause) else McpError)(
                f"MCP server {conn.name!r} did not start: {conn.error}"
            ) from exc
        conn.state = "ready"

    def _signal_stop(self, conn: _Conn) -> concurrent.futures.Future[None] | None:
        holder, stop, loop = conn.holder, conn.stop, self._loop
        conn.holder = conn.stop = None
        conn.session = None
        if holder is not None and not holder.done() and loop is not None and stop is not None:
            loop.call_soon_threadsafe(stop.set)
        elif holder is not None and not holder.done() and loop is not None:
            loop.call_soon_threadsafe(holder.cancel)
        return holder

    def _open_errlog(self, conn: _Conn) -> TextIO:
        """The server's stderr: ``<log_dir>/<name>.log`` (appended), else the null device."""
        if self.log_dir is not None:
            try:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                conn.log_path = self.log_dir / f"{conn.name}.log"
                flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
                errlog = os.fdopen(os.open(conn.log_path, flags, 0o600), "a", encoding="utf-8")
                try:
                    os.fchmod(errlog.fileno(), 0o600)  # a log an older version left readable
                except OSError:
                    errlog.close()
                    raise
                conn.log_start = errlog.seek(0, os.SEEK_END)
                return errlog
            except OSError:
                log.warning("cannot open the MCP log for %s", conn.name, exc_info=True)
        conn.log_path = None
        return open(os.devnull, "w", encoding="utf-8")

    async def _hold(
        self,
        conn: _Conn,
        config: McpServerConfig,
        errlog: TextIO,
        ready: concurrent.futures.Future[None],
    ) -> None:
        """Enter transport + session, handshake, list tools, then hold them until stopped."""
        import anyio
        from mcp import ClientSession

        conn.stop = stop = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = _transport(self.root, config, errlog, self.command_env)
                read, write = await stack.enter_async_context(transport)
                session = await stack.enter_async_context(ClientSession(read, write))
                with anyio.fail_after(self.options.init_timeout_s):
                    init = await session.initialize()
                    tools = await _list_tools(session, conn.name)
                conn.session, conn.tools = session, tools
                info = getattr(init, "server_info", None)
                conn.server_name = getattr(info, "name", None)
                conn.server_version = getattr(info, "version", None)
                ready.set_result(None)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP server %s ended with an error", conn.name, exc_info=True)
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            with contextlib.suppress(OSError):
                errlog.close()

    # -- requests ----------------------------------------------------------------------------

    def _request(self, conn: _Conn, coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
        loop = self._ensure_loop()
        session = conn.session
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return fut.result(timeout=timeout + _SLACK_S)
        except concurrent.futures.TimeoutError as exc:
            fut.cancel()
            raise McpTimeout(
                f"MCP server {conn.name!r}: {what} did not finish within {timeout:g}s"
            ) from exc
        except McpError:
            raise
        except Exception as exc:
            raise self._classify(conn, session, _leaf(exc), timeout, what) from exc

    def _classify(
        self, conn: _Conn, session: Any, exc: BaseException, timeout: float, what: str
    ) -> McpError:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        if isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT:
            return McpTimeout(
                f"MCP server {conn.name!r}: {what} did not answer within {timeout:g}s"
            )
        closed = isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED
        if closed or _is_broken_stream(exc):
            with conn.lock:
                if conn.state == "ready" and conn.session is session:  # not a newer session
                    conn.state = "crashed"
                    conn.error = f"the server stopped during {what}{_log_tail(conn)}"
            return McpServerCrashed(
                f"MCP server {conn.name!r} stopped during {what}{_log_tail(conn)}; "
                "it will be restarted on next use"
            )
        if isinstance(exc, MCPError):
            return McpCallError(f"MCP server {conn.name!r} refused {what}: {exc.message}")
        return McpCallError(f"MCP server {conn.name!r}: {what} failed: {type(exc).__name__}: {exc}")


def _log_tail(conn: _Conn) -> str:
    return _read_log_tail(conn.log_path, conn.log_start)


# --- the SDK side: transports, paged listings, errors (run on the loop thread) ---------------


def _transport(root: Path, config: McpServerConfig, errlog: TextIO, command_env: CommandEnv) -> Any:
    if config.type == "stdio":
        from mcp import StdioServerParameters, stdio_client

        cwd = root / config.cwd if config.cwd else root
        # The SDK adds its few defaults (PATH, HOME, SHELL, TERM, USER, LOGNAME) under these.
        env = command_env.environment(extra={"CLAUDE_PROJECT_DIR": str(root), **config.env})
        params = StdioServerParameters(
            command=config.command or "", args=list(config.args), env=env, cwd=cwd
        )
        return stdio_client(params, errlog=errlog)
    if config.type == "sse":
        from mcp.client.sse import sse_client

        return sse_client(config.url or "", headers=config.headers or None)
    return _http_transport(config)


def _http_transport(config: McpServerConfig) -> Any:
    @contextlib.asynccontextmanager
    async def streams() -> Any:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with (
            create_mcp_http_client(headers=config.headers or None) as client,
            streamable_http_client(config.url or "", http_client=client) as streams,
        ):
            yield streams

    return streams()


async def _list_tools(session: Any, server: str) -> tuple[McpToolInfo, ...]:
    from mcp_types import PaginatedRequestParams

    tools: list[McpToolInfo] = []
    cursor: str | None = None
    for _ in range(1000):  # a server whose cursor never ends cannot hang the start
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        for t in page.tools:
            ann = (
                t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else {}
            )
            title = t.title or (t.annotations.title if t.annotations else None)
            tools.append(
                McpToolInfo(server, t.name, t.description or "", dict(t.input_schema), ann, title)
            )
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(sorted(tools, key=lambda t: t.name))


async def _list_resources(session: Any, server: str) -> tuple[McpResourceInfo, ...]:
    from mcp_types import PaginatedRequestParams

    found: list[McpResourceInfo] = []
    cursor: str | None = None
    for _ in range(1000):
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_resources(params=params)
        for r in page.resources:
            found.append(
                McpResourceInfo(server, str(r.uri), r.name, r.description or "", r.mime_type)
            )
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(found)


def _leaf(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (task groups wrap what really happened)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError | concurrent.futures.TimeoutError)


def _is_broken_stream(exc: BaseException) -> bool:
    import anyio

    return isinstance(
        exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream
    )


def _read_log_tail(path: Path | None, start: int, lines: int = 5) -> str:
    """The last ``lines`` lines a server wrote to its log since ``start`` (``""`` if none)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(max(start, f.seek(0, os.SEEK_END) - 4096))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    tail = [line.strip() for line in text.splitlines()[-lines:] if line.strip()]
    return f" (server log {path}: {' | '.join(tail)})" if tail else ""


def _start_error(exc: BaseException, timeout: float) -> str:
    """Why a server did not start, in one line."""
    if _is_timeout(exc):
        return f"no answer to the MCP handshake within {timeout:g}s"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
