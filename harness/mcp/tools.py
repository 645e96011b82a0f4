"""MCP tools as harness tools: ``mcp__<server>__<tool>``, resource tools, result rendering.

An ``McpTool`` offers the server's JSON schema to the model unchanged and validates input against
it (``jsonschema``, which the ``mcp`` SDK depends on) before the policy sees the call. It is never
read-only, never concurrency-safe and always counted as destructive, whatever the server's
annotations say: ``readOnlyHint``/``destructiveHint`` are shown in the description and in
``teamctl mcp list`` but grant nothing. Its permission request has no target, so rules are
``mcp__server__tool``, ``mcp__server__*`` or ``mcp__server``; with no rule the answer is ``ask``.

Results are rendered as text (images, audio and binary resources as placeholders, structured
content as JSON when the text does not already carry it); the executor then applies the same size
cap and spill as for built-in tools.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.mcp.client import McpManager, McpToolInfo
from harness.mcp.config import McpError
from harness.ports import ToolSpec
from harness.tools.base import PermissionRequest, Tool, ToolContext, ToolOutput

HINTS = (
    ("readOnlyHint", "read-only", "not read-only"),
    ("destructiveHint", "destructive", "not destructive"),
    ("idempotentHint", "idempotent", "not idempotent"),
    ("openWorldHint", "open-world", "closed-world"),
)


def hints_text(annotations: dict[str, Any]) -> str:
    """The server's annotations in words (``""`` when it declared none)."""
    words = [
        yes if annotations[key] else no
        for key, yes, no in HINTS
        if isinstance(annotations.get(key), bool)
    ]
    return ", ".join(words)


class McpArguments(BaseModel):
    """Input of an MCP tool: any JSON object valid under the tool's schema (set per subclass)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    json_schema: ClassVar[dict[str, Any]] = {"type": "object"}

    @model_validator(mode="before")
    @classmethod
    def _matches_schema(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("the input must be a JSON object")
        problems = schema_problems(cls.json_schema, data)
        if problems:
            raise ValueError("; ".join(problems))
        return data

    def arguments(self) -> dict[str, Any]:
        """The arguments as sent to the server."""
        return dict(self.model_extra or {})


def schema_problems(schema: dict[str, Any], data: Any, limit: int = 5) -> list[str]:
    """Up to ``limit`` ways ``data`` breaks ``schema`` (a schema that is itself broken is not
    enforced here: the server will judge the input)."""
    import jsonschema  # type: ignore[import-untyped]

    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except Exception:
        return []
    out = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))[:limit]:
        where = ".".join(str(p) for p in err.absolute_path) or "(input)"
        out.append(f"{where}: {err.message}")
    return out


class McpTool(Tool[McpArguments]):
    """One tool of one MCP server (a subclass per tool carries its name and schema)."""

    input_model: ClassVar[type[BaseModel]] = McpArguments

    def __init__(self, manager: McpManager, info: McpToolInfo) -> None:
        self.manager = manager
        self.info = info

    @property
    def server(self) -> str:
        return self.info.server

    def is_read_only(self, args: McpArguments) -> bool:
        return False  # annotations are hints from the server, never trusted

    def is_destructive(self, args: McpArguments) -> bool:
        return True

    def permission_request(self, args: McpArguments, ctx: ToolContext) -> PermissionRequest:
        return PermissionRequest(tool=self.name, kind="other", destructive=True)

    def run(self, args: McpArguments, ctx: ToolContext) -> ToolOutput:
        try:
            result = self.manager.call_tool(self.info.server, self.info.name, args.arguments())
        except McpError as exc:
            return ToolOutput(str(exc), is_error=True)
        return render_result(result)

    def spec(self) -> ToolSpec:
        schema = dict(self.info.input_schema)
        schema.setdefault("type", "object")
        return ToolSpec(name=self.name, description=self.description, input_schema=schema)


def make_tool(
    manager: McpManager, info: McpToolInfo, name: str, *, max_description: int = 2048
) -> McpTool:
    """An ``McpTool`` named ``name`` for ``info`` (a fresh subclass holds the class-level name,
    description and argument model the tool contract asks for)."""
    description = info.description.strip() or info.title or f"Tool {info.name}"
    if len(description) > max_description:
        description = description[: max_description - 1].rstrip() + "…"
    hints = hints_text(info.annotations)
    origin = f'MCP server "{info.server}", tool "{info.name}"'
    description += f"\n\n({origin}" + (f"; server hints, unverified: {hints})" if hints else ")")
    args_model = type(
        f"{name}_args", (McpArguments,), {"json_schema": info.input_schema, "__module__": __name__}
    )
    cls = type(
        f"McpTool_{name}",
        (McpTool,),
        {"name": name, "description": description, "input_model": args_model},
    )
    return cast(McpTool, cls(manager, info))


# -- results -----------------------------------------------------------------------------------


def _b64_size(data: str) -> int:
    return len(data) * 3 // 4


def render_block(block: Any) -> str:
    """One MCP content block as text for the model."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} {block.mime_type}, {_b64_size(block.data)} bytes: not shown]"
    if kind == "resource_link":
        mime = f" ({block.mime_type})" if block.mime_type else ""
        return f"[resource link: {block.name} <{block.uri}>{mime}]"
    if kind == "resource":
        return render_contents(block.resource)
    return f"[{kind or type(block).__name__} content: not shown]"


