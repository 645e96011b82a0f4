"""The SDK-facing pieces of the MCP client: values, errors, transports, paged listings.

Everything that touches ``mcp`` imports it inside the function (``import mcp`` is slow); these
functions run on the manager's event-loop thread (``harness.mcp.client``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from harness.mcp.config import McpError, McpServerConfig

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


def transport(root: Path, config: McpServerConfig, errlog: TextIO) -> Any:
    if config.type == "stdio":
        from mcp import StdioServerParameters, stdio_client

        cwd = root / config.cwd if config.cwd else root
        params = StdioServerParameters(
            command=config.command or "", args=list(config.args), env=config.env, cwd=cwd
        )
        return stdio_client(params, errlog=errlog)
    if config.type == "sse":
        from mcp.client.sse import sse_client

        return sse_client(config.url or "", headers=config.headers or None)
    return http_transport(config)


def http_transport(config: McpServerConfig) -> Any:
    @contextlib.asynccontextmanager
    async def transport() -> Any:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with (
            create_mcp_http_client(headers=config.headers or None) as client,
            streamable_http_client(config.url or "", http_client=client) as streams,
        ):
            yield streams

    return transport()


async def list_tools(session: Any, server: str) -> tuple[McpToolInfo, ...]:
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


async def list_resources(session: Any, server: str) -> tuple[McpResourceInfo, ...]:
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


def leaf(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (task groups wrap what really happened)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError | concurrent.futures.TimeoutError)


def is_broken_stream(exc: BaseException) -> bool:
    import anyio

    return isinstance(
        exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream
    )


def log_tail(path: Path | None, start: int, lines: int = 5) -> str:
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


def start_error(exc: BaseException, timeout: float) -> str:
    """Why a server did not start, in one line."""
    if is_timeout(exc):
        return f"no answer to the MCP handshake within {timeout:g}s"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
