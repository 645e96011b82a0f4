"""mailboxes/messages.py: the envelope schema and its one parse function."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from mailboxes.errors import BadMessage
from mailboxes.fsutil import canonical_dumps
from mailboxes.messages import (
    Envelope,
    InvalidAgentName,
    InvalidEnvelope,
    MessageDraft,
    check_agent_name,
    dump_envelope,
    parse_envelope,
)


def _envelope(**overrides: object) -> Envelope:
    fields: dict[str, object] = {
        "id": "a" * 32,
        "from": "lead",
        "to": "bob",
        "type": "message",
        "ts": 1.5,
        "body": {"text": "hello", "n": [1, 2]},
    }
    fields.update(overrides)
    return Envelope.model_validate(fields)


def test_round_trip_uses_from_key() -> None:
    envelope = _envelope(in_reply_to="b" * 32)
    raw = dump_envelope(envelope)
    assert b'"from":"lead"' in raw
    assert b"sender" not in raw
    assert parse_envelope(raw) == envelope
    assert envelope.sender == "lead"
    assert envelope.text == "hello"


def test_dump_is_the_canonical_json_of_every_field() -> None:
    """``dump_envelope`` reads the fields directly (no ``model_dump`` copy): it still writes every
    field under its JSON key, sorted, compact, exactly as the model's own dump would."""
    envelope = _envelope(in_reply_to="b" * 32, ts=1e16, body={"z": {"b": 1, "a": "é"}, "a": None})
    expected = canonical_dumps(envelope.model_dump(by_alias=True)).encode("utf-8")
    assert dump_envelope(envelope) == expected
    assert set(json.loads(expected)) == {f.alias or n for n, f in Envelope.model_fields.items()}


def test_text_is_empty_without_text_body() -> None:
    assert _envelope(body={}).text == ""
    assert _envelope(body={"text": 3}).text == ""


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"id": "x", "id": "y"}',
        b'{"id":"x","from":"a","to":"b","type":"message","ts":NaN}',
        b'{"id":"x","from":"a","to":"b","type":"gossip","ts":1}',
        b'{"id":"x","from":"a","to":"b","type":"message","ts":"1"}',
        b'{"id":"x","from":"a","to":"b","type":"message","ts":1,"extra":1}',
        b'{"id":"x","sender":"a","to":"b","type":"message","ts":1}',
        b'{"id":"x/y","from":"a","to":"b","type":"message","ts":1}',
        b'{"id":"x","from":"../a","to":"b","type":"message","ts":1}',
        b'{"id":"x","from":"a","to":"b","type":"message","ts":1,"body":[]}',
        b"[" * 10_000,
    ],
)
def test_parse_rejects_with_raw_input(raw: bytes) -> None:
    with pytest.raises(BadMessage) as info:
        parse_envelope(raw)
    assert isinstance(info.value, InvalidEnvelope)
    assert info.value.raw == raw


def test_parse_accepts_integer_ts() -> None:
    raw = b'{"id":"x","from":"a","to":"b","type":"cron_fired","ts":7}'
    assert parse_envelope(raw).ts == 7.0


def test_envelope_is_frozen() -> None:
    envelope = _envelope()
    with pytest.raises(ValidationError):
        envelope.to = "eve"  # type: ignore[misc]


def test_dump_refuses_non_json_body() -> None:
    with pytest.raises(BadMessage, match="not plain JSON"):
        dump_envelope(_envelope(body={"x": math.inf}))


def test_draft_has_no_sender_field() -> None:
    with pytest.raises(ValidationError):
        MessageDraft.model_validate({"to": "bob", "from": "lead"})


@pytest.mark.parametrize("to", ["bob", "*", "a.b", "x_1-2"])
def test_draft_accepts_recipients(to: str) -> None:
    assert MessageDraft(to=to).to == to


@pytest.mark.parametrize("to", ["", "**", ".hidden", "a/b", "a b", "x" * 65])
def test_draft_rejects_recipients(to: str) -> None:
    with pytest.raises(ValidationError):
        MessageDraft(to=to)


def test_draft_text_helper() -> None:
    draft = MessageDraft.text("bob", "hi", type="shutdown_request")
    assert draft.body == {"text": "hi"}
    assert draft.type == "shutdown_request"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", ".x", "a\x00", "x" * 65, "é"])
def test_bad_agent_names_are_clear_errors(name: str) -> None:
    with pytest.raises(InvalidAgentName, match="invalid agent name"):
        check_agent_name(name)


def test_good_agent_name() -> None:
    assert check_agent_name("team-lead_2.b") == "team-lead_2.b"
