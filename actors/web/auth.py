"""Who may use the dashboard: a secret token on every request, CSRF and Origin checks on every
request that changes something (README.md, "Web dashboard").

``TokenGate`` is a plain ASGI middleware (it never buffers a response, so server-sent events
stream through it). A request is let in with the token as ``Authorization: Bearer``, as the
dashboard's cookie, or as ``?token=`` on a GET, which sets the cookie (HttpOnly,
SameSite=Strict) and redirects to the same URL without it, so the token leaves the address bar
and the history. Anything else is 401 with an empty body. A request that is not GET or HEAD also
needs ``X-Teamctl-CSRF`` equal to ``Access.csrf`` (the page reads it from ``GET /api/state``)
and an ``Origin`` of the dashboard itself; only a Bearer request (a script: browsers never add
that header on their own) may come without an ``Origin``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSRF_HEADER = "x-teamctl-csrf"
SAFE_METHODS = frozenset({"GET", "HEAD"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        b"frame-ancestors 'none'",
    ),
)
"""Sent with every response. The page loads scripts and styles from ``/static/`` only (no
inline script or style) and renders agent text as text."""


def is_loopback(host: str) -> bool:
    """``host`` is reachable from this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str) -> str | None:
    """The stderr line ``teamctl web`` prints when ``host`` is not loopback (None: it is)."""
    if is_loopback(host):
        return None
    return (
        f"warning: serving on {host}, not only on this machine: anyone who can reach it and "
        "has the URL's token can see the team and answer its approvals"
    )


def new_token() -> str:
    """A fresh access token (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def url_host(host: str) -> str:
    """``host`` as it appears in a URL (IPv6 in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass(frozen=True)
class Access:
    """The secrets and the address of one dashboard server."""

    token: str
    host: str
    port: int

    @property
    def cookie_name(self) -> str:
        """Per port: cookies are shared by every port of a host, dashboards are not."""
        return f"teamctl_{self.port}"

    @property
    def csrf(self) -> str:
        """The value state-changing requests carry in ``X-Teamctl-CSRF`` (derived from the
        token, so it changes with every server start)."""
        return hmac.new(self.token.encode(), b"teamctl-web-csrf", hashlib.sha256).hexdigest()

    @property
    def origins(self) -> frozenset[str]:
        """The ``Origin`` values of the dashboard's own pages."""
        hosts = {self.host} | (LOOPBACK_HOSTS if is_loopback(self.host) else set())
        return frozenset(f"http://{url_host(h)}:{self.port}" for h in hosts)

    def is_token(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), self.token.encode())

    def url(self) -> str:
        """The tokened URL ``teamctl web`` prints."""
        return f"http://{url_host(self.host)}:{self.port}/?token={self.token}"


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", ()):
        out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _bearer(headers: dict[str, str]) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _cookie(headers: dict[str, str], name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header is no cookie
        return None
    morsel = jar.get(name)
    return None if morsel is None else morsel.value


class TokenGate:
    """The ASGI middleware in front of every route."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        method = str(scope.get("method", "GET")).upper()
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        tokens = [v for k, v in query if k == "token"]
        if tokens:
            if method in SAFE_METHODS and len(tokens) == 1 and self.access.is_token(tokens[0]):
                await self._login(scope, query, send)
            else:
                await _unauthorized(send)
            return
        if self.access.is_token(_bearer(headers)):
            via = "bearer"
        elif self.access.is_token(_cookie(headers, self.access.cookie_name)):
            via = "cookie"
        else:
            await _unauthorized(send)
            return
        if method not in SAFE_METHODS:
            refusal = self._refuse_change(headers, via)
            if refusal:
                await _respond(send, 403, json.dumps({"error": refusal}).encode(), b"json")
                return
        await self.app(scope, receive, _secured(send))

    def _refuse_change(self, headers: dict[str, str], via: str) -> str | None:
        """Why a state-changing request is refused (None: it is allowed)."""
        csrf = headers.get(CSRF_HEADER)
        if csrf is None or not hmac.compare_digest(csrf.encode(), self.access.csrf.encode()):
            return "missing or wrong X-Teamctl-CSRF header"
        origin = headers.get("origin")
        if origin is None:
            return None if via == "bearer" else "missing Origin"
        if origin not in self.access.origins:
            return "Origin not allowed"
        return None

    async def _login(self, scope: Scope, query: list[tuple[str, str]], send: Send) -> None:
        """Set the cookie and redirect to the same URL without the token."""
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        location = str(scope.get("path", "/")) + (f"?{rest}" if rest else "")
        cookie = f"{self.access.cookie_name}={self.access.token}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1")),
                    (b"set-cookie", cookie.encode("latin-1")),
                    (b"content-length", b"0"),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _secured(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {k.lower() for k, _ in message.get("headers", ())}
            extra = [(k, v) for k, v in SECURITY_HEADERS if k not in present]
            message["headers"] = [*message.get("headers", ()), *extra]
        await send(message)

    return wrapped


async def _respond(send: Send, status: int, body: bytes, kind: bytes) -> None:
    content_type = b"application/json" if kind == b"json" else b"text/plain; charset=utf-8"
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _unauthorized(send: Send) -> None:
    """401 with an empty body: nothing about the team, the routes or why."""
    await _respond(send, 401, b"", b"text")
