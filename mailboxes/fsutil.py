"""Durable file primitives: atomic replace, directory fsync, strict JSON.

Every projection and every mailbox file is written through these, so a crash leaves either the
old or the new content, never a mix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mailboxes.errors import MailboxesError

MAX_JSON_DEPTH = 64


class BadJson(MailboxesError):
    """Input that is not strict JSON (NaN/Infinity, duplicate keys, too deep, not UTF-8)."""


Fsync = Callable[[int], None]
"""How the journal and the Maildir make a file or a folder durable: ``os.fsync`` in production.

The one I/O seam of the durable layer: a power-loss simulation in the tests passes a recording
function that snapshots what a real power cut would keep (see ``tests/support/powerloss.py``).
"""


def fsync_dir(path: Path, fsync: Fsync = os.fsync) -> None:
    """Make a rename or create inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (short writes happen on signals and pipes)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data``: tmp file + fsync + rename + fsync(dir)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write (disk full) leaves no empty tmp file
        raise
    if durable:
        fsync_dir(path.parent)


def remove_orphan_tmp(folder: Path) -> list[Path]:
    """Delete ``*.tmp`` files left by writers that died mid-write; returns what was removed."""
    removed = []
    if folder.is_dir():
        for tmp in folder.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _reject_constant(name: str) -> Any:
    raise BadJson(f"non-finite number {name} is not allowed")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise BadJson(f"duplicate key {key!r}")
        result[key] = value
    return result


def _depth(value: Any, limit: int) -> None:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise BadJson(f"nesting deeper than {limit} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def strict_loads(raw: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse strict JSON: no NaN/Infinity, no duplicate keys, bounded nesting."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadJson(f"not UTF-8: {exc}") from None
    # Bound nesting before parsing so a hostile input cannot exhaust the C parser's recursion.
    depth = 0
    in_string = False
    escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                raise BadJson(f"nesting deeper than {max_depth} levels")
        elif char in "]}":
            depth -= 1
    try:
        value = json.loads(raw, parse_constant=_reject_constant, object_pairs_hook=_unique_object)
    except json.JSONDecodeError as exc:
        raise BadJson(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise BadJson(f"nesting deeper than {max_depth} levels") from None
    return value


def canonical_dumps(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, no NaN, UTF-8 kept as is."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
