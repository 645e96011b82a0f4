"""``remember``, ``recall``, ``forget``: the model's tools over the shared memory store
(``harness.context.memory.Memory``, ``.team/memory/``).

They touch nothing but the store: a topic name is checked (lowercase letters, digits, ``-``,
``_``), so no call can reach another file. Writes need no approval, as Claude Code's memory is the
user's own notes file: the permission request is a non-file ``other`` request naming the topic, so
rules such as ``remember``, ``forget(old-*)`` or ``recall`` in ``permissions.deny``/``ask`` decide,
and with no rule it is allowed. ``recall`` is read-only (plan mode allows it); ``remember`` and
``forget`` are not, so plan mode refuses them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.context.memory import Memory, MemoryStoreError
from harness.tools.base import PermissionRequest, Tool, ToolContext, ToolOutput

MEMORY_GUIDANCE = (
    "Memory: notes in {dir} persist across sessions and are shared by every agent working in "
    "this repository (one Markdown file per topic; the index is listed under Memory below when "
    "there are notes). Use remember(topic, text) to keep what will matter next time: a "
    "convention, a command that works, a decision and its reason, a pitfall you hit. recall() "
    "lists the topics, recall(topic) reads one, recall(query=...) searches; forget(topic) removes "
    "a topic that is wrong or stale. Keep notes short and factual; never store secrets. The "
    "project instructions (CLAUDE.md, AGENTS.md) belong to the user: memory does not change them."
)
"""Static prompt text (``{dir}`` is filled in) for an agent that has the memory tools."""

MAX_RECALL_HITS = 50


def _request(tool: str, topic: str | None, *, read_only: bool) -> PermissionRequest:
    return PermissionRequest(tool=tool, kind="other", target=topic, read_only=read_only)


class RememberInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str = Field(
        description="Topic name: lowercase letters, digits, '-' and '_' (e.g. 'build', 'api-auth')."
    )
    text: str = Field(description="What to remember (Markdown). Appended to the topic.")
    description: str | None = Field(
        default=None, description="One line for the index (kept from before when omitted)."
    )
    replace: bool = Field(
        default=False, description="Replace the topic's text instead of appending to it."
    )


class RememberTool(Tool[RememberInput]):
    name = "remember"
    description = (
        "Save a note to the shared memory that persists across sessions: appends text to a topic "
        "(or replaces it with replace=true) and indexes the topic with an optional one-line "
        "description. Only the memory store is written."
    )
    input_model = RememberInput

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def permission_request(self, args: RememberInput, ctx: ToolContext) -> PermissionRequest:
        return _request(self.name, args.topic, read_only=False)

    def run(self, args: RememberInput, ctx: ToolContext) -> ToolOutput:
        if not args.text.strip():
            return ToolOutput("nothing to remember: text is empty", is_error=True)
        try:
            if args.replace:
                self.memory.write(args.topic, args.text.rstrip() + "\n", args.description)
            else:
                self.memory.append(args.topic, args.text, args.description)
        except (MemoryStoreError, OSError) as exc:
            return ToolOutput(str(exc), is_error=True)
        verb = "replaced" if args.replace else "saved to"
        return ToolOutput(f"{verb} memory topic {args.topic} ({self.memory.dir / args.topic}.md)")


class RecallInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str | None = Field(default=None, description="The topic to read; omit to list topics.")
    query: str | None = Field(
        default=None, description="Case-insensitive text to search for in every topic."
    )


class RecallTool(Tool[RecallInput]):
    name = "recall"
    description = (
        "Read the shared memory: with no arguments, the list of topics; with topic, that topic's "
        "text; with query, the matching lines of every topic."
    )
    input_model = RecallInput

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def is_read_only(self, args: RecallInput) -> bool:
        return True

    def is_concurrency_safe(self, args: RecallInput) -> bool:
        return True

    def permission_request(self, args: RecallInput, ctx: ToolContext) -> PermissionRequest:
        return _request(self.name, args.topic, read_only=True)

    def run(self, args: RecallInput, ctx: ToolContext) -> ToolOutput:
        try:
            if args.topic is not None:
                text = self.memory.read(args.topic)
                if not text:
                    return ToolOutput(f"no memory topic {args.topic!r}; {self._topics()}")
                return ToolOutput(text)
            if args.query:
                return ToolOutput(self._search(args.query))
        except (MemoryStoreError, OSError) as exc:
            return ToolOutput(str(exc), is_error=True)
        return ToolOutput(self._topics())

    def _topics(self) -> str:
        entries = self.memory.index()
        if not entries:
            return "memory is empty"
        lines = [f"- {t}: {d}" if d else f"- {t}" for t, d in entries.items()]
        return "topics:\n" + "\n".join(lines)

    def _search(self, query: str) -> str:
        needle = query.lower()
        hits: list[str] = []
        for topic in self.memory.index():
            for n, line in enumerate(self.memory.read(topic).splitlines(), 1):
                if needle in line.lower():
                    hits.append(f"{topic}:{n}: {line}")
        if not hits:
            return f"no memory line contains {query!r}"
        more = len(hits) - MAX_RECALL_HITS
        shown = hits[:MAX_RECALL_HITS] + ([f"... {more} more"] if more > 0 else [])
        return "\n".join(shown)


class ForgetInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str = Field(description="The topic to delete, with its index line.")


class ForgetTool(Tool[ForgetInput]):
    name = "forget"
    description = "Delete a topic from the shared memory (its file and its index line)."
    input_model = ForgetInput

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def is_destructive(self, args: ForgetInput) -> bool:
        return True

    def permission_request(self, args: ForgetInput, ctx: ToolContext) -> PermissionRequest:
        return PermissionRequest(
            tool=self.name, kind="other", target=args.topic, read_only=False, destructive=True
        )

    def run(self, args: ForgetInput, ctx: ToolContext) -> ToolOutput:
        try:
            existed = self.memory.delete(args.topic)
        except (MemoryStoreError, OSError) as exc:
            return ToolOutput(str(exc), is_error=True)
        if not existed:
            return ToolOutput(f"no memory topic {args.topic!r}")
        return ToolOutput(f"forgot memory topic {args.topic}")


def memory_tools(memory: Memory) -> list[Tool[Any]]:
    """Fresh ``remember``, ``recall`` and ``forget`` over ``memory``."""
    return [RememberTool(memory), RecallTool(memory), ForgetTool(memory)]
