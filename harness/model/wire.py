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


def request_to_api(request: ModelRequest, *, model: str, max_tokens: int) -> dict[str, Any]:
    """Keyword arguments for ``messages.create`` (without ``stream``).

    Tools keep the caller's order (a stable prefix). Breakpoints: system blocks marked ``cache``
    (the last ones win when there are more than three) plus one on the last message's last block;
    never more than ``MAX_CACHE_BREAKPOINTS``.
    """
    marked = [i for i, b in enumerate(request.system) if b.cache]
    keep = set(marked[-(MAX_CACHE_BREAKPOINTS - 1) :]) if request.messages else set(marked[-4:])
    system: list[dict[str, Any]] = []
    for i, sys_block in enumerate(request.system):
        entry: dict[str, Any] = {"type": "text", "text": sys_block.text}
        if i in keep:
            entry["cache_control"] = dict(_EPHEMERAL)
        system.append(entry)
    contents = [[block_to_api(b) for b in m.content] for m in request.messages]
    for last in reversed(contents[-1] if contents else []):
        if last["type"] in _CACHEABLE:
            last["cache_control"] = dict(_EPHEMERAL)
            break
    messages = [
        {"role": m.role, "content": content}
        for m, content in zip(request.messages, contents, strict=True)
    ]
    kwargs: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system:
        kwargs["system"] = system
    if request.tools:
        kwargs["tools"] = [t.model_dump() for t in request.tools]
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
