"""Mailbox envelopes: the typed values stored one per file in a Maildir inbox
(docs/ARCHITECTURE.md, "Mailboxes").

A ``MessageDraft`` is what a sender asks for; the transport turns it into an ``Envelope`` by
setting ``id``, ``from`` and ``ts``. ``parse_envelope`` is the one parse function for a mailbox
file; ``dump_envelope`` is its inverse.

Both are ``teamctl_base.records.Record``s, declared as pydantic models are: making, delivering
and parsing well-formed messages imports no pydantic, and anything else is decided (and refused,
with its ``ValidationError``) by the pydantic model of the same declarations (docs/ARCHITECTURE.md,
"Start-up and benchmarks"). No ``from __future__ import annotations``: the records read their
fields' types from the annotations.
"""

import math
import re
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Literal

from mailboxes.fsutil import BadJson, canonical_dumps, strict_loads
from mailboxes.names import AGENT_NAME_PATTERN as AGENT_NAME_PATTERN
from mailboxes.names import BROADCAST as BROADCAST
from mailboxes.names import MESSAGE_ID_PATTERN as MESSAGE_ID_PATTERN
from mailboxes.names import RECIPIENT_PATTERN as RECIPIENT_PATTERN
from mailboxes.names import InvalidAgentName as InvalidAgentName
from mailboxes.names import InvalidEnvelope as InvalidEnvelope
from mailboxes.names import check_agent_name as check_agent_name
from teamctl_base.records import Field, Record

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


class MessageDraft(Record):
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
    ) -> "MessageDraft":
        """A draft whose body is just free text."""
        return cls(to=to, type=type, body={"text": text}, in_reply_to=in_reply_to)


class Envelope(Record):
    """A delivered message, exactly as stored in one Maildir file.

    The JSON key of ``sender`` is ``"from"``; it is set by the transport, never by message text.
    """

    model_config = {**Record.model_config, "populate_by_name": True}

    id: str = Field(pattern=MESSAGE_ID_PATTERN)
    """Unique message id (uuid4 hex in production); duplicates are dropped by it."""
    sender: str = Field(json_key="from", pattern=AGENT_NAME_PATTERN)
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


_MESSAGE_ID = re.compile(MESSAGE_ID_PATTERN)
_new_object = object.__new__
_set = object.__setattr__


def envelope_for(draft: MessageDraft, *, id: str, sender: str, to: str, ts: float) -> Envelope:
    """The ``Envelope`` of ``draft`` from ``sender`` to the agent ``to``, equal to
    ``Envelope(id=id, sender=sender, to=to, ts=ts, type=draft.type, ...)`` (a shallow copy of the
    body included) at a quarter of its cost: a delivery makes one per message.

    Nothing is validated twice: ``draft`` is a validated model and the caller has passed
    ``sender`` and ``to`` through ``check_agent_name`` (``to`` is not ``*``); ``id`` is checked
    here (``ValueError``) and ``ts`` made a float. Built as ``Record.model_construct`` builds a
    record (tests/mailboxes/test_messages.py compares the two)."""
    if not _MESSAGE_ID.fullmatch(id):
        raise ValueError(f"invalid message id {id!r}: use 1-64 letters, digits, '-' or '_'")
    envelope = _new_object(Envelope)
    _set(
        envelope,
        "__dict__",
        {
            "id": id,
            "sender": sender,
            "to": to,
            "type": draft.type,
            "ts": float(ts),
            "in_reply_to": draft.in_reply_to,
            "body": dict(draft.body),
        },
    )
    _set(envelope, "_record_fields_set", None)  # every field given
    return envelope


def parse_envelope(raw: bytes) -> Envelope:
    """Parse one mailbox file. Raises ``InvalidEnvelope`` (a ``BadMessage``) carrying ``raw``."""
    try:
        data = strict_loads(raw)
    except BadJson as exc:
        raise InvalidEnvelope(str(exc), raw) from None
    if not isinstance(data, dict):
        raise InvalidEnvelope(f"expected a JSON object, got {type(data).__name__}", raw)
    try:
        envelope: Envelope = Envelope.model_validate(
            data, strict=True, by_alias=True, by_name=False
        )
    except ValueError as exc:
        from pydantic import ValidationError  # only an envelope the record left to its twin

        if not isinstance(exc, ValidationError):
            raise
        errors = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise InvalidEnvelope(errors, raw) from None
    return envelope


def _not_json(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_CANONICAL = (
    None
    if c_make_encoder is None
    else c_make_encoder(None, _not_json, encode_basestring, None, ":", ",", True, False, False)
)
"""``canonical_dumps`` as one C encoder made at import (``json.dumps`` makes a new one per call,
which costs more than encoding a small envelope): sorted keys, no spaces, UTF-8 kept, NaN
refused. It keeps no state between calls (no ``markers``: a body that contains itself ends in
``RecursionError`` instead of ``ValueError``), so threads share it. ``None`` without the C
accelerator (``canonical_dumps`` is used then)."""


def dump_envelope(envelope: Envelope) -> bytes:
    """Canonical JSON bytes of ``envelope`` (what ``parse_envelope`` reads back)."""
    # The fields as they are (no model_dump copy: this runs once per delivery), so NaN and
    # non-JSON values in the body reach the encoder, which refuses them loudly.
    ts, reply = envelope.ts, envelope.in_reply_to
    try:
        if _CANONICAL is not None and type(ts) is float and math.isfinite(ts):
            # Only the body needs the encoder: the other strings match the model's name and id
            # patterns (nothing to escape), ``ts`` prints as the encoder prints a float, and the
            # keys are in sorted order (tests/mailboxes/test_messages.py compares the bytes).
            body = "".join(_CANONICAL(envelope.body, 0))
            text = (
                f'{{"body":{body},"from":"{envelope.sender}","id":"{envelope.id}",'
                f'"in_reply_to":{"null" if reply is None else f"{_QUOTE}{reply}{_QUOTE}"},'
                f'"to":"{envelope.to}","ts":{ts!r},"type":"{envelope.type}"}}'
            )
        else:
            text = canonical_dumps(
                {
                    "body": envelope.body,
                    "from": envelope.sender,
                    "id": envelope.id,
                    "in_reply_to": reply,
                    "to": envelope.to,
                    "ts": ts,
                    "type": envelope.type,
                }
            )
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidEnvelope(f"body is not plain JSON: {exc}", b"") from None
    return text.encode("utf-8")


_QUOTE = '"'
