"""Mailbox envelopes: the typed values stored one per file in a Maildir inbox
(docs/ARCHITECTURE.md, "Mailboxes").

A ``MessageDraft`` is what a sender asks for; the transport turns it into an ``Envelope`` by
setting ``id``, ``from`` and ``ts``. ``parse_envelope`` is the one parse function for a mailbox
file; ``dump_envelope`` is its inverse.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from mailboxes.errors import BadMessage, MailboxesError
from mailboxes.fsutil import BadJson, canonical_dumps, strict_loads
from teamctl_base.models import Frozen

MessageType = Literal[
    "message",
    "broadcast",
    "idle_notification",
    "task_assigned",
    "plan_approval_request",
    "plan_approval_response",
    "shutdown_request",
    "shutdown_response",
    "permission_request",
    "permission_response",
    "task_notification",
    "cron_fired",
    "error",
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


class MessageDraft(Frozen):
    """A message before delivery: the transport sets ``from``, ``id`` and ``ts``.

    ``to`` is an agent name or ``"*"`` (broadcast: one copy per known agent but the sender).
    ``body`` is plain JSON; free text goes under ``body["text"]``.
    """

    to: str = Field(pattern=RECIPIENT_PATTERN)
    """Recipient agent name, or ``"*"`` for a broadcast."""
    type: MessageType = "message"
    """What the message means to the receiver."""
    body: dict[str, Any] = Field(default_factory=dict)
    """Plain JSON payload; ``text`` is the conventional key for free text."""
    in_reply_to: str | None = Field(default=None, pattern=MESSAGE_ID_PATTERN)
    """Id of the message this answers, if any."""

    @classmethod
    def text(
        cls, to: str, text: str, *, type: MessageType = "message", in_reply_to: str | None = None
    ) -> MessageDraft:
        """A draft whose body is just free text."""
        return cls(to=to, type=type, body={"text": text}, in_reply_to=in_reply_to)


class Envelope(Frozen):
    """A delivered message, exactly as stored in one Maildir file.

    The JSON key of ``sender`` is ``"from"``; it is set by the transport, never by message text.
    """

    model_config = ConfigDict(**Frozen.model_config, populate_by_name=True)

    id: str = Field(pattern=MESSAGE_ID_PATTERN)
    """Unique message id (uuid4 hex in production); duplicates are dropped by it."""
    sender: str = Field(alias="from", pattern=AGENT_NAME_PATTERN)
    """Who sent it, as set by the transport."""
    to: str = Field(pattern=AGENT_NAME_PATTERN)
    """The recipient whose inbox holds this copy."""
    type: MessageType
    """What the message means to the receiver."""
    ts: float
    """Delivery time, seconds since the epoch."""
    in_reply_to: str | None = Field(default=None, pattern=MESSAGE_ID_PATTERN)
    """Id of the message this answers, if any."""
    body: dict[str, Any] = Field(default_factory=dict)
    """Plain JSON payload; ``text`` is the conventional key for free text."""

    @property
    def text(self) -> str:
        """The free text of the body (``""`` if there is none)."""
        value = self.body.get("text", "")
        return value if isinstance(value, str) else ""


def parse_envelope(raw: bytes) -> Envelope:
    """Parse one mailbox file. Raises ``InvalidEnvelope`` (a ``BadMessage``) carrying ``raw``."""
    try:
        data = strict_loads(raw)
    except BadJson as exc:
        raise InvalidEnvelope(str(exc), raw) from None
    if not isinstance(data, dict):
        raise InvalidEnvelope(f"expected a JSON object, got {type(data).__name__}", raw)
    try:
        return Envelope.model_validate(data, strict=True, by_alias=True, by_name=False)
    except ValidationError as exc:
        errors = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise InvalidEnvelope(errors, raw) from None


_DUMP_KEYS = tuple((field.alias or name, name) for name, field in Envelope.model_fields.items())
"""``(JSON key, attribute)`` of every envelope field."""


def dump_envelope(envelope: Envelope) -> bytes:
    """Canonical JSON bytes of ``envelope`` (what ``parse_envelope`` reads back)."""
    try:
        # The fields as they are (no model_dump copy: this runs once per delivery), so NaN and
        # non-JSON values in the body reach canonical_dumps, which refuses them loudly.
        text = canonical_dumps({key: getattr(envelope, name) for key, name in _DUMP_KEYS})
    except (TypeError, ValueError) as exc:
        raise InvalidEnvelope(f"body is not plain JSON: {exc}", b"") from None
    return text.encode("utf-8")
