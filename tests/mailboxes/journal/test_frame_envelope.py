"""The journal line format without pydantic: ``encode`` writes the same bytes as always (a line
written by the pydantic envelope is pinned below), ``decode_event`` gives back equal events and
refuses every CRC-correct line that is not an event envelope; ``Event``/``EventDraft`` are frozen
values compared field by field."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys
import zlib

import pytest

from mailboxes import events as ev
from mailboxes import payloads
from mailboxes.errors import InvalidEvent
from mailboxes.journal.frame import BadLine, decode_event, encode

# Written by the pydantic ``Event`` model before the envelope became a plain class.
PINNED = [
    (
        ev.Event(
            seq=7,
            ts=1700000000.25,
            type="task.created",
            actor="lead",
            op_id="op-1",
            data={
                "task_id": "task_1",
                "subject": 'héllo \u2028 "q"',
                "blocked_by": ("task_0",),
                "metadata": {"n": 1, "f": 2.5, "z": None},
            },
            v=2,
        ),
        b'{"actor":"lead","data":{"blocked_by":["task_0"],"metadata":{"f":2.5,"n":1,"z":null},'
        b'"subject":"h\xc3\xa9llo \xe2\x80\xa8 \\"q\\"","task_id":"task_1"},"op_id":"op-1",'
        b'"seq":7,"ts":1700000000.25,"type":"task.created","v":2,"crc":"8fc4c7c4"}\n',
    ),
    (
        ev.Event(seq=1, ts=3, type="team.created", actor="cli", data={"name": "x"}),
        b'{"actor":"cli","data":{"name":"x"},"op_id":null,"seq":1,"ts":3.0,'
        b'"type":"team.created","v":1,"crc":"ce743d6c"}\n',
    ),
]


@pytest.mark.parametrize(("event", "line"), PINNED)
def test_encode_writes_the_bytes_the_pydantic_envelope_wrote(event: ev.Event, line: bytes) -> None:
    assert encode(event) == line
    back = decode_event(line[:-1], event.seq)
    assert back == ev.Event(**{**event.model_dump(mode="json")})
    assert isinstance(back.ts, float) and back.data == json.loads(line)["data"]


def _framed(body: bytes) -> bytes:
    """``body`` (a JSON object's bytes) framed with a correct CRC, as the journal writes."""
    return b'%s,"crc":"%08x"}' % (body[:-1], zlib.crc32(body))


GOOD = {"actor": "a", "data": {}, "op_id": None, "seq": 1, "ts": 1.5, "type": "t.x", "v": 1}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"seq":1,"ts":1.0,"type":"t","actor":"a" x}', "not an event: invalid JSON"),
        (b'{"seq":1,"ts":1.0,"type":"t","actor":"a"}{}', "not an event: invalid JSON"),
        (b'{"seq":1,"ts":1.0,"type":"t","actor":"\xff"}', "not an event: invalid JSON"),
        (json.dumps({**GOOD, "extra": 1}).encode(), "not an event: unknown field 'extra'"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "ts"}).encode(), "field 'ts'"),
        (json.dumps({**GOOD, "seq": "1"}).encode(), "event seq: '1' is not a valid integer"),
        (json.dumps({**GOOD, "seq": True}).encode(), "event seq: True"),
        (json.dumps({**GOOD, "ts": "now"}).encode(), "event ts: 'now' is not a valid number"),
        (json.dumps({**GOOD, "type": 3}).encode(), "event type: 3 is not a valid string"),
        (json.dumps({**GOOD, "actor": None}).encode(), "event actor: None"),
        (json.dumps({**GOOD, "op_id": 5}).encode(), "event op_id: 5"),
        (json.dumps({**GOOD, "data": [1]}).encode(), "event data: [1] is not a valid JSON"),
        (json.dumps({**GOOD, "v": 1.0}).encode(), "event v: 1.0"),
    ],
)
def test_a_crc_correct_line_that_is_not_an_event_is_refused(body: bytes, reason: str) -> None:
    with pytest.raises(BadLine, match=reason.replace("[", r"\[").replace("]", r"\]")) as caught:
        decode_event(_framed(body), 1)
    assert not caught.value.torn  # written by something else, never repaired away


