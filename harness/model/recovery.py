"""What went wrong with one Messages API call, and whether trying again can help.

``classify`` turns an SDK exception (HTTP status errors, ``error`` events mid-stream, dropped
connections) into a ``Failure``; ``AnthropicModel`` decides from it whether to wait and retry,
switch to the fallback model, raise ``PromptTooLong`` or give up with ``ModelError``.
"""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2

RETRYABLE = frozenset({"rate_limit", "overloaded", "server_error", "connection"})
_SPEND_CODES = ("spend_limit", "billing")
_SPEND_WORDS = ("spend limit", "usage limit", "credit balance")
_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "billing_error": 402,
    "not_found_error": 404,
}
NO_KEY = "no API key: set ANTHROPIC_API_KEY (or run `teamctl demo` to try it without one)"
_BY_STATUS = {401: "authentication", 402: "billing", 403: "permission", 404: "not_found"}


@dataclass(frozen=True)
class Failure:
    """One failed call: ``kind`` is the ``ModelError.kind`` raised if recovery gives up."""

    kind: str
    message: str
    status: int | None
    retry_after: float | None = None
    unreachable: bool = False
    """A ``connection`` failure before any connection was made (refused, DNS, connect
    timeout): the retries of these are bounded in time, not only in number."""

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE


def parse_retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        return None if parsed is None else max(0.0, email.utils.mktime_tz(parsed) - now)


def _error_field(body: Any, name: str) -> str | None:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get(name), str):
            return str(error[name])
    return None


def is_spend_limit(error_code: str | None, message: str) -> bool:
    """A 429 that no amount of waiting fixes (spend limit, usage limit, no credit)."""
    code = (error_code or "").lower()
    lowered = message.lower()
    return any(c in code for c in _SPEND_CODES) or any(w in lowered for w in _SPEND_WORDS)


def is_prompt_too_long(status: int, message: str) -> bool:
    lowered = message.lower()
    return status == 413 or (status == 400 and "prompt is too long" in lowered)


def _transport_cause(exc: BaseException) -> BaseException:
    """The ``httpx`` error under the SDK's ``APIConnectionError`` (itself when there is none)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx2.TransportError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return exc


def classify(exc: BaseException, *, now: float) -> Failure | None:
    """The ``Failure`` an SDK/transport exception stands for; ``None`` if it is not one."""
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        cause = _transport_cause(exc)
        unreachable = isinstance(cause, httpx2.ConnectError | httpx2.ConnectTimeout)
        detail = str(cause) or type(cause).__name__
        return Failure("connection", f"connection failed: {detail}", None, unreachable=unreachable)
    if isinstance(exc, TypeError) and "authentication method" in str(exc):
        # The SDK's way of saying that no key was found (raised when the request is built).
        return Failure("authentication", NO_KEY, None)
    if not isinstance(exc, anthropic.APIStatusError):
        return Failure("api_error", str(exc), None) if isinstance(exc, anthropic.APIError) else None
    body = exc.body
    error_type = _error_field(body, "type") or ""
    message = _error_field(body, "message") or str(exc)
    status = exc.status_code
    if status < 400:  # an ``error`` event inside a 200 stream: treat it as its HTTP status
        status = _STREAM_ERROR_STATUS.get(error_type, 500)
    retry_after = parse_retry_after(exc.response.headers, now)
    code = getattr(exc, "error_code", None)
    if status == 429:
        if is_spend_limit(code if isinstance(code, str) else None, message):
            return Failure("spend_limit", f"spend limit reached: {message}", status)
        return Failure("rate_limit", f"rate limited: {message}", status, retry_after)
    if status == 529 or error_type == "overloaded_error":
        return Failure("overloaded", f"overloaded: {message}", status, retry_after)
    if is_prompt_too_long(status, message):
        return Failure("prompt_too_long", message, status)
    if status in _BY_STATUS:
        return Failure(_BY_STATUS[status], message, status)
    if status >= 500 or status in (408, 409):
        return Failure("server_error", f"server error {status}: {message}", status, retry_after)
    if status in (400, 422):
        return Failure("invalid_request", message, status)
    return Failure("api_error", message, status)
