"""Append-only conversation transcripts (``<dir>/<agent>.jsonl``) and resume.

One JSON object per line, each flushed before the call returns; the file is mode 0600 (only its
owner reads it). What a model answered (an assistant message), a compaction boundary and a goal
record are fsynced before the call returns, with every line before them; the input side (``meta``,
a user message, an ``amend``) is made durable by the next such fsync or by ``close``, not on its
own: a power cut that loses it loses what a crash just before it was written loses, which resume
already handles (a turn's input is offered again, mail that was not acked is read again, a tool
batch without its results is answered "outcome unknown"), and it keeps fsyncs off the path between
a model answer's tools and the next call:

- ``{"type": "meta", ...}``: session facts (agent, session id); informational.
- ``{"type": "message", "message": {...}}``: one message appended to the conversation.
- ``{"type": "amend", "blocks": [...]}``: blocks appended to the last (user) message.
- ``{"type": "compact_boundary", "trigger", "pre_tokens", "post_tokens", "messages": [...]}``:
  the history was rewritten; ``messages`` is the whole new list.
- ``{"type": "goal", "kind": "goal.set"|"goal.evaluated"|"goal.cleared", "fields": {...}}``: the
  agent's goal and each evaluation (``harness.goal``; ``teamctl ask`` has no team journal).

Folding the lines in order rebuilds the exact message list, so a resumed agent's next request is
byte-identical to the one it would have sent. A torn last line (a crash mid-write) is dropped; a
bad line anywhere else is a ``TranscriptError``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import TypeAdapter, ValidationError

from harness.errors import HarnessError
from harness.ports import ContentBlock, Message, ToolResultBlock, ToolUseBlock

_BLOCKS: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])

OUTCOME_UNKNOWN = (
    "The session stopped while this tool was running; its outcome is unknown. "
    "Verify the current state before retrying."
)


class TranscriptError(HarnessError):
    """A transcript line (other than a torn last line) cannot be parsed."""


def _dump(message: Message) -> dict[str, Any]:
    return message.model_dump(mode="json", exclude_none=True)


TranscriptSink = Callable[[str], None]
"""Told each line (without its newline) after it is written to the file: how a host shares its
agents' transcripts beyond its own disk (docs/SCALE-OUT.md, "Transcripts and job output"). The
harness knows nothing of where it goes; a sink must not raise (it logs its own failures)."""


class Transcript:
    """Writer for one agent's transcript. Single writer: the process hosting the agent."""

    def __init__(
        self, path: Path, *, fsync: bool = True, sink: TranscriptSink | None = None
    ) -> None:
        self.path = path
        self.fsync = fsync
        self.sink = sink
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = None
        self._unsynced = False  # lines written since the last fsync

    @classmethod
    def for_agent(
        cls, directory: Path, agent: str, *, fsync: bool = True, sink: TranscriptSink | None = None
    ) -> Transcript:
        return cls(directory / f"{agent}.jsonl", fsync=fsync, sink=sink)

    def _open(self) -> TextIO:
        # A torn last line (crash mid-write) is cut off so the next record starts on its own line.
        if self.path.exists():
            with self.path.open("rb+") as f:
                data = f.read()
                if data and not data.endswith(b"\n"):
                    f.truncate(data.rfind(b"\n") + 1)
        # Mode 0600: a transcript holds all the agent read (docs/ARCHITECTURE.md, "Files on disk").
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a transcript an older version left readable by others
            return os.fdopen(fd, "a", encoding="utf-8")
        except BaseException:
            os.close(fd)
            raise

    def _write(self, record: dict[str, Any], *, durable: bool = True) -> None:
        if self._file is None:
            self._file = self._open()
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        self._file.write(line + "\n")
        self._file.flush()
        if self.fsync:
            if durable:
                os.fsync(self._file.fileno())
            self._unsynced = not durable
        if self.sink is not None:
            self.sink(line)

    def meta(self, **data: Any) -> None:
        self._write({"type": "meta", **data}, durable=False)

    def message(self, message: Message) -> None:
        record = {"type": "message", "message": _dump(message)}
        self._write(record, durable=message.role == "assistant")

    def amend(self, blocks: Sequence[ContentBlock]) -> None:
        self._write(
            {
                "type": "amend",
                "blocks": [b.model_dump(mode="json", exclude_none=True) for b in blocks],
            },
            durable=False,
        )

    def compact_boundary(
        self, messages: Sequence[Message], *, trigger: str, pre_tokens: int, post_tokens: int
    ) -> None:
        self._write(
            {
                "type": "compact_boundary",
                "trigger": trigger,
                "pre_tokens": pre_tokens,
                "post_tokens": post_tokens,
                "messages": [_dump(m) for m in messages],
            }
        )

    def goal(self, kind: str, fields: dict[str, Any]) -> None:
        self._write({"type": "goal", "kind": kind, "fields": fields})

    def close(self) -> None:
        """Close the file, every line written durable first."""
        if self._file is not None:
            if self._unsynced:
                os.fsync(self._file.fileno())
                self._unsynced = False
            self._file.close()
            self._file = None


