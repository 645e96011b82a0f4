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
    envelope_for,
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


def _self_containing() -> list[object]:
    loop: list[object] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    "body",
    [{"x": math.inf}, {"x": math.nan}, {"x": object()}, {"x": _self_containing()}],
    ids=["inf", "nan", "object", "contains-itself"],
)
def test_dump_refuses_non_json_body(body: dict[str, object]) -> None:
    with pytest.raises(BadMessage, match="not plain JSON"):
        dump_envelope(_envelope(body=body))


@pytest.mark.parametrize("ts", [1.5, 1e16, 1796176256.5019418, 5e-324, 7, -0.0])
@pytest.mark.parametrize("reply", [None, "b" * 32])
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"text": "x" * 200},
        {"t": 'é\u2028"\\\x00', "n": [1, 2.5, None, True], "z": {"b": 1, "a": 2}},
    ],
    ids=["empty", "text", "mixed"],
)
def test_dump_writes_exactly_the_canonical_json(
    ts: float, reply: str | None, body: dict[str, object]
) -> None:
    """The delivery path writes the envelope around one encoder call for the body: byte for
    byte what ``canonical_dumps`` makes of the model's own dump, and parsed back equal."""
    envelope = _envelope(ts=ts, in_reply_to=reply, body=body, type="task_assigned", to="a.b-c_d")
    raw = dump_envelope(envelope)
    assert raw == canonical_dumps(envelope.model_dump(by_alias=True)).encode("utf-8")
    assert parse_envelope(raw) == envelope


@pytest.mark.parametrize("ts", [math.inf, math.nan])
def test_dump_refuses_a_non_finite_time(ts: float) -> None:
    with pytest.raises(BadMessage, match="not plain JSON"):
        dump_envelope(_envelope(ts=ts))


@pytest.mark.parametrize("reply", [None, "b" * 32])
def test_envelope_for_is_the_validated_envelope(reply: str | None) -> None:
    draft = MessageDraft.text("bob", "hello", type="task_assigned", in_reply_to=reply)
    made = envelope_for(draft, id="a" * 32, sender="lead", to="bob", ts=7)
    validated = Envelope(
        id="a" * 32,
        sender="lead",
        to="bob",
        type="task_assigned",
        ts=7,
        in_reply_to=reply,
        body={"text": "hello"},
    )
    assert made == validated and repr(made) == repr(validated)
    assert made.model_dump() == validated.model_dump()
    assert made.model_fields_set == validated.model_fields_set
    assert type(made.ts) is float and made.text == "hello"
    assert dump_envelope(made) == dump_envelope(validated)
    assert made.body is not draft.body  # a copy, as validation makes
    with pytest.raises(ValidationError):
        made.to = "eve"  # type: ignore[misc]


@pytest.mark.parametrize("bad", ["", "a/b", "a.b", "x" * 65, "é"])
def test_envelope_for_refuses_a_bad_id(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid message id"):
        envelope_for(MessageDraft.text("bob", "hi"), id=bad, sender="lead", to="bob", ts=1.0)


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
