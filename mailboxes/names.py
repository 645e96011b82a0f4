"""Agent names and message ids: the checks every mailbox shares, without the envelope models.

``mailboxes.messages`` re-exports all of these. They live apart so that opening a team (the
board checks member names; the Maildir checks inbox names) imports no pydantic: a read-only
command like ``teamctl tasks`` never parses a message (docs/ARCHITECTURE.md, "Start-up and
benchmarks").
"""

from __future__ import annotations

import re

from mailboxes.errors import BadMessage, MailboxesError

__all__ = [
    "AGENT_NAME_PATTERN",
    "BROADCAST",
    "MESSAGE_ID_PATTERN",
    "RECIPIENT_PATTERN",
    "InvalidAgentName",
    "InvalidEnvelope",
    "check_agent_name",
]

BROADCAST = "*"
"""The ``to`` of a draft addressed to every known agent but the sender."""

AGENT_NAME_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$"
"""A safe path component: letters, digits, ``-``, ``_`` and ``.`` (not leading), 1-64 chars."""

MESSAGE_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""Ids appear in file names, so no dots or slashes (uuid4 hex in production)."""

RECIPIENT_PATTERN = r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\*)$"
"""A draft's ``to``: an agent name or ``*``."""

_AGENT_NAME = re.compile(AGENT_NAME_PATTERN)


class InvalidAgentName(MailboxesError, ValueError):
    """An agent name that is not a safe path component."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"invalid agent name {name!r}: use 1-64 letters, digits, '-', '_' or '.' "
            "(not leading '.')"
        )
        self.name = name


class InvalidEnvelope(BadMessage):
    """Raw bytes that do not parse as an envelope; carries the raw input and the reason."""

    def __init__(self, reason: str, raw: bytes) -> None:
        super().__init__(f"bad mailbox message: {reason}")
        self.reason = reason
        self.raw = raw


def check_agent_name(name: str) -> str:
    """Return ``name`` if it is a safe agent name, else raise ``InvalidAgentName``."""
    if not isinstance(name, str) or not _AGENT_NAME.fullmatch(name):
        raise InvalidAgentName(str(name))
    return name