def render_contents(contents: Any) -> str:
    """One resource's contents (text as is, binary as a placeholder)."""
    text = getattr(contents, "text", None)
    if isinstance(text, str):
        return f"[resource {contents.uri}]\n{text}"
    size = _b64_size(str(getattr(contents, "blob", "")))
    mime = contents.mime_type or "binary"
    return f"[resource {contents.uri}: {mime}, {size} bytes: not shown]"


def _carried_by_text(structured: Any, texts: list[str]) -> bool:
    """True when the text blocks already say what ``structured`` says (servers built with the SDK
    send both; ``{"result": x}`` is how they wrap a plain return value)."""
    if not texts:
        return False
    joined = "\n".join(texts)
    candidates: list[Any] = [joined]
    with contextlib.suppress(ValueError):
        candidates.append(json.loads(joined))
    return any(structured == c or structured == {"result": c} for c in candidates)


def render_result(result: Any) -> ToolOutput:
    """A ``CallToolResult`` as a ``ToolOutput`` (``isError`` kept)."""
    blocks = list(getattr(result, "content", None) or [])
    parts = [render_block(b) for b in blocks]
    texts = [b.text for b in blocks if getattr(b, "type", None) == "text"]
    structured = getattr(result, "structured_content", None)
    if structured is not None and not _carried_by_text(structured, texts):
        parts.append("Structured content:\n" + json.dumps(structured, ensure_ascii=False))
    error = bool(getattr(result, "is_error", False))
    text = "\n".join(parts)
    if not text:
        text = "(the MCP tool reported an error without a message)" if error else "(no output)"
    return ToolOutput(text, is_error=error)


# -- resources ---------------------------------------------------------------------------------


class ListResourcesInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    server: str | None = Field(default=None, description="Only this server (default: all).")


class ReadResourceInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    server: str = Field(description="The MCP server that holds the resource.")
    uri: str = Field(description="The resource URI, as list_mcp_resources shows it.")


class _ResourceTool(Tool[Any]):
    def __init__(self, manager: McpManager, servers: list[str]) -> None:
        self.manager = manager
        self.servers = servers

    def is_read_only(self, args: Any) -> bool:
        return True

    def is_concurrency_safe(self, args: Any) -> bool:
        return True

    def permission_request(self, args: Any, ctx: ToolContext) -> PermissionRequest:
        return PermissionRequest(tool=self.name, kind="other", target=args.server, read_only=True)

    def _check(self, server: str) -> None:
        if server not in self.servers:
            raise McpError(f"no MCP server {server!r}; servers: {', '.join(self.servers)}")


class ListMcpResourcesTool(_ResourceTool):
    name = "list_mcp_resources"
    description = "List the resources MCP servers offer (URI, name, description, type)."
    input_model = ListResourcesInput

    def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        lines: list[str] = []
        try:
            if args.server is not None:
                self._check(args.server)
            for server in [args.server] if args.server else self.servers:
                try:
                    found = self.manager.list_resources(server)
                except McpError as exc:
                    lines.append(f"{server}: error: {exc}")
                    continue
                for r in found:
                    mime = f" ({r.mime_type})" if r.mime_type else ""
                    about = f" - {r.description}" if r.description else ""
                    lines.append(f"{server}  {r.uri}  {r.name}{mime}{about}")
        except McpError as exc:
            return ToolOutput(str(exc), is_error=True)
        return ToolOutput("\n".join(lines) or "No MCP resources.")


class ReadMcpResourceTool(_ResourceTool):
    name = "read_mcp_resource"
    description = "Read one resource of an MCP server by URI (see list_mcp_resources)."
    input_model = ReadResourceInput

    def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        try:
            self._check(args.server)
            result = self.manager.read_resource(args.server, args.uri)
        except McpError as exc:
            return ToolOutput(str(exc), is_error=True)
        parts = [render_contents(c) for c in getattr(result, "contents", None) or []]
        return ToolOutput("\n".join(parts) or f"(resource {args.uri} is empty)")
