"""Long-lived notes shared by the agents of one repository: ``.team/memory/``.

``MEMORY.md`` is the index (one line per topic: ``- [topic](topic.md) — description``), each topic
is a Markdown file beside it. Every write takes an exclusive ``flock`` on ``.team/memory/.lock``
and replaces files atomically, so agents in several threads or processes never lose each other's
writes; reads take no lock (they see a whole old or whole new file).
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.errors import HarnessError

_TOPIC = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_LINE = re.compile(r"^- \[(?P<topic>[^\]]+)\]\((?P=topic)\.md\)(?: — (?P<desc>.*))?$")
INDEX_HEADER = "# Memory\n\nTopics (read one with its file name):\n"


class MemoryStoreError(HarnessError):
    """A bad topic name or an unreadable memory file."""


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


class Memory:
    """Read/write API over one memory folder (``<root>/.team/memory``)."""

    def __init__(self, root: Path) -> None:
        self.dir = root / ".team" / "memory"
        self.index_path = self.dir / "MEMORY.md"

    @staticmethod
    def check_topic(topic: str) -> str:
        if not _TOPIC.match(topic):
            raise MemoryStoreError(
                f"bad memory topic {topic!r}: use lowercase letters, digits, '-' and '_'"
            )
        return topic

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / ".lock").open("a") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def index(self) -> dict[str, str]:
        """Topic → description, in index order."""
        if not self.index_path.exists():
            return {}
        out: dict[str, str] = {}
        for line in self.index_path.read_text(encoding="utf-8").splitlines():
            m = _LINE.match(line.strip())
            if m:
                out[m["topic"]] = m["desc"] or ""
        return out

    def index_text(self) -> str:
        """The prompt section: the index lines (empty when there is no memory)."""
        entries = self.index()
        if not entries:
            return ""
        lines = [f"Notes in {self.dir} (read a topic file when relevant):"]
        lines += [f"- {t}.md: {d}" if d else f"- {t}.md" for t, d in entries.items()]
        return "\n".join(lines)

    def read(self, topic: str) -> str:
        """A topic's text ("" when it does not exist)."""
        path = self.dir / f"{self.check_topic(topic)}.md"
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def write(self, topic: str, text: str, description: str | None = None) -> None:
        """Replace a topic's text and (re)index it."""
        self.check_topic(topic)
        with self._locked():
            _atomic_write(self.dir / f"{topic}.md", text)
            self._index_locked(topic, description)

    def append(self, topic: str, text: str, description: str | None = None) -> None:
        """Append a paragraph to a topic (read-modify-write under the lock)."""
        self.check_topic(topic)
        with self._locked():
            path = self.dir / f"{topic}.md"
            old = path.read_text(encoding="utf-8") if path.exists() else ""
            sep = "" if not old or old.endswith("\n") else "\n"
            _atomic_write(path, f"{old}{sep}{text.rstrip()}\n")
            self._index_locked(topic, description)

    def delete(self, topic: str) -> bool:
        """Remove a topic and its index line; False if it did not exist."""
        self.check_topic(topic)
        with self._locked():
            path = self.dir / f"{topic}.md"
            existed = path.exists()
            path.unlink(missing_ok=True)
            entries = self.index()
            if entries.pop(topic, None) is not None or existed:
                self._write_index(entries)
            return existed

    def _index_locked(self, topic: str, description: str | None) -> None:
        entries = self.index()
        if topic in entries and description is None:
            return
        entries[topic] = " ".join((description or "").split())
        self._write_index(entries)

    def _write_index(self, entries: dict[str, str]) -> None:
        lines = [f"- [{t}]({t}.md) — {d}" if d else f"- [{t}]({t}.md)" for t, d in entries.items()]
        _atomic_write(self.index_path, INDEX_HEADER + "".join(f"{line}\n" for line in lines))
