"""``Frozen``: the one base of the project's immutable pydantic values (messages, events,
envelopes, views)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen"]


class Frozen(BaseModel):
    """An immutable value that rejects unknown fields. A subclass that needs more config merges
    it: ``model_config = ConfigDict(**Frozen.model_config, ...)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
