"""Mailbox envelopes (DESIGN §6). DRAFT: completed by the mailbox work."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class MessageDraft(BaseModel):
    """A message before delivery: the transport sets ``from``, ``id`` and ``ts``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    to: str
    type: str = "message"
    body: dict[str, Any] = Field(default_factory=dict)
    in_reply_to: str | None = None


class Envelope(BaseModel):
    """A delivered message."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    id: str
    sender: str = Field(alias="from")
    to: str
    type: str
    ts: float
    in_reply_to: str | None = None
    body: dict[str, Any] = Field(default_factory=dict)
