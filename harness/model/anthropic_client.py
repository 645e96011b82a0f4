"""``ModelClient`` over the real ``anthropic`` SDK, with retries and recovery
(docs/ARCHITECTURE.md, "The harness").

The SDK's own retries are off (``max_retries=0``); this class retries instead, so that waits go
through the injected ``Clock`` and every decision is visible:

- 429: wait ``retry-after`` (else jittered backoff) and retry; a spend-limit 429 is raised at once.
- 529 / ``overloaded_error`` (also as an ``error`` event mid-stream): jittered backoff; after
  ``fallback_after`` in a row, switch to ``fallback_model`` for the rest of this call.
- 5xx, 408/409 and dropped connections: jittered backoff and retry. A server that cannot be
  reached at all (refused, unknown host, connect timeout) is retried for at most
  ``connect_timeout`` seconds (``TEAMCTL_CONNECT_TIMEOUT``, default 20), then
  ``ModelConnectionError`` names the base URL.
- 401/403: ``ModelAuthError`` at once (no retry: waiting does not fix a key).
- ``max_tokens``: retry once with ``escalated_max_tokens``, then ask the model to continue (up to
  ``max_continuations`` times); a truncated trailing ``tool_use`` is dropped, never returned.
- prompt too long: ``PromptTooLong`` (the loop compacts once and retries).
- anything else, or retries exhausted: ``ModelError(kind, status)``.

No silent waits (docs/RELIABILITY.md): every wait of ``notice_after`` seconds or more (a back-off,
a ``retry-after``, the shared gate held by another client) is first passed to ``on_wait`` as a
``ModelWait`` saying what failed and until when; the CLI prints it, the runtime journals it.

Backoff is shared: a 429 or 529 wait holds the ``BackoffGate`` (pass one gate to every client of
a process, as the team runtime does) and every client waits at it before each request, so
teammates slow down together instead of stampeding.

Importing this module imports the SDK (slow); import it only where a model is needed.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic

from harness.errors import ModelAuthError, ModelConnectionError, ModelError, PromptTooLong
from harness.model.backoff import BackoffGate, ModelWait
from harness.model.pricing import cost_usd
from harness.model.recovery import Failure, classify
from harness.model.wire import AGENT_HEADER, request_to_api, response_from_api
from harness.ports import (
    Clock,
    ContentBlock,
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from teamctl_base.clock import SystemClock

CUT_OFF_NOTE = "[output cut off at the token limit]"
_SHARED = frozenset({"rate_limit", "overloaded"})
CONNECT_TIMEOUT_ENV = "TEAMCTL_CONNECT_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT = 20.0
"""Seconds an unreachable API is retried before ``ModelConnectionError``."""
NOTICE_AFTER = 2.0
"""Waits at least this long are announced through ``on_wait``."""
_AUTH_KINDS = frozenset({"authentication", "permission"})


def connect_timeout_from_env() -> float:
    """``TEAMCTL_CONNECT_TIMEOUT`` (seconds, > 0), else ``DEFAULT_CONNECT_TIMEOUT``."""
    raw = os.environ.get(CONNECT_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_CONNECT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ModelError(f"{CONNECT_TIMEOUT_ENV}={raw!r}: expected a number of seconds above 0")
    return value


def auth_message(kind: str, status: int | None, message: str, base_url: str) -> str:
    """The one line for a rejected key (401) or a refused permission (403)."""
    if status == 403 or kind == "permission":
        return (
            f"the API key is not allowed to do this (403) at {base_url}: {message}; check the "
            "key's workspace and permissions, or set ANTHROPIC_API_KEY to another key"
        )
    if status is None:  # no key at all: the SDK refused to build the request
        return message
    return (
        f"the API key was rejected (401) by {base_url}: {message}; set ANTHROPIC_API_KEY to a "
        "valid key (and ANTHROPIC_BASE_URL to the server it belongs to)"
    )


def continuation_prompt(dropped: ToolUseBlock | None) -> str:
    """The user turn that asks the model to go on after a ``max_tokens`` stop."""
    text = "Your previous response was cut off at the output token limit. Continue exactly where"
    text += " you stopped, without repeating what you already wrote."
    if dropped is not None:
        text += (
            f" Your call to the tool `{dropped.name}` was cut off mid-input and was NOT run:"
            " issue it again in full, and keep tool inputs short (split large writes)."
        )
    return text


def add_usage(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_creation_input_tokens=a.cache_creation_input_tokens + b.cache_creation_input_tokens,
        cache_read_input_tokens=a.cache_read_input_tokens + b.cache_read_input_tokens,
    )


@dataclass(frozen=True)
class CallRecord:
    """One ``complete`` call: the model that answered, billed usage over every API request it
    took (escalation and continuations included), its cost (``None``: unknown price), and the
    number of HTTP attempts."""

    agent: str
    model: str
    usage: Usage
    cost_usd: float | None
    attempts: int
    stop_reason: str | None


class AnthropicModel:
    """A ``ModelClient`` backed by the Messages API (``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``).

    ``model`` is used when a request's ``model`` is empty. The returned ``usage`` is that of the
    last API request (what the context holds now); ``calls`` keeps the billed totals and cost.
    """

    def __init__(
        self,
        model: str,
        *,
        fallback_model: str | None = None,
        client: anthropic.Anthropic | None = None,
        clock: Clock | None = None,
        max_retries: int = 8,
        stream: bool = True,
        fallback_after: int = 3,
        base_delay: float = 1.0,
        max_delay: float = 60.0,
        max_retry_after: float = 900.0,
        escalated_max_tokens: int = 32_000,
        max_continuations: int = 2,
        timeout: float = 600.0,
        thinking: dict[str, Any] | None = None,
        rng: random.Random | None = None,
        on_call: Callable[[CallRecord], None] | None = None,
        gate: BackoffGate | None = None,
        on_wait: Callable[[ModelWait], None] | None = None,
        notice_after: float = NOTICE_AFTER,
        connect_timeout: float | None = None,
    ) -> None:
        self.model = model
        self.fallback_model = fallback_model
        self.connect_timeout = (
            connect_timeout if connect_timeout is not None else connect_timeout_from_env()
        )
        # One attempt may not spend the whole budget on a connect that never answers.
        limits = anthropic.Timeout(timeout, connect=min(timeout, 10.0, self.connect_timeout))
        base = client or anthropic.Anthropic(timeout=limits)
        self._client = base.with_options(max_retries=0, timeout=limits)
        self.base_url = str(self._client.base_url).rstrip("/")
        self.on_wait = on_wait
        """Told of every wait of ``notice_after`` seconds or more (settable after creation)."""
        self.notice_after = notice_after
        self._clock: Clock = clock or SystemClock()
        self.max_retries = max_retries
        self.stream = stream
        self.fallback_after = fallback_after
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after
        self.escalated_max_tokens = escalated_max_tokens
        self.max_continuations = max_continuations
        self.thinking = thinking
        self._rng = rng or random.Random()
        self._on_call = on_call
        self.gate = gate or BackoffGate()
        self._lock = threading.Lock()
        self._calls: list[CallRecord] = []

    @property
    def calls(self) -> list[CallRecord]:
        """Every completed call so far, oldest first (a snapshot)."""
        with self._lock:
            return list(self._calls)

    def complete(self, request: ModelRequest) -> ModelResponse:
        model = request.model or self.model
        messages = request.messages
        max_tokens = request.max_tokens
        kept: list[ContentBlock] = []
        billed = Usage()
        attempts = 0
        escalated = False
        continuations = 0
        while True:
            current = request.model_copy(
                update={"model": model, "messages": messages, "max_tokens": max_tokens}
            )
            response, model, tries = self._call_with_recovery(current)
            attempts += tries
            billed = add_usage(billed, response.usage)
            if response.stop_reason != "max_tokens":
                return self._finish(request, response, [*kept, *response.content], billed, attempts)
            content, dropped = _drop_cut_tool_use(response.content)
            if not escalated and not kept and max_tokens < self.escalated_max_tokens:
                escalated, max_tokens = True, self.escalated_max_tokens
                continue
            # Whole tool calls before the cut cannot be followed by a continuation prompt (they
            # need their results first), and the loop going on from them is the continuation.
            whole_calls = any(isinstance(b, ToolUseBlock) for b in content)
            if whole_calls or continuations >= self.max_continuations:
                return self._finish(request, response, [*kept, *content], billed, attempts)
            continuations += 1
            kept.extend(content)
            said = tuple(content) or (TextBlock(text=CUT_OFF_NOTE),)
            messages = (
                *messages,
                Message(role="assistant", content=said),
                Message(role="user", content=(TextBlock(text=continuation_prompt(dropped)),)),
            )

    def _finish(
        self,
        request: ModelRequest,
        last: ModelResponse,
        content: list[ContentBlock],
        billed: Usage,
        attempts: int,
    ) -> ModelResponse:
        if not content:
            content = [TextBlock(text=CUT_OFF_NOTE)]
        has_tools = any(isinstance(b, ToolUseBlock) for b in content)
        stop = "tool_use" if has_tools and last.stop_reason == "max_tokens" else last.stop_reason
        billed_more = None if billed == last.usage else billed
        final = last.model_copy(
            update={"content": tuple(content), "stop_reason": stop, "billed": billed_more}
        )
        record = CallRecord(
            request.agent, final.model, billed, cost_usd(final.model, billed), attempts, stop
        )
        with self._lock:
            self._calls.append(record)
        if self._on_call is not None:
            self._on_call(record)
        return final

    def _backoff(self, attempt: int) -> float:
        delay = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return float(delay * (0.5 + 0.5 * self._rng.random()))

    def _call_with_recovery(self, request: ModelRequest) -> tuple[ModelResponse, str, int]:
        """One API response for ``request`` (possibly from the fallback model), the model that
        answered, and the number of attempts it took."""
        model = request.model
        attempt = overloaded_in_row = 0
        unreachable_since: float | None = None
        while True:
            attempt += 1
            self._wait_at_gate(request.agent)
            started = self._clock.monotonic()
            try:
                return self._call_once(request, model), model, attempt
            except Exception as exc:
                failure = classify(exc, now=self._clock.now())
                if failure is None:
                    raise
                error = exc
            if failure.kind == "prompt_too_long":
                raise PromptTooLong(failure.message) from error
            if failure.kind in _AUTH_KINDS:
                raise ModelAuthError(
                    auth_message(failure.kind, failure.status, failure.message, self.base_url),
                    kind=failure.kind,
                    status=failure.status,
                ) from error
            if not failure.retryable:
                raise ModelError(
                    failure.message, kind=failure.kind, status=failure.status
                ) from error
            budget: float | None = None
            if failure.unreachable:
                unreachable_since = started if unreachable_since is None else unreachable_since
                spent = self._clock.monotonic() - unreachable_since
                budget = self.connect_timeout - spent
                if budget <= 0:
                    raise ModelConnectionError(
                        f"cannot reach the Messages API at {self.base_url}: "
                        f"{failure.message.removeprefix('connection failed: ')} (gave up after "
                        f"{spent:.0f}s and {attempt} attempts; check ANTHROPIC_BASE_URL, or set "
                        f"{CONNECT_TIMEOUT_ENV} to keep trying longer)",
                        kind="connection",
                    ) from error
            else:
                unreachable_since = None
            if attempt > self.max_retries:
                raise ModelError(
                    f"{failure.message} (gave up after {attempt} attempts)",
                    kind=failure.kind,
                    status=failure.status,
                ) from error
            overloaded_in_row = overloaded_in_row + 1 if failure.kind == "overloaded" else 0
            if (
                overloaded_in_row >= self.fallback_after
                and self.fallback_model is not None
                and model != self.fallback_model
            ):
                model, overloaded_in_row = self.fallback_model, 0
                continue  # a different model: no reason to wait
            delay = self._delay_for(failure, attempt)
            if budget is not None:  # the last try lands on the connection budget's end
                delay = min(delay, budget)
            if failure.kind in _SHARED:  # the API is saturated: every client waits
                self.gate.hold(self._clock.monotonic() + delay)
            self._announce(
                request.agent, failure.kind, failure.message, delay, attempt, failure.status
            )
            self._clock.sleep(delay)

    def _wait_at_gate(self, agent: str) -> None:
        """Wait at the shared gate, announcing a long wait first."""
        pending = self.gate.until - self._clock.monotonic()
        if pending > 0:
            reason = "another agent of this process was told to slow down"
            self._announce(agent, "shared_backoff", reason, pending, 0, None)
        self.gate.wait(self._clock)

    def _announce(
        self, agent: str, kind: str, reason: str, delay: float, attempt: int, status: int | None
    ) -> None:
        if self.on_wait is None or delay < self.notice_after:
            return
        self.on_wait(
            ModelWait(
                agent=agent,
                kind=kind,
                reason=reason,
                seconds=delay,
                until=self._clock.now() + delay,
                attempt=attempt,
                max_attempts=self.max_retries + 1,
                base_url=self.base_url,
                status=status,
            )
        )

    def _delay_for(self, failure: Failure, attempt: int) -> float:
        if failure.kind == "rate_limit" and failure.retry_after is not None:
            return min(failure.retry_after, self.max_retry_after)
        return self._backoff(attempt)

    def _call_once(self, request: ModelRequest, model: str) -> ModelResponse:
        kwargs = request_to_api(request, model=model, max_tokens=request.max_tokens)
        extra_body: dict[str, Any] = {}
        if "temperature" in kwargs:
            extra_body["temperature"] = kwargs.pop("temperature")
        if self.thinking is not None:
            kwargs["thinking"] = self.thinking
        headers = {AGENT_HEADER: request.agent}
        if self.stream:
            with self._client.messages.stream(
                **kwargs, extra_headers=headers, extra_body=extra_body or None
            ) as stream:
                message = stream.get_final_message()
        else:
            message = self._client.messages.create(
                **kwargs, extra_headers=headers, extra_body=extra_body or None
            )
        return response_from_api(message.model_dump(mode="json"))


def _drop_cut_tool_use(
    content: tuple[ContentBlock, ...],
) -> tuple[list[ContentBlock], ToolUseBlock | None]:
    """After a ``max_tokens`` stop the last block was being written: a ``tool_use`` there is
    incomplete and must never run, so it is removed (and returned)."""
    blocks = list(content)
    if blocks and isinstance(blocks[-1], ToolUseBlock):
        return blocks[:-1], blocks[-1]
    return blocks, None