def test_left_out_optional_fields_take_their_defaults_and_the_seq_is_checked() -> None:
    with pytest.raises(InvalidEvent, match="an event is a JSON object, not list"):
        ev.Event.from_json([1, 2])
    body = json.dumps({"seq": 2, "ts": 4, "type": "t.x", "actor": "a"}).encode()
    event = decode_event(_framed(body), 2)
    assert event == ev.Event(seq=2, ts=4.0, type="t.x", actor="a", op_id=None, data={}, v=1)
    with pytest.raises(BadLine, match="seq 2 where 3 was expected"):
        decode_event(_framed(body), 3)
    with pytest.raises(BadLine, match="CRC mismatch") as torn:
        decode_event(_framed(body).replace(b'"a"', b'"b"'), 2)
    assert torn.value.torn


def test_envelopes_are_frozen_values() -> None:
    event = ev.Event(seq=1, ts=2.0, type="t", actor="a", data={"k": [1]})
    same = ev.Event(seq=1, ts=2.0, type="t", actor="a", data={"k": [1]})
    assert event == same and event != ev.Event(seq=1, ts=2.0, type="t", actor="b")
    assert event != ev.EventDraft(type="t", actor="a", data={"k": [1]})
    with pytest.raises(AttributeError, match="frozen"):
        event.seq = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        del event.actor
    with pytest.raises(TypeError):
        hash(event)
    for copied in (copy.copy(event), copy.deepcopy(event), pickle.loads(pickle.dumps(event))):
        assert copied == event and type(copied) is ev.Event
    assert repr(event) == (
        "Event(seq=1, ts=2.0, type='t', actor='a', op_id=None, data={'k': [1]}, v=1)"
    )
    d = ev.EventDraft(type="t", actor="a", data={"k": (1,)}, op_id="o", v=2)
    assert pickle.loads(pickle.dumps(d)) == d
    assert d.model_dump() == {"type": "t", "actor": "a", "data": {"k": (1,)}, "op_id": "o", "v": 2}
    assert d.model_dump(mode="json")["data"] == {"k": [1]}
    dumped = event.model_dump()
    dumped["data"]["new"] = 1
    assert "new" not in event.data  # a copy


@pytest.mark.parametrize(
    "fields",
    [
        {"seq": "1"},
        {"ts": None},
        {"type": 1},
        {"actor": b"a"},
        {"op_id": 1},
        {"data": [1]},
        {"data": {1: "x"}},
        {"v": "2"},
    ],
)
def test_an_envelope_with_a_wrong_field_type_cannot_be_made(fields: dict[str, object]) -> None:
    base: dict[str, object] = {"seq": 1, "ts": 1.0, "type": "t", "actor": "a"}
    with pytest.raises(InvalidEvent):
        ev.Event(**{**base, **fields})  # type: ignore[arg-type]
    if "seq" not in fields and "ts" not in fields:
        with pytest.raises(InvalidEvent):
            ev.EventDraft(**{"type": "t", "actor": "a", **fields})  # type: ignore[arg-type]


def test_events_reexports_the_payload_models_loaded_on_first_use() -> None:
    assert set(payloads.__all__) == ev._LAZY
    assert ev.TaskCreated is payloads.TaskCreated and ev.PAYLOADS is payloads.PAYLOADS
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        ev.Nope  # type: ignore[attr-defined]  # noqa: B018
    code = (
        "import sys\n"
        "from mailboxes import events\n"
        "from mailboxes.journal import frame, store\n"
        "before = 'mailboxes.payloads' in sys.modules\n"
        "body = events.TaskClaimed(task_id='task_1', owner='w', epoch=1)\n"
        "print(before, 'mailboxes.payloads' in sys.modules, events.draft(body.TYPE, 'w', body).v)\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # loaded on first use; a well-formed payload needs no pydantic (teamctl_base/records.py)
    assert done.stdout.split() == ["False", "True", "1", "False"]
