"""Conversion between ``harness.ports`` values and Messages API JSON, both directions.

Client side: ``request_to_api`` (with prompt-cache breakpoints) and ``response_from_api``.
Server side (the fake API): ``request_from_api`` and ``response_to_api``. No SDK import here, so
the fake server starts fast.
"""

from __future__ import annotations

from typing import Any, get_args

from harness.ports import (
    ContentBlock,
    Message,
    ModelRequest,
    ModelResponse,
    RedactedThinkingBlock,
    StopReason,
    SystemBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)

AGENT_HEADER = "x-teamctl-agent"
"""The request header naming the calling agent (the fake API keys its script on it)."""
MAX_CACHE_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}
_CACHEABLE = ("text", "tool_use", "tool_result")


def block_to_api(block: ContentBlock) -> dict[str, Any]:
    """The wire JSON of one content block."""
    data = block.model_dump(exclude_none=True)
    if isinstance(block, ToolResultBlock) and not block.is_error:
        del data["is_error"]
    return data


def _last_cacheable(content: list[dict[str, Any]]) -> dict[str, Any] | None:
    cacheable: list[dict[str, Any]] = [b for b in content if b["type"] in _CACHEABLE]
    return cacheable[-1] if cacheable else None


def request_to_api(request: ModelRequest, *, model: str, max_tokens: int) -> dict[str, Any]:
    """Keyword arguments for ``messages.create`` (without ``stream``).

    Tools keep the caller's order (a stable prefix). Prompt-cache breakpoints, never more than
    ``MAX_CACHE_BREAKPOINTS``, by priority: the last block of the newest message (the whole
    request, read by the next one); the last system block marked ``cache`` (tools + system, the
    prefix every request of the agent shares); the last block of the user message before the
    newest assistant message, which is where the previous request of an agent loop put its
    breakpoint (read from there even when the new tail is longer than the API's 20-block
    lookback); the last tool definition (the tools alone, which agents of one role share, so one
    agent reads what another wrote); then further marked system blocks, the last ones first.
    """
    contents = [[block_to_api(b) for b in m.content] for m in request.messages]
    marks: list[dict[str, Any]] = []
    newest = _last_cacheable(contents[-1]) if contents else None
    if newest is not None:
        marks.append(newest)
    previous: dict[str, Any] | None = None
    seen_assistant = False
    for i in range(len(contents) - 2, -1, -1):
        if request.messages[i].role == "assistant":
            seen_assistant = True
        elif seen_assistant:
            previous = _last_cacheable(contents[i])
            break
    system = [{"type": "text", "text": b.text} for b in request.system]
    marked = [system[i] for i, b in enumerate(request.system) if b.cache]
    if marked:
        marks.append(marked.pop())
    if previous is not None:
        marks.append(previous)
    tools = [t.model_dump() for t in request.tools]
    if tools:
        # Teammates of one role send byte-identical tools; a breakpoint after them lets every
        # agent read the tools another one already wrote to the (organisation-wide) cache.
        marks.append(tools[-1])
    marks += reversed(marked)
    for block in marks[:MAX_CACHE_BREAKPOINTS]:
        block["cache_control"] = dict(_EPHEMERAL)
    messages = [
        {"role": m.role, "content": content}
        for m, content in zip(request.messages, contents, strict=True)
    ]
    kwargs: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system:
        kwargs["system"] = system
    if tools:
        kwargs["tools"] = tools
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    return kwargs


def count_cache_breakpoints(body: Any) -> int:
    """How many ``cache_control`` markers a request body carries (anywhere)."""
    if isinstance(body, dict):
        own = 1 if "cache_control" in body else 0
        return own + sum(count_cache_breakpoints(v) for v in body.values())
    if isinstance(body, list):
        return sum(count_cache_breakpoints(v) for v in body)
    return 0


def block_from_api(data: dict[str, Any]) -> ContentBlock | None:
    """A content block from wire JSON; ``None`` for block types the harness does not model."""
    kind = data.get("type")
    if kind == "text":
        return TextBlock(text=data.get("text", ""))
    if kind == "tool_use":
        return ToolUseBlock(id=data["id"], name=data["name"], input=data.get("input") or {})
    if kind == "thinking":
        return ThinkingBlock(thinking=data.get("thinking", ""), signature=data.get("signature", ""))
    if kind == "redacted_thinking":
        return RedactedThinkingBlock(data=data.get("data", ""))
    if kind == "tool_result":
        content = data.get("content", "")
        if isinstance(content, list):
            content = "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        return ToolResultBlock(
            tool_use_id=data["tool_use_id"],
            content=str(content),
            is_error=bool(data.get("is_error", False)),
        )
    return None


def stop_reason_from_api(value: Any) -> StopReason | None:
    """Known stop reasons pass; a context-window stop counts as ``max_tokens``; others → None."""
    if value in get_args(StopReason):
        reason: StopReason = value
        return reason
    if value == "model_context_window_exceeded":
        return "max_tokens"
    return None


def usage_from_api(data: dict[str, Any] | None) -> Usage:
    data = data or {}
    return Usage(
        input_tokens=int(data.get("input_tokens") or 0),
        output_tokens=int(data.get("output_tokens") or 0),
        cache_creation_input_tokens=int(data.get("cache_creation_input_tokens") or 0),
        cache_read_input_tokens=int(data.get("cache_read_input_tokens") or 0),
    )


def response_from_api(data: dict[str, Any]) -> ModelResponse:
    """A ``ModelResponse`` from a Messages API ``message`` object (as a dict)."""
    blocks = [block_from_api(b) for b in data.get("content") or []]
    return ModelResponse(
        id=str(data.get("id", "")),
        model=str(data.get("model", "")),
        content=tuple(b for b in blocks if b is not None),
        stop_reason=stop_reason_from_api(data.get("stop_reason")),
        usage=usage_from_api(data.get("usage")),
    )


def _content_from_api(content: Any) -> tuple[ContentBlock, ...]:
    if isinstance(content, str):
        return (TextBlock(text=content),)
    blocks = [block_from_api(b) for b in content]
    return tuple(b for b in blocks if b is not None)


def request_from_api(body: dict[str, Any], *, agent: str) -> ModelRequest:
    """A ``ModelRequest`` from a ``POST /v1/messages`` body (server side; cache markers dropped)."""
    raw_system = body.get("system") or []
    if isinstance(raw_system, str):
        raw_system = [{"type": "text", "text": raw_system}]
    system = tuple(
        SystemBlock(text=b.get("text", ""), cache="cache_control" in b) for b in raw_system
    )
    messages = tuple(
        Message(role=m["role"], content=_content_from_api(m["content"])) for m in body["messages"]
    )
    tools = tuple(
        ToolSpec(
            name=t["name"],
            description=t.get("description", ""),
            input_schema=t.get("input_schema", {}),
        )
        for t in body.get("tools") or []
        if "name" in t
    )
    return ModelRequest(
        model=str(body["model"]),
        system=system,
        messages=messages,
        tools=tools,
        max_tokens=int(body["max_tokens"]),
        agent=agent,
        temperature=body.get("temperature"),
    )


def usage_to_api(usage: Usage) -> dict[str, int]:
    return usage.model_dump()


def response_to_api(response: ModelResponse) -> dict[str, Any]:
    """The non-streaming JSON body of a Messages API response."""
    return {
        "id": response.id,
        "type": "message",
        "role": "assistant",
        "model": response.model,
        "content": [block_to_api(b) for b in response.content],
        "stop_reason": response.stop_reason,
        "stop_sequence": None,
        "usage": usage_to_api(response.usage),
    }
