"""A small MCP server for the tests (MCPServer, the SDK's FastMCP, over stdio).

Options: ``--many N`` adds N generated tools ``tool_000``..; ``--collide`` adds two tools whose
names normalise to the same name; ``--slow-start S`` sleeps S seconds before serving (handshake
timeout); ``--crash-on-start`` exits at once with a message on stderr; ``--env-tool`` adds
``environ``, which returns the server's environment as ``NAME=value`` lines.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import EmbeddedResource, TextContent, TextResourceContents, ToolAnnotations

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a5f1e1b20000000049454e44ae426082"
)


def build(many: int = 0, collide: bool = False, env_tool: bool = False) -> MCPServer:
    server = MCPServer("test-basic", version="1.2.3")
    if env_tool:
        server.add_tool(
            lambda: "\n".join(f"{k}={v}" for k, v in sorted(os.environ.items())),
            name="environ",
            description="The server's environment.",
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with the given message."""
        raise ToolError(message)

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def crash() -> str:
        """Kill the server process in the middle of the call."""
        print("crashing on purpose", file=sys.stderr, flush=True)
        os._exit(3)

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def big(n: int) -> str:
        """A text of n characters."""
        return "".join(chr(ord("a") + i % 26) for i in range(n))

    @server.tool(structured_output=False)
    def picture() -> list[Any]:
        """Text, an image and an embedded resource."""
        return [
            TextContent(text="here is a picture"),
            Image(data=PNG, format="png"),
            EmbeddedResource(
                resource=TextResourceContents(uri="memo://inline", text="inline memo")
            ),
        ]

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def wipe(target: str) -> str:
        """Pretend to delete something."""
        return f"wiped {target}"

    @server.resource("memo://greeting", description="A greeting", mime_type="text/plain")
    def greeting() -> str:
        return "hello from the memo"

    @server.resource("memo://data", description="Some bytes", mime_type="application/octet-stream")
    def data() -> bytes:
        return b"\x00\x01\x02"

    for i in range(many):
        server.add_tool(
            _generated(i),
            name=f"tool_{i:03d}",
            description=f"Generated tool number {i} (topic {_topic(i)}).",
        )
    if collide:
        server.add_tool(lambda: "dot", name="get.item", description="dotted name")
        server.add_tool(lambda: "underscore", name="get_item", description="underscored name")
    return server


def _topic(i: int) -> str:
    return ("weather", "finance", "music", "travel", "cooking")[i % 5]


def _generated(i: int) -> Any:
    def tool(query: str = "") -> str:
        return f"tool {i} got {query!r}"

    return tool


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--many", type=int, default=0)
    parser.add_argument("--collide", action="store_true")
    parser.add_argument("--slow-start", type=float, default=0.0)
    parser.add_argument("--crash-on-start", action="store_true")
    parser.add_argument("--env-tool", action="store_true")
    parser.add_argument(
        "--http-port",
        type=int,
        default=None,
        help="serve streamable HTTP instead (0: a free port, logged as 'Uvicorn running on URL')",
    )
    opts = parser.parse_args()
    if opts.crash_on_start:
        print("cannot start: configuration broken", file=sys.stderr, flush=True)
        sys.exit(2)
    if opts.slow_start:
        time.sleep(opts.slow_start)
    server = build(opts.many, opts.collide, opts.env_tool)
    if opts.http_port is not None:
        server.run("streamable-http", host="127.0.0.1", port=opts.http_port)
    else:
        server.run()


if __name__ == "__main__":
    main()
