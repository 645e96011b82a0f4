"""File tools: ``read_file``, ``write_file``, ``edit_file`` (and ``glob``, ``grep`` from search).

Every path is resolved (symlinks followed) and must stay inside ``ctx.root``; the tools refuse
anything else themselves, whatever the policy said.

Read before edit, as Claude Code has it: ``edit_file``, and ``write_file`` of a file that exists,
refuse unless this agent session read the file with ``read_file``, and refuse when the file
changed on disk since that read (size and modification time, then the content hash: a ``touch``
is not a change). The state is ``ctx.file_reads``; the agent's own successful writes update it,
so consecutive edits need no new read. A new file needs no read.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from pydantic import Field

from harness.tools.base import (
    FileStamp,
    PermissionRequest,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    stamp_of,
)
from harness.tools.paths import (
    BINARY_SNIFF_BYTES,
    display_path,
    is_binary,
    resolve_in_root,
    resolve_path,
)
from harness.tools.search import GlobTool, GrepTool
from teamctl_base.models import Frozen

__all__ = [
    "EditFileTool",
    "GlobTool",
    "GrepTool",
    "ReadFileTool",
    "WriteFileTool",
    "file_tools",
]

MAX_LINE_CHARS = 2000


def path_request(
    tool: str, raw: str, ctx: ToolContext, *, write: bool, destructive: bool = False
) -> PermissionRequest:
    """The permission request of a one-path file tool (the resolved path, not yet confined)."""
    resolved = str(resolve_path(raw, ctx))
    return PermissionRequest(
        tool=tool,
        kind="write" if write else "read",
        target=resolved,
        paths=(resolved,),
        read_only=not write,
        destructive=destructive,
    )


NOT_READ = (
    "{path} has not been read in this session: read it with read_file first, then write or edit it."
)
STALE = (
    "{path} has been modified since you read it (by a command, another agent or the user): "
    "read it again with read_file before writing or editing it."
)


def _require_fresh_read(path: Path, ctx: ToolContext) -> None:
    """Refuse a change to an existing file the agent has not read, or that changed since."""
    changed = ctx.file_reads.changed_since_read(path)
    if changed is None:
        raise ToolError(NOT_READ.format(path=display_path(path, ctx)))
    if changed:
        raise ToolError(STALE.format(path=display_path(path, ctx)))


def _write(path: Path, data: bytes, ctx: ToolContext) -> None:
    """Write ``data`` and record the file as the agent now knows it."""
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        st = os.fstat(f.fileno())
    stamp = FileStamp(st.st_size, st.st_mtime_ns, hashlib.sha256(data).hexdigest())
    ctx.file_reads.record(path, stamp)


def _existing_file(raw: str, ctx: ToolContext) -> Path:
    path = resolve_in_root(raw, ctx)
    if not path.exists():
        raise ToolError(f"file not found: {raw}")
    if path.is_dir():
        raise ToolError(f"{raw} is a directory, not a file (use glob to list it)")
    return path


class ReadFileInput(Frozen):
    path: str = Field(description="File to read (relative to the working directory, or absolute).")
    offset: int = Field(1, ge=1, description="1-based line number to start reading at.")
    limit: int = Field(2000, ge=1, le=20_000, description="Maximum number of lines to return.")


class ReadFileTool(Tool[ReadFileInput]):
    name = "read_file"
    description = (
        "Read a text file. Returns lines prefixed with their 1-based line number and a tab. "
        "Use offset/limit to page through long files. Binary files are not shown."
    )
    input_model = ReadFileInput

    def is_read_only(self, args: ReadFileInput) -> bool:
        return True

    def is_concurrency_safe(self, args: ReadFileInput) -> bool:
        return True

    def permission_request(self, args: ReadFileInput, ctx: ToolContext) -> PermissionRequest:
        return path_request(self.name, args.path, ctx, write=False)

    def run(self, args: ReadFileInput, ctx: ToolContext) -> ToolOutput:
        path = _existing_file(args.path, ctx)
        end = args.offset + args.limit
        shown: list[str] = []
        more = False
        count = 0
        stamp = stamp_of(path)  # before reading: a change in between makes the edit re-read
        with path.open("rb") as f:
            if is_binary(f.read(BINARY_SNIFF_BYTES)):
                size = path.stat().st_size
                raise ToolError(f"{args.path} is a binary file ({size} bytes); not shown")
            ctx.file_reads.record(path, stamp)
            f.seek(0)
            for count, raw in enumerate(f, start=1):
                if count >= end:
                    more = True
                    break
                if count >= args.offset:
                    line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    if len(line) > MAX_LINE_CHARS:
                        line = line[:MAX_LINE_CHARS] + " [line truncated]"
                    shown.append(f"{count:6}\t{line}")
        if count == 0:
            return ToolOutput("(empty file)")
        if not shown:
            return ToolOutput(
                f"(the file has {count} lines; offset {args.offset} is past the end)",
                is_error=True,
            )
        if more:
            shown.append(f"(file continues; read on with offset={end})")
        return ToolOutput("\n".join(shown))


class WriteFileInput(Frozen):
    path: str = Field(description="File to write; parent directories are created.")
    content: str = Field(description="The complete new content of the file.")


class WriteFileTool(Tool[WriteFileInput]):
    name = "write_file"
    description = (
        "Create a file or overwrite it with the given content (parent directories are created). "
        "Prefer edit_file for changes to an existing file."
    )
    input_model = WriteFileInput

    def permission_request(self, args: WriteFileInput, ctx: ToolContext) -> PermissionRequest:
        return path_request(self.name, args.path, ctx, write=True)

    def run(self, args: WriteFileInput, ctx: ToolContext) -> ToolOutput:
        path = resolve_in_root(args.path, ctx)
        if path.is_dir():
            raise ToolError(f"{args.path} is a directory")
        existed = path.exists()
        if existed:
            _require_fresh_read(path, ctx)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = args.content.encode("utf-8")
        _write(path, data, ctx)
        verb = "Overwrote" if existed else "Created"
        return ToolOutput(f"{verb} {display_path(path, ctx)} ({len(data)} bytes)")


class EditFileInput(Frozen):
    path: str = Field(description="File to edit.")
    old_string: str = Field(description="Exact text to replace (must match exactly once).")
    new_string: str = Field(description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of one.")


class EditFileTool(Tool[EditFileInput]):
    name = "edit_file"
    description = (
        "Replace old_string with new_string in a file. old_string must match exactly once "
        "(including whitespace and indentation) unless replace_all is true."
    )
    input_model = EditFileInput

    def permission_request(self, args: EditFileInput, ctx: ToolContext) -> PermissionRequest:
        return path_request(self.name, args.path, ctx, write=True)

    def run(self, args: EditFileInput, ctx: ToolContext) -> ToolOutput:
        if not args.old_string:
            raise ToolError("old_string must not be empty (use write_file to create a file)")
        if args.old_string == args.new_string:
            raise ToolError("old_string and new_string are identical; nothing to change")
        path = _existing_file(args.path, ctx)
        data = path.read_bytes()
        if is_binary(data):
            raise ToolError(f"{args.path} is a binary file; refusing to edit it")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(f"{args.path} is not valid UTF-8; refusing to edit it") from exc
        _require_fresh_read(path, ctx)
        shown = display_path(path, ctx)
        count = text.count(args.old_string)
        if count == 0:
            raise ToolError(
                f"old_string not found in {shown}. It must match the file exactly, "
                "including whitespace and indentation; read the file again and retry."
            )
        if count > 1 and not args.replace_all:
            raise ToolError(
                f"old_string matches {count} places in {shown}; include more surrounding "
                "context to make it unique, or set replace_all=true to replace them all."
            )
        new_text = text.replace(args.old_string, args.new_string, -1 if args.replace_all else 1)
        _write(path, new_text.encode("utf-8"), ctx)
        replaced = count if args.replace_all else 1
        plural = "s" if replaced != 1 else ""
        return ToolOutput(f"Edited {shown}: replaced {replaced} occurrence{plural}")


def file_tools() -> list[Tool[Any]]:
    """Fresh instances of read_file, write_file, edit_file, glob and grep."""
    return [ReadFileTool(), WriteFileTool(), EditFileTool(), GlobTool(), GrepTool()]
