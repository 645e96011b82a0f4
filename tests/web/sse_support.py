"""Reading server-sent events from an ``httpx`` streaming response (bounded by its read timeout)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class SseEvent:
    event: str
    id: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def sse_events(response: httpx.Response) -> Iterator[SseEvent]:
    """The events of ``response`` as they arrive (comments skipped)."""
    event, ident, data = "message", None, []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield SseEvent(event, ident, "\n".join(data))
            event, ident, data = "message", None, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "id":
                ident = value
            elif name == "data":
                data.append(value)


def next_journal_event(events: Iterator[SseEvent], type_: str) -> SseEvent:
    """The next ``journal`` event of type ``type_`` (others skipped)."""
    for item in events:
        if item.event == "journal" and item.json()["type"] == type_:
            return item
    raise AssertionError(f"the stream ended before a {type_} event")
