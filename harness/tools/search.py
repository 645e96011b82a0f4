"""Search tools: ``glob`` (find files by name) and ``grep`` (find lines by regex), pure Python.

Both walk without following directory symlinks, skip ``.git``, skip entries whose symlink leads
outside the root, and list results in sorted path order (deterministic output).

Files and directories a permission deny rule forbids reading (``Read(./.env)``,
``Read(**/*.pem)``; ``ToolContext.read_guard``) are skipped in every mode: their content and
their names stay out of the output, which only says how many paths were skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import Field

from harness.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolOutput
from harness.tools.paths import (
    BINARY_SNIFF_BYTES,
    display_path,
    glob_to_regex,
    is_binary,
    resolve_in_root,
    resolve_path,
)
from teamctl_base.models import Frozen

SKIP_DIRS = frozenset({".git"})
MAX_GREP_FILE_BYTES = 20 * 1024 * 1024
MAX_MATCH_LINE_CHARS = 500


def _search_request(tool: str, raw: str | None, ctx: ToolContext) -> PermissionRequest:
    resolved = str(resolve_path(raw or ".", ctx))
    return PermissionRequest(
        tool=tool, kind="read", target=resolved, paths=(resolved,), read_only=True
    )


def _search_base(raw: str | None, ctx: ToolContext) -> Path:
    base = resolve_in_root(raw or ".", ctx)
    if not base.exists():
        raise ToolError(f"path not found: {raw}")
    return base


class Skipped:
    """Counts the paths a search leaves out because a deny rule forbids reading them."""

    def __init__(self, tool: str, ctx: ToolContext) -> None:
        self.tool, self.ctx, self.count = tool, ctx, 0

    def denied(self, path: Path) -> bool:
        """True (and counted) when a deny rule forbids reading ``path``."""
        guard = self.ctx.read_guard
        if guard is None or guard.denied_read(self.tool, path, self.ctx) is None:
            return False
        self.count += 1
        return True

    def note(self) -> str:
        """The line that says how many paths were skipped ("" when none)."""
        if not self.count:
            return ""
        paths = "1 path" if self.count == 1 else f"{self.count} paths"
        return f"({paths} skipped: permission deny rules forbid reading them)"


def walk_files(
    base: Path,
    root: Path,
    max_depth: int | None = None,
    skip_dir: Callable[[Path], bool] | None = None,
) -> Iterator[Path]:
    """Files under ``base`` in sorted order: no ``.git``, no symlinked dirs, nothing outside root.

    ``max_depth`` limits how many directory levels below ``base`` are entered; a directory for
    which ``skip_dir`` is true is not entered.
    """
    root = root.resolve()
    base_depth = len(base.parts)
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in SKIP_DIRS and (skip_dir is None or not skip_dir(here / d))
        )
        if max_depth is not None and len(here.parts) - base_depth >= max_depth:
            dirnames[:] = []
        for name in sorted(filenames):
            path = here / name
            if path.is_symlink() and not _links_inside(path, root):
                continue
            yield path


def _links_inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve(strict=True).is_relative_to(root)
    except (OSError, RuntimeError):  # dangling link or loop
        return False


class GlobInput(Frozen):
    pattern: str = Field(description="Glob such as '**/*.py' or 'src/*.{ts,tsx}'.")
    path: str | None = Field(None, description="Directory to search (default: working dir).")


class GlobTool(Tool[GlobInput]):
    name = "glob"
    description = (
        "Find files whose path (relative to `path`) matches a glob. `*` and `?` stay within one "
        "directory, `**` crosses directories, `{a,b}` gives alternatives. Sorted by path."
    )
    input_model = GlobInput
    max_results = 1000

    def is_read_only(self, args: GlobInput) -> bool:
        return True

    def is_concurrency_safe(self, args: GlobInput) -> bool:
        return True

    def permission_request(self, args: GlobInput, ctx: ToolContext) -> PermissionRequest:
        return _search_request(self.name, args.path, ctx)

    def run(self, args: GlobInput, ctx: ToolContext) -> ToolOutput:
        if args.pattern.startswith("/") or "\x00" in args.pattern:
            raise ToolError("pattern must be relative to `path` (put the directory in `path`)")
        base = _search_base(args.path, ctx)
        if not base.is_dir():
            raise ToolError(f"{args.path} is not a directory")
        rx = glob_to_regex(args.pattern)
        depth = None if "**" in args.pattern else args.pattern.count("/")
        skipped = Skipped(self.name, ctx)
        found: list[str] = []
        extra = 0
        for path in walk_files(base, ctx.root, depth, skipped.denied):
            if rx.match(path.relative_to(base).as_posix()) and not skipped.denied(path):
                if len(found) < self.max_results:
                    found.append(display_path(path.resolve(), ctx))
                else:
                    extra += 1
        if not found:
            return ToolOutput(_joined(f"No files match {args.pattern!r}", skipped.note()))
        if extra:
            found.append(f"(truncated: {extra} more files match; narrow the pattern)")
        return ToolOutput(_joined(*found, skipped.note()))


class GrepInput(Frozen):
    pattern: str = Field(description="Python regular expression, matched against each line.")
    path: str | None = Field(None, description="File or directory (default: working dir).")
    glob: str | None = Field(
        None, description="Only files matching this glob ('*.py'; with '/' it matches the path)."
    )
    output_mode: Literal["files_with_matches", "content", "count"] = Field(
        "files_with_matches",
        description="files_with_matches: file paths; content: matching lines; count: per file.",
    )
    case_insensitive: bool = False
    context: int = Field(0, ge=0, le=20, description="Lines of context (content mode).")
    head_limit: int = Field(250, ge=1, le=5000, description="Maximum output entries.")


class GrepTool(Tool[GrepInput]):
    name = "grep"
    description = (
        "Search file contents with a regular expression (Python `re` syntax), line by line. "
        "Skips .git and binary files. Modes: files_with_matches (default), content, count."
    )
    input_model = GrepInput

    def is_read_only(self, args: GrepInput) -> bool:
        return True

    def is_concurrency_safe(self, args: GrepInput) -> bool:
        return True

    def permission_request(self, args: GrepInput, ctx: ToolContext) -> PermissionRequest:
        return _search_request(self.name, args.path, ctx)

    def run(self, args: GrepInput, ctx: ToolContext) -> ToolOutput:
        try:
            rx = re.compile(args.pattern, re.IGNORECASE if args.case_insensitive else 0)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {args.pattern!r}: {exc}") from exc
        base = _search_base(args.path, ctx)
        skipped = Skipped(self.name, ctx)
        files = [base] if base.is_file() else walk_files(base, ctx.root, None, skipped.denied)
        name_rx = glob_to_regex(args.glob) if args.glob else None
        out: list[str] = []
        truncated = False
        for path in files:
            if name_rx is not None and path != base:
                rel = path.relative_to(base).as_posix()
                if not name_rx.match(rel if "/" in (args.glob or "") else path.name):
                    continue
            if skipped.denied(path):
                continue
            lines = _text_lines(path)
            if lines is None:
                continue
            hits = [i for i, line in enumerate(lines) if rx.search(line)]
            if not hits:
                continue
            shown = display_path(path.resolve(), ctx)
            if args.output_mode == "files_with_matches":
                out.append(shown)
            elif args.output_mode == "count":
                out.append(f"{shown}:{len(hits)}")
            else:
                out.extend(_content_lines(shown, lines, hits, args.context))
            if len(out) > args.head_limit:
                truncated = True
                out = out[: args.head_limit]
                break
        if not out:
            return ToolOutput(_joined(f"No matches for {args.pattern!r}", skipped.note()))
        if truncated:
            out.append(f"(stopped at head_limit={args.head_limit}; narrow the search)")
        return ToolOutput(_joined(*out, skipped.note()))


def _joined(*lines: str) -> str:
    return "\n".join(line for line in lines if line)


def _text_lines(path: Path) -> list[str] | None:
    """The file's lines, or ``None`` for unreadable, huge or binary files."""
    try:
        if path.stat().st_size > MAX_GREP_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if is_binary(data[:BINARY_SNIFF_BYTES]):
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def _content_lines(shown: str, lines: list[str], hits: list[int], context: int) -> list[str]:
    """``path:n:line`` for matches, ``path-n-line`` for context, ``--`` between groups."""
    out: list[str] = []
    hit_set = set(hits)
    last = -2
    for hit in hits:
        lo, hi = max(0, hit - context), min(len(lines) - 1, hit + context)
        lo = max(lo, last + 1)
        if context and out and lo > last + 1:
            out.append("--")
        for i in range(lo, hi + 1):
            line = lines[i][:MAX_MATCH_LINE_CHARS]
            sep = ":" if i in hit_set else "-"
            out.append(f"{shown}{sep}{i + 1}{sep}{line}")
        last = max(last, hi)
    return out
