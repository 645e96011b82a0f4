"""Path confinement for the file tools (defence in depth: the policy checks paths too)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.tools.base import ToolContext, ToolError

BINARY_SNIFF_BYTES = 8192


def is_binary(sample: bytes) -> bool:
    """Heuristic: a NUL byte in the first block means binary."""
    return b"\x00" in sample[:BINARY_SNIFF_BYTES]


def resolve_path(raw: str, ctx: ToolContext) -> Path:
    """Resolve ``raw`` (relative to ``ctx.cwd``, symlinks followed), not yet confined.

    Raises ``ToolError`` for NUL bytes, empty paths and symlink loops. The path need not exist.
    """
    if "\x00" in raw:
        raise ToolError("path contains a NUL byte")
    if not raw.strip():
        raise ToolError("path is empty")
    candidate = Path(os.path.expanduser(raw)) if raw.startswith("~") else Path(raw)
    if not candidate.is_absolute():
        candidate = ctx.cwd / candidate
    return _resolve(candidate, raw)


def resolve_in_root(raw: str, ctx: ToolContext) -> Path:
    """``resolve_path``, and the result must lie inside ``ctx.root`` or one of
    ``ctx.extra_roots`` (else ``ToolError``)."""
    resolved = resolve_path(raw, ctx)
    root = _resolve(ctx.root, str(ctx.root))
    if resolved.is_relative_to(root):
        return resolved
    for extra in ctx.extra_roots:
        if resolved.is_relative_to(_resolve(extra, str(extra))):
            return resolved
    raise ToolError(f"path {raw!r} resolves to {resolved}, outside the working root {root}")


def _resolve(path: Path, raw: str) -> Path:
    try:
        return path.resolve(strict=False)
    except RuntimeError as exc:  # Python 3.11 reports symlink loops this way
        raise ToolError(f"path {raw!r} cannot be resolved: symlink loop") from exc
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            raise ToolError(f"path {raw!r} cannot be resolved: symlink loop") from exc
        raise ToolError(f"path {raw!r} cannot be resolved: {exc.strerror}") from exc


def display_path(path: Path, ctx: ToolContext) -> str:
    """``path`` relative to the cwd when it is under it, else absolute."""
    cwd = ctx.cwd.resolve()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob with ``**``, ``*``, ``?``, ``[...]`` and ``{a,b}`` over ``/``-paths."""
    out: list[str] = []
    i, n, depth = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
                continue
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise ToolError(f"unbalanced braces in glob {pattern!r}")
    return re.compile("".join(out) + r"\Z", re.DOTALL)