@dataclass
class LoadedTranscript:
    """The folded state of a transcript file."""

    messages: list[Message] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    boundaries: int = 0
    torn_tail: bool = False
    goal: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """The ``goal`` records in order, as ``(kind, fields)``."""


def load_transcript(path: Path) -> LoadedTranscript:
    """Fold a transcript file into its message list (a missing file is an empty transcript)."""
    if not path.exists():
        return LoadedTranscript()
    return fold_transcript(path.read_text(encoding="utf-8", errors="replace"), str(path))


def fold_transcript(raw: str, where: str) -> LoadedTranscript:
    """Fold a transcript's text (its JSONL lines, wherever they were stored) into its message
    list; ``where`` names it in a ``TranscriptError``."""
    out = LoadedTranscript()
    lines = raw.split("\n")
    complete = raw.endswith("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for n, line in enumerate(lines, start=1):
        last = n == len(lines)
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not an object")
            _apply(out, record)
        except (ValueError, ValidationError, KeyError, TypeError) as exc:
            if last and not complete:
                out.torn_tail = True
                break
            raise TranscriptError(
                f"{where}:{n}: bad transcript line ({exc}): {line[:200]!r}"
            ) from exc
    return out


def _apply(state: LoadedTranscript, record: dict[str, Any]) -> None:
    kind = record["type"]
    if kind == "message":
        state.messages.append(Message.model_validate(record["message"]))
    elif kind == "amend":
        if not state.messages:
            raise ValueError("amend with no message")
        last = state.messages[-1]
        blocks = _BLOCKS.validate_python(record["blocks"])
        state.messages[-1] = Message(role=last.role, content=(*last.content, *blocks))
    elif kind == "compact_boundary":
        state.messages = [Message.model_validate(m) for m in record["messages"]]
        state.boundaries += 1
    elif kind == "goal":
        state.goal.append((str(record["kind"]), dict(record["fields"])))
    elif kind == "meta":
        state.meta.update({k: v for k, v in record.items() if k != "type"})
    else:
        raise ValueError(f"unknown record type {kind!r}")


def dangling_calls(messages: Sequence[Message]) -> list[ToolUseBlock]:
    """The tool_use blocks of a last assistant message that has no tool_result message."""
    if not messages or messages[-1].role != "assistant":
        return []
    return [b for b in messages[-1].content if isinstance(b, ToolUseBlock)]


def repair_dangling(
    messages: Sequence[Message],
    *,
    is_read_only: Callable[[ToolUseBlock], bool],
    rerun: Callable[[list[ToolUseBlock]], list[ToolResultBlock]],
) -> Message | None:
    """The user message that answers a crash-interrupted tool batch, or ``None`` if the last
    message is not a dangling batch. Read-only calls are re-run (through ``rerun``); the others
    get an ``is_error`` "outcome unknown, verify" result, as they may have had effects."""
    calls = dangling_calls(messages)
    if not calls:
        return None
    safe = [c for c in calls if is_read_only(c)]
    rerun_results = {r.tool_use_id: r for r in (rerun(safe) if safe else [])}
    results = [
        rerun_results.get(c.id)
        or ToolResultBlock(tool_use_id=c.id, content=OUTCOME_UNKNOWN, is_error=True)
        for c in calls
    ]
    return Message(role="user", content=tuple(results))
