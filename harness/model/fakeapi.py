"""A local Messages API: ``POST /v1/messages`` (JSON and SSE) served by a scripted model.

The agent is named by the ``x-teamctl-agent`` request header. Faults come from a queue
(``inject``, or ``faults=`` at construction; one per request, in order) and then from the script
(a step's ``fault``). Every request is recorded (``requests``), every answered one with the usage
reported for it (``served``, ``reported_usage``). Run it by hand with
``python -m harness.model.fakeapi SCRIPT [--port N] [--prompt-cache]``.

Prompt caching (``prompt_cache=True``; off by default, when the usage is the scripted model's
estimate) follows the Messages API's documented rules (docs/ARCHITECTURE.md, "The harness"):
the request is a sequence of blocks in API order (each tool, each system block, each message
content block); each ``cache_control`` marker (at most 4, else a 400; a top-level
``cache_control`` marks the last block) is a breakpoint ending a prefix. A breakpoint reads the
longest prefix cached earlier whose end lies within ``CACHE_LOOKBACK_BLOCKS`` blocks before it
(itself included); the breakpoints after that are written. Prefixes shorter than
``min_cache_tokens`` are never cached; an entry lives ``CACHE_TTL_S`` seconds, refreshed on each
read. Entries are shared by requests with the same API key and model (as the API shares them in
an organisation), not per agent. Tokens are counted deterministically: a prefix holds
``ceil(bytes / 4)`` tokens of the canonical JSON of its blocks (``api_blocks``). The usage then
splits the request's input into ``cache_read_input_tokens`` (the prefix read),
``cache_creation_input_tokens`` (from there to the last breakpoint written) and
``input_tokens`` (the rest).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.errors import ScriptError
from harness.model.scripted import Fault, Script, ScriptedModel
from harness.model.wire import AGENT_HEADER, request_from_api, response_to_api, usage_to_api
from harness.ports import (
    ModelRequest,
    ModelResponse,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)

_CHUNK = 16
_ERROR_STATUS = {"overloaded_error": 529, "api_error": 500, "rate_limit_error": 429}
MAX_CACHE_BREAKPOINTS = 4
CACHE_LOOKBACK_BLOCKS = 20
"""A breakpoint finds an earlier entry ending at most this many blocks back (itself included)."""
DEFAULT_MIN_CACHE_TOKENS = 1024
"""The smallest cacheable prefix (Sonnet and Opus 4 models)."""
CACHE_TTL_S = 300.0
BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received (treat ``body`` as read-only)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    agent: str
    fault: str | None


@dataclass(frozen=True)
class ServedCall:
    """One request answered with a message, and the usage reported for it."""

    agent: str
    body: dict[str, Any]
    usage: Usage


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON of ``value`` without ``cache_control`` markers (sorted keys, no spaces,
    UTF-8): what tokens are counted on and prefixes compared on."""
    clean = _without_cache_control(value)
    return json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def api_blocks(body: dict[str, Any]) -> list[tuple[bytes, bool]]:
    """The request as blocks in API order (tools, system, messages): per block its canonical
    bytes (tagged with its section; a message block with its role and whether it opens the
    message) and whether it carries a ``cache_control`` breakpoint."""
    blocks: list[tuple[bytes, bool]] = []
    for tool in body.get("tools") or []:
        blocks.append((b"T" + canonical_bytes(tool), "cache_control" in tool))
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system:
        blocks.append((b"S" + canonical_bytes(block), "cache_control" in block))
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for j, block in enumerate(content or []):
            data = {"role": message.get("role"), "first": j == 0, "block": block}
            marked = isinstance(block, dict) and "cache_control" in block
            blocks.append((b"M" + canonical_bytes(data), marked))
    if "cache_control" in body and blocks:  # automatic caching: a breakpoint on the last block
        blocks[-1] = (blocks[-1][0], True)
    return blocks


def request_bytes(body: dict[str, Any]) -> bytes:
    """The request's blocks in API order, concatenated (``cache_control`` markers left out, as
    they are not part of a cached prefix): what prefix stability is measured on."""
    return b"".join(data for data, _ in api_blocks(body))


def wire_bytes(body: dict[str, Any]) -> bytes:
    """The request as it goes over the wire, in API order: the canonical JSON of the list
    ``[tools, system, messages]`` (``cache_control`` markers left out). A request that only
    appends to its predecessor shares all of the predecessor's bytes but its closing brackets:
    what the prefix-stable share is measured on."""
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    return canonical_bytes([body.get("tools") or [], system, body.get("messages") or []])


