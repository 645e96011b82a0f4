"""``FileBlobs``: the ``BlobStore`` of the file backend, one file per blob in a folder
(``.team/snapshots/``).

A blob is written to a temporary file and renamed over the old one, so a reader sees whole
blobs only. Nothing is fsynced: a blob is a cache that its reader checks (a state snapshot
carries its own checksum), so one lost to a crash costs a slower open, never a wrong answer.
"""

from __future__ import annotations

import re
from pathlib import Path

from mailboxes.fsutil import atomic_write

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_blob_name(name: str) -> str:
    """``name`` if it is a plain file name (letters, digits, ``.``, ``_``, ``-``)."""
    if not _NAME.match(name) or ".." in name:
        raise ValueError(f"bad blob name {name!r}")
    return name


class FileBlobs:
    """Blobs as files in ``folder`` (created on the first ``put``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def get(self, name: str) -> bytes | None:
        try:
            return (self.folder / check_blob_name(name)).read_bytes()
        except FileNotFoundError:
            return None

    def put(self, name: str, data: bytes) -> None:
        path = self.folder / check_blob_name(name)
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, durable=False)

    def close(self) -> None:
        """Nothing to release (the ``BlobStore`` port's ``close``)."""
