"""Journal events: the stored envelope and the typed payload of each event type.

The envelope fields are the on-disk contract (DESIGN §4). ``data`` holds the payload as plain
JSON; ``payload(event)`` parses it into the frozen model registered for the event's type.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# DRAFT: payload models, versions and upgrade functions are filled in by the journal work.


class EventDraft(BaseModel):
    """An event before it is stored: the store assigns ``seq`` and ``ts``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str
    actor: str
    data: dict[str, Any] = Field(default_factory=dict)
    op_id: str | None = None
    v: int = 1


class Event(BaseModel):
    """A stored event. ``seq`` is dense from 1; ``ts`` is seconds since the epoch."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    ts: float
    type: str
    actor: str
    op_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    v: int = 1
