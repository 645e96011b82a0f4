"""The on-disk line format of ``.team/journal.jsonl`` and a read-only checker.

A line is the canonical JSON of the event (sorted keys, no spaces) with a CRC32 of exactly those
bytes spliced in as a last member, then ``\\n``::

    {"actor":"lead","data":{...},"op_id":null,"seq":1,"ts":1.5,"type":"team.created","v":1,"crc":"1a2b3c4d"}

So every line is still a JSON object (``jq`` works), and checking it needs no re-serialisation:
strip the fixed-size ``,"crc":"xxxxxxxx"}`` suffix, put back ``}``, CRC the bytes. Line ``n``
holds seq ``n``.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from math import isfinite
from pathlib import Path
from typing import Any

from mailboxes.errors import InvalidEvent
from mailboxes.events import Event
from mailboxes.fsutil import canonical_dumps

_CRC_KEY = b',"crc":"'
_SUFFIX_LEN = len(_CRC_KEY) + 8 + 2  # ,"crc":"xxxxxxxx"}
CHUNK = 1 << 20
_from_json = Event.from_json


def _stdlib_parse(body: bytes) -> Any:
    return json.loads(body.decode("utf-8"))


parse_json: Callable[[bytes], Any]
try:  # jiter (the JSON parser under pydantic, a dependency of anthropic): twice json's speed
    from jiter import from_json as parse_json
except ImportError:  # pragma: no cover - the standard library's parser: the same answers
    parse_json = _stdlib_parse


class BadLine(Exception):
    """A line that is not a well-framed, CRC-correct event (internal to the journal).

    ``torn`` lines (broken frame or CRC) are what a crash mid-write leaves: repairable at the end
    of the file. A CRC-correct line with the wrong content was written by something else.
    """

    def __init__(self, reason: str, *, torn: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.torn = torn


def encode(event: Event, data: bytes | None = None) -> bytes:
    """The framed line for ``event``, newline included. ``data``: ``canonical_json`` of
    ``event.data`` already made (UTF-8), so it is not serialised twice."""
    try:
        if data is None:
            data = canonical_json(event.data).encode("utf-8")
        ts = event.ts
        if not isfinite(ts):
            raise ValueError("Out of range float values are not JSON compliant")
        # The canonical JSON of the envelope (sorted keys, no spaces), put together around the
        # data: every field but ``data`` is a string, an int, a float or null (``Event``).
        op_id = event.op_id
        body = b"".join(
            (
                b'{"actor":',
                _string(event.actor).encode("utf-8"),
                b',"data":',
                data,
                b',"op_id":',
                b"null" if op_id is None else _string(op_id).encode("utf-8"),
                b',"seq":%d,"ts":' % event.seq,
                float.__repr__(ts).encode("ascii"),
                b',"type":',
                _string(event.type).encode("utf-8"),
                b',"v":%d}' % event.v,
            )
        )
    except (TypeError, ValueError) as exc:
        raise InvalidEvent(f"event {event.seq} is not plain JSON: {exc}") from None
    return b'%s,"crc":"%08x"}\n' % (body[:-1], zlib.crc32(body))


def canonical_json(value: Any) -> str:
    """``mailboxes.fsutil.canonical_dumps(value)`` (sorted keys, no spaces, no NaN, UTF-8 kept
    as is), the same text and errors, without ``json.dumps``' set-up of an encoder per call (a
    journal append serialises its events under the journal lock)."""
    if _C_ENCODER is None:  # pragma: no cover - CPython without its C accelerator
        return canonical_dumps(value)
    if value.__class__ is str:
        return _string(value)
    # A fresh ``markers`` per call, as json.dumps' check_circular: a cycle is a ValueError.
    return "".join(_C_ENCODER({}, _DEFAULT, _string, None, ":", ",", True, False, False)(value, 0))


_string = encode_basestring
_DEFAULT = json.JSONEncoder().default  # the TypeError json.dumps raises for other objects
_C_ENCODER = c_make_encoder


def decode_event(raw: bytes, seq: int) -> Event:
    """The event on one line (without its newline) that must hold ``seq``, or ``BadLine``."""
    if len(raw) <= _SUFFIX_LEN or raw[-_SUFFIX_LEN:-10] != _CRC_KEY or raw[-2:] != b'"}':
        raise BadLine("not a framed journal line (torn or overwritten)", torn=True)
    body = raw[:-_SUFFIX_LEN] + b"}"
    if b"%08x" % zlib.crc32(body) != raw[-10:-2]:
        raise BadLine("CRC mismatch (bytes changed after writing)", torn=True)
    # CRC-correct but not an event: written by something else.
    try:
        parsed = parse_json(body)
    except (ValueError, RecursionError) as exc:  # not UTF-8 or not JSON, or nested too deep
        raise BadLine(f"not an event: invalid JSON: {exc}") from None
    try:
        event = _from_json(parsed)
    except InvalidEvent as exc:
        raise BadLine(f"not an event: {exc}") from None
    if event.seq != seq:
        raise BadLine(f"seq {event.seq} where {seq} was expected")
    return event


def iter_lines(fd: int, start: int, end: int) -> Iterator[tuple[int, bytes, bool]]:
    """``(offset, line without newline, complete)`` for the bytes ``[start, end)`` of ``fd``.

    Only the last item can be incomplete (no newline before ``end``).
    """
    pos = start
    offset = start
    pending = b""
    while pos < end:
        chunk = os.pread(fd, min(CHUNK, end - pos), pos)
        if not chunk:  # the file shrank under us: what is left is the end
            break
        pos += len(chunk)
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            yield offset, line, True
            offset += len(line) + 1
    if pending:
        yield offset, pending, False


@dataclass(frozen=True)
class JournalReport:
    """What ``check_journal`` found. ``ok`` means every line is good."""

    path: str
    lines: int
    """Lines in the file, a torn last one included."""
    last_seq: int
    """The last seq before the first problem (0 for none)."""
    problem: str | None = None
    problem_line: int | None = None
    """1-based line number of the first problem."""
    repairable: bool = False
    """The problem is the last line: the next open truncates it (``journal.tail_repaired``)."""

    @property
    def ok(self) -> bool:
        return self.problem is None


def check_journal(path: Path) -> JournalReport:
    """Read ``path`` and report its health. Never modifies anything (no lock, no repair)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        lines = 0
        last_seq = 0
        problem: tuple[str, int, bool] | None = None
        for offset, raw, complete in iter_lines(fd, 0, size):
            lines += 1
            if problem is not None:
                continue
            last = offset + len(raw) + (1 if complete else 0) >= size
            if not complete:
                problem = ("last line has no newline (torn write)", lines, True)
                continue
            try:
                decode_event(raw, last_seq + 1)
            except BadLine as exc:
                problem = (exc.reason, lines, last and exc.torn)
                continue
            last_seq += 1
    finally:
        os.close(fd)
    if problem is None:
        return JournalReport(path=str(path), lines=lines, last_seq=last_seq)
    reason, line_no, repairable = problem
    return JournalReport(
        path=str(path),
        lines=lines,
        last_seq=last_seq,
        problem=reason,
        problem_line=line_no,
        repairable=repairable,
    )
