"""Bounded tool output: a size cap, and spill of oversize output to a content-addressed file.

The full output of an oversize result is written to ``<outputs_dir>/<sha256 of the bytes>``; the
model sees a head + tail preview and that path. Writing is atomic (temp file + rename), so a file
with a given name always holds exactly the bytes its name hashes; spilling the same output twice
yields the same file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

DEFAULT_HEAD_BYTES = 12_000
DEFAULT_TAIL_BYTES = 8_000


def spill_bytes(data: bytes, outputs_dir: Path) -> Path:
    """Write ``data`` to ``outputs_dir/<sha256>`` (idempotent) and return that path."""
    outputs_dir.mkdir(parents=True, exist_ok=True)
    path = outputs_dir / hashlib.sha256(data).hexdigest()
    if path.is_file() and path.stat().st_size == len(data):
        return path
    fd, tmp = tempfile.mkstemp(dir=outputs_dir, prefix=".spill-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def truncation_notice(omitted: int, unit: str, total: int, path: Path | None) -> str:
    """The line placed between head and tail of a truncated output."""
    where = f"full output saved to {path}" if path else "full output not saved"
    return f"[... {omitted} {unit} omitted of {total}; {where} ...]"


def cap_text(text: str, *, max_chars: int, outputs_dir: Path | None) -> str:
    """Return ``text`` unchanged if it fits in ``max_chars``, else a head + tail preview.

    The preview (notice included) stays within ``max_chars`` plus the length of the notice line;
    the full text is spilled (UTF-8) when ``outputs_dir`` is given.
    """
    if len(text) <= max_chars:
        return text
    path = spill_bytes(text.encode("utf-8"), outputs_dir) if outputs_dir is not None else None
    head_n = max_chars * 3 // 5
    tail_n = max_chars - head_n
    head = text[:head_n]
    tail = text[len(text) - tail_n :]
    notice = truncation_notice(len(text) - head_n - tail_n, "characters", len(text), path)
    return f"{head}\n{notice}\n{tail}"


@dataclass(frozen=True)
class CapturedOutput:
    """What a ``BoundedCapture`` kept: all bytes if they fit, else head + tail and the spill."""

    head: bytes
    tail: bytes
    total_bytes: int
    spill_path: Path | None

    @property
    def truncated(self) -> bool:
        return self.total_bytes > len(self.head) + len(self.tail)

    def render(self) -> str:
        """Decode for the model, with a truncation notice between head and tail when needed."""
        head = self.head.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + self.tail.decode("utf-8", errors="replace")
        omitted = self.total_bytes - len(self.head) - len(self.tail)
        notice = truncation_notice(omitted, "bytes", self.total_bytes, self.spill_path)
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n{notice}\n{tail}"


class BoundedCapture:
    """Accumulates a byte stream in bounded memory (head + tail) while spilling it whole.

    Until the stream outgrows ``head_bytes + tail_bytes`` everything stays in memory and no file
    is created. Past that, the bytes seen so far and every later chunk go to a temp file in
    ``outputs_dir`` (hashed as they stream); ``close`` renames it to its sha256. Memory use is
    bounded by the limits plus one chunk, whatever the stream's size. Not thread-safe.
    """

    def __init__(
        self,
        outputs_dir: Path | None,
        *,
        head_bytes: int = DEFAULT_HEAD_BYTES,
        tail_bytes: int = DEFAULT_TAIL_BYTES,
    ) -> None:
        self._dir = outputs_dir
        self._head_n = head_bytes
        self._tail_n = tail_bytes
        self._pending = bytearray()  # the whole stream while it still fits
        self._head = b""
        self._tail = bytearray()
        self._total = 0
        self._file: BinaryIO | None = None
        self._tmp: str | None = None
        self._hash = hashlib.sha256()
        self._overflowed = False

    @property
    def total_bytes(self) -> int:
        return self._total

    def feed(self, chunk: bytes) -> None:
        """Take the next chunk of the stream."""
        if not chunk:
            return
        self._total += len(chunk)
        if not self._overflowed:
            self._pending += chunk
            if len(self._pending) <= self._head_n + self._tail_n:
                return
            self._overflowed = True
            self._head = bytes(self._pending[: self._head_n])
            self._tail = self._pending[self._head_n :]
            self._start_spill(bytes(self._pending))
            self._pending = bytearray()
        else:
            self._tail += chunk
            self._write(chunk)
        if len(self._tail) > self._tail_n:
            del self._tail[: len(self._tail) - self._tail_n]

    def close(self) -> CapturedOutput:
        """Finish the stream; rename the spill file to its content hash."""
        if not self._overflowed:
            data = bytes(self._pending)
            return CapturedOutput(data, b"", self._total, None)
        path: Path | None = None
        if self._file is not None and self._tmp is not None and self._dir is not None:
            self._file.close()
            self._file = None
            path = self._dir / self._hash.hexdigest()
            os.replace(self._tmp, path)
            self._tmp = None
        return CapturedOutput(self._head, bytes(self._tail), self._total, path)

    def discard(self) -> None:
        """Abandon the capture (on an error path): remove any temp file."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)
            self._tmp = None

    def _start_spill(self, data: bytes) -> None:
        if self._dir is None:
            return
        self._dir.mkdir(parents=True, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(dir=self._dir, prefix=".spill-")
        self._file = os.fdopen(fd, "wb")
        self._write(data)

    def _write(self, data: bytes) -> None:
        if self._file is not None:
            self._file.write(data)
            self._hash.update(data)