def count_tokens(size: int) -> int:
    """Tokens of ``size`` canonical bytes: ``ceil(size / BYTES_PER_TOKEN)``."""
    return -(-size // BYTES_PER_TOKEN)


def common_prefix_len(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # invariant: a[:lo] == b[:lo]; the answer lies in [lo, hi]
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class PromptCache:
    """The API's prompt cache (see the module docstring); thread-safe."""

    min_tokens: int = DEFAULT_MIN_CACHE_TOKENS
    lookback: int = CACHE_LOOKBACK_BLOCKS
    ttl_s: float = CACHE_TTL_S
    clock: Callable[[], float] = time.monotonic
    _entries: dict[bytes, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def usage(self, namespace: str, body: dict[str, Any], output_tokens: int = 0) -> Usage:
        """Look up and write the request's prefixes; the usage the API reports for it.
        The server has refused requests with more than ``MAX_CACHE_BREAKPOINTS`` markers."""
        blocks = api_blocks(body)
        marks = [i + 1 for i, (_, marked) in enumerate(blocks) if marked]  # prefix lengths
        seed = hashlib.sha256(f"{namespace}\0{body.get('model')}".encode()).digest()
        hashes, sizes = [seed], [0]
        for data, _ in blocks:
            hashes.append(hashlib.sha256(hashes[-1] + data).digest())
            sizes.append(sizes[-1] + len(data))
        tokens = [count_tokens(size) for size in sizes]
        now = self.clock()
        with self._lock:
            read = 0
            for mark in marks:
                for end in range(mark, max(0, mark - self.lookback), -1):
                    expiry = self._entries.get(hashes[end])
                    if expiry is not None and expiry > now:
                        if end > read:
                            read = end
                        break
            if read:
                self._entries[hashes[read]] = now + self.ttl_s
            written = [m for m in marks if m > read and tokens[m] >= self.min_tokens]
            for mark in written:
                self._entries[hashes[mark]] = now + self.ttl_s
        read_tokens = tokens[read]
        created = tokens[max(written)] - read_tokens if written else 0
        return Usage(
            input_tokens=tokens[-1] - read_tokens - created,
            output_tokens=output_tokens,
            cache_creation_input_tokens=created,
            cache_read_input_tokens=read_tokens,
        )


def add_usage(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_creation_input_tokens=a.cache_creation_input_tokens + b.cache_creation_input_tokens,
        cache_read_input_tokens=a.cache_read_input_tokens + b.cache_read_input_tokens,
    )


def error_body(error_type: str, message: str, error_code: str | None = None) -> dict[str, Any]:
    """The Messages API error envelope; ``error_code`` goes in ``error.details``."""
    error: dict[str, Any] = {"type": error_type, "message": message}
    if error_code is not None:
        error["details"] = {"error_code": error_code}
    return {"type": "error", "error": error, "request_id": "req_fake"}


def fault_status(fault: Fault) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, body and headers of an error fault answered before any streaming starts."""
    headers: dict[str, str] = {}
    if fault.retry_after is not None and fault.kind in ("rate_limit", "overloaded", "spend_limit"):
        headers["retry-after"] = f"{fault.retry_after:g}"
    if fault.kind == "rate_limit":
        msg = fault.message or "Number of request tokens has exceeded your per-minute rate limit"
        return 429, error_body("rate_limit_error", msg), headers
    if fault.kind == "spend_limit":
        # Mirrors the API: a 429 whose details name the spend limit (the SDK maps the code to
        # EnforcedSpendLimitReachedError); retrying cannot help until the limit is raised.
        msg = fault.message or "You have reached your specified workspace API usage limits."
        return 429, error_body("rate_limit_error", msg, "enforced_spend_limit_reached"), headers
    if fault.kind in ("overloaded", "stream_error"):
        kind = fault.error_type if fault.kind == "stream_error" else "overloaded_error"
        return (
            _ERROR_STATUS.get(kind, 500),
            error_body(kind, fault.message or "Overloaded"),
            headers,
        )
    if fault.kind == "authentication":
        return (
            401,
            error_body("authentication_error", fault.message or "invalid x-api-key"),
            headers,
        )
    if fault.kind == "permission":
        msg = (
            fault.message or "Your API key does not have permission to use the specified resource."
        )
        return 403, error_body("permission_error", msg), headers
    if fault.kind == "prompt_too_long":
        msg = (
            fault.message or f"prompt is too long: {fault.tokens} tokens > {fault.maximum} maximum"
        )
        return 400, error_body("invalid_request_error", msg), headers
    return 500, error_body("api_error", fault.message or "Internal server error"), headers


def _pieces(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]


def _block_plan(response: ModelResponse) -> list[tuple[dict[str, Any], str, str]]:
    """Per block: its ``content_block_start`` payload, its delta kind and its full delta text."""
    plan: list[tuple[dict[str, Any], str, str]] = []
    for block in response.content:
        if isinstance(block, TextBlock):
            plan.append(({"type": "text", "text": ""}, "text_delta", block.text))
        elif isinstance(block, ToolUseBlock):
            start = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            plan.append((start, "input_json_delta", json.dumps(block.input)))
        elif isinstance(block, ThinkingBlock):
            start = {"type": "thinking", "thinking": "", "signature": ""}
            plan.append((start, "thinking_delta", block.thinking))
        else:
            plan.append((block.model_dump(), "", ""))
    return plan


def truncate_plan(
    plan: list[tuple[dict[str, Any], str, str]], keep_chars: int | None
) -> list[tuple[dict[str, Any], str, str]]:
    """Cut the output after ``keep_chars`` characters (None: in the middle of the last block)."""
    if keep_chars is None:
        keep_chars = sum(len(text) for _, _, text in plan[:-1]) + len(plan[-1][2]) // 2
    kept: list[tuple[dict[str, Any], str, str]] = []
    for start, kind, text in plan:
        if keep_chars <= 0:
            break
        kept.append((start, kind, text[:keep_chars]))
        keep_chars -= len(text)
    return kept


def _plan_to_json(
    response: ModelResponse, plan: list[tuple[dict[str, Any], str, str]]
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for start, kind, text in plan:
        block = dict(start)
        if kind == "text_delta":
            block["text"] = text
        elif kind == "thinking_delta":
            block["thinking"] = text
            block["signature"] = "fake-signature"
        elif kind == "input_json_delta":
            try:
                block["input"] = json.loads(text)
            except ValueError:
                block["input"] = {}  # a tool call cut mid-input, as the API leaves it
        content.append(block)
    body = response_to_api(response)
    body["content"] = content
    return body


def sse_events(
    response: ModelResponse,
    plan: list[tuple[dict[str, Any], str, str]],
    *,
    error: dict[str, Any] | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events of one streamed message; with ``error``, an ``error`` event after the first block
    delta instead of the rest."""
    head = response_to_api(response)
    head.update(content=[], stop_reason=None)
    head["usage"] = {**usage_to_api(response.usage), "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": head}
    yield "ping", {"type": "ping"}
    for index, (start, kind, text) in enumerate(plan):
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        for piece in _pieces(text) if kind else []:
            field = {"text_delta": "text", "thinking_delta": "thinking"}.get(kind, "partial_json")
            delta = {"type": kind, field: piece}
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            if error is not None:
                yield "error", error
                return
        if kind == "thinking_delta":
            sig = {"type": "signature_delta", "signature": "fake-signature"}
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": sig},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    if error is not None:
        yield "error", error
        return
    end: dict[str, Any] = {"stop_reason": response.stop_reason, "stop_sequence": None}
    usage = {"output_tokens": response.usage.output_tokens}
    yield "message_delta", {"type": "message_delta", "delta": end, "usage": usage}
    yield "message_stop", {"type": "message_stop"}


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``requests`` instead."""

    def _send_json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_fake")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _reset(self) -> None:
        # SO_LINGER 0 turns close() into a TCP reset: the client sees a dropped connection.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        fake = self.server.fake
        if self.path.split("?")[0] not in ("/v1/messages", "/v1/messages/count_tokens"):
            self._send_json(404, error_body("not_found_error", f"no route {self.path}"))
            return
        try:
            body = json.loads(raw)
            agent = self.headers.get(AGENT_HEADER) or "agent"
            if self.path.startswith("/v1/messages/count_tokens"):  # no max_tokens there
                body = {"max_tokens": 1, **body}
            request = request_from_api(body, agent=agent)
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            self._send_json(400, error_body("invalid_request_error", f"bad request: {exc}"))
            return
        if self.path.startswith("/v1/messages/count_tokens"):
            total = count_tokens(len(request_bytes(body))) if fake.cache else len(raw) // 4
            self._send_json(200, {"input_tokens": max(1, total)})
            return
        marks = sum(1 for _, marked in api_blocks(body) if marked)
        if marks > MAX_CACHE_BREAKPOINTS:
            message = (
                f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be "
                f"provided. Found {marks}."
            )
            self._send_json(400, error_body("invalid_request_error", message))
            return
        fault = fake.next_fault(request)
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake.record(RecordedRequest(self.path, headers, body, agent, fault.kind if fault else None))
        self._answer(request, fault, body, headers, stream=bool(body.get("stream")))

    def _answer(
        self,
        request: ModelRequest,
        fault: Fault | None,
        body: dict[str, Any],
        headers: dict[str, str],
        *,
        stream: bool,
    ) -> None:
        fake = self.server.fake
        mid_stream = fault is not None and fault.kind in ("stream_error", "stream_reset")
        if fault is not None and (
            fault.kind == "reset" or (fault.kind == "stream_reset" and not stream)
        ):
            self._reset()
            return
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.seconds)
        if fault is not None and not fault.consumes_step and not (stream and mid_stream):
            status, payload, extra = fault_status(fault)
            self._send_json(status, payload, extra)
            return
        if mid_stream:  # the error comes after some output that is not from the script
            response = ModelResponse(
                id="msg_fake_error",
                model=request.model,
                content=(TextBlock(text="partial output before the error"),),
                stop_reason="end_turn",
            )
        else:
            try:
                response = self.server.fake.model.complete(request)
            except ScriptError as exc:
                self.server.fake.record_script_error(str(exc))
                self._send_json(400, error_body("invalid_request_error", str(exc)))
                return
        plan = _block_plan(response)
        if fault is not None and fault.kind == "max_tokens" and plan:
            plan = truncate_plan(plan, fault.keep_chars)
            response = response.model_copy(update={"stop_reason": "max_tokens"})
        if not mid_stream:
            response = fake.serve(request.agent, body, headers, response)
        if not stream:
            self._send_json(200, _plan_to_json(response, plan))
            return
        error = None
        if fault is not None and mid_stream:
            error = error_body(fault.error_type, fault.message or "Overloaded")
        self._stream(
            response, plan, error, reset=fault is not None and fault.kind == "stream_reset"
        )

    def _stream(
        self,
        response: ModelResponse,
        plan: list[tuple[dict[str, Any], str, str]],
        error: dict[str, Any] | None,
        *,
        reset: bool,
    ) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", "req_fake")
        self.end_headers()
        for event, data in sse_events(response, plan, error=error):
            if event == "error" and reset:
                self._reset()
                return
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], fake: FakeMessagesServer) -> None:
        self.fake = fake
        super().__init__(address, _Handler)


class FakeMessagesServer:
    """A loopback Messages API; ``start``/``stop`` or use as a context manager."""

    def __init__(
        self,
        script: Script | ScriptedModel | str | Path | dict[str, Any],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Iterable[Fault] = (),
        prompt_cache: bool = False,
        min_cache_tokens: int = DEFAULT_MIN_CACHE_TOKENS,
    ) -> None:
        self.model = script if isinstance(script, ScriptedModel) else ScriptedModel(script)
        self.cache = PromptCache(min_tokens=min_cache_tokens) if prompt_cache else None
        """The simulated prompt cache (None: off, the usage is the scripted model's)."""
        self._answered: list[ServedCall] = []
        self._address = (host, port)
        self._lock = threading.Lock()
        self._faults: deque[Fault] = deque()
        self._requests: list[RecordedRequest] = []
        self.script_errors: list[str] = []
        """Every ``ScriptError`` the scripted model raised (answered as a 400)."""
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.inject(*faults)

    def inject(self, *faults: Fault) -> None:
        """Queue faults for the next requests (a fault with ``times=n`` covers n requests)."""
        with self._lock:
            for fault in faults:
                self._faults.extend([fault] * fault.times)

    def next_fault(self, request: Any) -> Fault | None:
        """The fault for this request: the queue first, then the script."""
        with self._lock:
            if self._faults:
                return self._faults.popleft()
        return self.model.take_fault(request)

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def serve(
        self, agent: str, body: dict[str, Any], headers: dict[str, str], response: ModelResponse
    ) -> ModelResponse:
        """``response`` with the usage to report (the prompt cache's when it is on), recorded."""
        if self.cache is not None:
            namespace = headers.get("x-api-key") or headers.get("authorization") or ""
            usage = self.cache.usage(namespace, body, response.usage.output_tokens)
            response = response.model_copy(update={"usage": usage})
        with self._lock:
            self._answered.append(ServedCall(agent, body, response.usage))
        return response

    @property
    def served(self) -> list[ServedCall]:
        """A snapshot of every request answered with a message, in answer order."""
        with self._lock:
            return list(self._answered)

    def reported_usage(self, agent: str | None = None) -> Usage:
        """The sum of the usage reported (for ``agent``, or for every agent)."""
        total = Usage()
        for call in self.served:
            if agent is None or call.agent == agent:
                total = add_usage(total, call.usage)
        return total

    def record_script_error(self, message: str) -> None:
        with self._lock:
            self.script_errors.append(message)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every ``/v1/messages`` request received, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("fake API not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeMessagesServer:
        self._server = _HTTPServer(self._address, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeMessagesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.model.fakeapi", description=__doc__)
    parser.add_argument("script", type=Path, help="script file (.yaml/.yml/.json)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--prompt-cache", action="store_true", help="simulate prompt caching in the usage"
    )
    args = parser.parse_args(argv)
    try:
        server = FakeMessagesServer(
            args.script, host=args.host, port=args.port, prompt_cache=args.prompt_cache
        )
    except (ScriptError, OSError) as exc:
        print(f"error: {exc}")
        return 2
    with server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
