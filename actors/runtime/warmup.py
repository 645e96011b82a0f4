"""The model SDK warmed up off the critical path (docs/ARCHITECTURE.md, "Start-up and benchmarks").

The ``anthropic`` SDK builds much of its response handling lazily, at the first response a
process receives: pydantic validators and serializers of its message and stream-event models and
the type adapters of their unions (~20 ms of CPU on a quiet machine, ~50 ms on a busy one). Paid
there, it sits between the lead's first answer and everything the team does next.
``warm_model_sdk`` pays it on a daemon thread while the runtime starts instead: the SDK imported
and one complete streamed call made through ``AnthropicModel`` against an in-process
``httpx.MockTransport`` (no socket, no network, no key), so the very code path of a real call is
built. ``AfterWarmUp`` holds an agent's first model call until the warm-up has finished (bounded),
so two threads never build the same lazy model at once; when the warm-up is done before the
first request, which is the usual case, nothing waits. A warm-up that fails is only logged: the
first real call then builds what it needs itself, as it did before.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.ports import ModelClient, ModelRequest, ModelResponse

log = logging.getLogger(__name__)

__all__ = ["WARM_UP_WAIT_S", "AfterWarmUp", "start_warm_up", "warm_model_sdk"]

WARM_UP_WAIT_S = 30.0
"""The longest a first model call waits for a warm-up still running."""

_EVENTS: tuple[tuple[str, dict[str, object]], ...] = (
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_warm_up",
                "type": "message",
                "role": "assistant",
                "model": "warm-up",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
    ),
    ("ping", {"type": "ping"}),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_warm_up",
                "name": "warm_up",
                "input": {},
            },
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"n": 1}'},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 2},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
)
"""A whole streamed answer (text, then a tool call) as the Messages API sends it."""


def _sse() -> bytes:
    return "".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in _EVENTS
    ).encode()


def warm_model_sdk() -> bool:
    """Make one streamed call through ``AnthropicModel`` answered in process; True when it
    returned the answer it was given (never raises)."""
    try:
        import importlib

        import anthropic

        from harness.model.anthropic_client import AnthropicModel
        from harness.ports import Message, ModelRequest, SystemBlock, TextBlock, ToolSpec

        # The HTTP package the SDK is built on (``httpx``, or a fork of it in some versions).
        base = next(c for c in anthropic.DefaultHttpxClient.__mro__[1:] if c.__name__ == "Client")
        http_lib: Any = importlib.import_module(base.__module__.partition(".")[0])
        body = _sse()

        def answer(request: Any) -> Any:
            headers = {"content-type": "text/event-stream"}
            return http_lib.Response(200, headers=headers, content=body)

        http = anthropic.DefaultHttpxClient(transport=http_lib.MockTransport(answer))
        try:
            client = anthropic.Anthropic(
                api_key="warm-up", base_url="http://127.0.0.1:9", http_client=http, max_retries=0
            )
            request = ModelRequest(
                agent="warm-up",
                model="warm-up",
                system=(SystemBlock(text="warm-up"),),
                messages=(Message(role="user", content=(TextBlock(text="warm-up"),)),),
                tools=(
                    ToolSpec(
                        name="warm_up",
                        description="warm-up",
                        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
                    ),
                ),
                max_tokens=16,
            )
            response = AnthropicModel("warm-up", client=client, max_retries=0).complete(request)
        finally:
            http.close()
        return response.stop_reason == "tool_use" and len(response.content) == 2
    except Exception:  # the first real call builds what it needs itself
        log.debug("model SDK warm-up failed", exc_info=True)
        return False


def start_warm_up() -> threading.Event:
    """``warm_model_sdk`` on a daemon thread; the event is set once it has finished."""
    done = threading.Event()

    def run() -> None:
        try:
            warm_model_sdk()
        finally:
            done.set()

    threading.Thread(target=run, name="teamctl-sdk-warm-up", daemon=True).start()
    return done


class AfterWarmUp:
    """``inner``, whose first call waits (at most ``WARM_UP_WAIT_S``) for the warm-up."""

    def __init__(self, inner: ModelClient, warmed: threading.Event) -> None:
        self.inner = inner
        self._warmed: threading.Event | None = warmed

    def complete(self, request: ModelRequest) -> ModelResponse:
        warmed = self._warmed
        if warmed is not None:
            warmed.wait(WARM_UP_WAIT_S)
            self._warmed = None
        return self.inner.complete(request)
