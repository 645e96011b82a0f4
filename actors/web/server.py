"""Running the dashboard: bind, print the tokened URL, open a browser, serve until Ctrl-C.

The socket is bound before anything is printed, so the first stdout line names the real port
(``--port 0`` picks a free one); it is printed once uvicorn listens with its signal handlers
installed, so a Ctrl-C at any time after it stops the server cleanly. uvicorn handles SIGINT and SIGTERM: it stops accepting, ends
the open event streams and the watcher, then re-raises the signal, which the CLI reports as
``interrupted`` (exit 130) without a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO

from actors.web.auth import Access, exposure_warning, new_token
from actors.web.state import Dashboard

GRACEFUL_S = 3
"""How long a stopping server waits for open requests (an event stream ends at once)."""


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.set_inheritable(False)
    except BaseException:
        sock.close()
        raise
    return sock


def can_open_browser(environ: Mapping[str, str]) -> bool:
    """A browser can be shown: a display, or ``$BROWSER`` names one."""
    return any(environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"))


def serve(
    dashboard: Dashboard,
    *,
    host: str,
    port: int,
    open_browser: bool,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    """Serve ``dashboard`` until the process is told to stop."""
    import uvicorn

    from actors.web.app import build_app

    out = out or sys.stdout
    err = err or sys.stderr
    sock = bind(host, port)
    try:
        access = Access(new_token(), host, sock.getsockname()[1])
        app = build_app(dashboard, access)

        def announce() -> None:
            out.write(access.url() + "\n")
            out.flush()
            warning = exposure_warning(host)
            if warning is not None:
                err.write(warning + "\n")
                err.flush()
            if open_browser and can_open_browser(os.environ):
                import webbrowser

                threading.Thread(target=webbrowser.open, args=(access.url(),), daemon=True).start()

        class _Server(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                # The URL goes out once the server listens with its signal handlers in place:
                # a Ctrl-C right after it then stops the server cleanly (no half-made loop).
                await super().startup(sockets=sockets)
                if self.started:
                    announce()

        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_S,
            server_header=False,
        )
        server = _Server(config)
        quiet = _QuietCancel(server)
        logger = logging.getLogger("uvicorn.error")  # configured by uvicorn.Config above
        logger.addFilter(quiet)
        try:
            server.run(sockets=[sock])
        finally:
            logger.removeFilter(quiet)
    finally:
        sock.close()


class _QuietCancel(logging.Filter):
    """Drops uvicorn's reports of work cancelled because the server is stopping, which is the
    stop the person asked for, not an error, and would print a traceback: "Exception in ASGI
    application" for a request cancelled (a Ctrl-C with an event stream open, on a loaded
    machine), and the lifespan's shutdown cancelled by a second Ctrl-C (the forced exit does not
    wait for it; the application reports it as a traceback in the message text)."""

    def __init__(self, server: Any) -> None:
        super().__init__()
        self._server = server

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._server.should_exit:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, asyncio.CancelledError):
            return False
        text = record.msg if isinstance(record.msg, str) else ""
        return not (
            exc is None
            and text.startswith("Traceback (most recent call last):")
            and text.rstrip().endswith("CancelledError")
        )
