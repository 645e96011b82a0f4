"""The journal line of an event is put together around its data's canonical JSON
(``frame.encode``, ``frame.canonical_json``): byte for byte the canonical JSON of the whole
envelope that the format defines (``fsutil.canonical_dumps``), with the same refusals; and an
append (``stamp``) serialises each event's data once, for both its stored line and the data it
hands back, which equals what reading the line gives."""

from __future__ import annotations

import random
import zlib
from typing import Any

import pytest

from mailboxes.errors import InvalidEvent
from mailboxes.events import Event, EventDraft
from mailboxes.fsutil import canonical_dumps
from mailboxes.journal.base import stamp
from mailboxes.journal.frame import canonical_json, decode_event, encode

_STRINGS = [
    "",
    "plain",
    'quote " and \\ back',
    "tab\tnew\nline\x01\x1f",
    "é ü 中文 🎉",
    "</script>",
]


def _reference(event: Event) -> bytes:
    """The line as the format defines it: the canonical JSON of every field, CRC spliced in."""
    fields = {
        "actor": event.actor,
        "data": event.data,
        "op_id": event.op_id,
        "seq": event.seq,
        "ts": event.ts,
        "type": event.type,
        "v": event.v,
    }
    body = canonical_dumps(fields).encode("utf-8")
    return b'%s,"crc":"%08x"}\n' % (body[:-1], zlib.crc32(body))


def _value(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if depth < 3 and roll < 0.15:
        return {rnd.choice(_STRINGS) + str(i): _value(rnd, depth + 1) for i in range(3)}
    if depth < 3 and roll < 0.3:
        return [_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    if depth < 3 and roll < 0.35:
        return (1, "tuple", None)
    choices: list[Any] = [
        rnd.choice(_STRINGS),
        rnd.randint(-(2**70), 2**70),
        rnd.random() * 10 ** rnd.randint(-5, 20),
        -0.0,
        1e300,
        True,
        False,
        None,
    ]
    return rnd.choice(choices)


def _events(count: int) -> list[Event]:
    rnd = random.Random(20261202)  # fixed: the same cases every run
    events = []
    for seq in range(1, count + 1):
        data = {rnd.choice(_STRINGS) + f"k{i}": _value(rnd) for i in range(rnd.randint(0, 5))}
        events.append(
            Event(
                seq=seq * rnd.choice([1, 1000, 10**12]),
                ts=rnd.choice([0.0, 1764662400.123456, 1e-7, 123.0, 5e20]),
                type=rnd.choice(["task.claimed", "wéird.type", 'q"uote']),
                actor=rnd.choice(_STRINGS),
                op_id=rnd.choice([None, *_STRINGS]),
                data=data,
                v=rnd.choice([1, 2, 37]),
            )
        )
    return events


def test_lines_are_the_canonical_json_of_the_envelope() -> None:
    for event in _events(400):
        line = encode(event)
        assert line == _reference(event)
        assert decode_event(line[:-1], event.seq) == Event(
            seq=event.seq,
            ts=event.ts,
            type=event.type,
            actor=event.actor,
            op_id=event.op_id,
            data=canonical_dumps_roundtrip(event.data),
            v=event.v,
        )


def canonical_dumps_roundtrip(data: dict[str, Any]) -> dict[str, Any]:
    import json

    plain: dict[str, Any] = json.loads(canonical_dumps(data))
    return plain


def test_canonical_json_is_canonical_dumps() -> None:
    rnd = random.Random(7)
    for _ in range(300):
        value = {"v": _value(rnd), "w": [_value(rnd)], "x": _value(rnd)}
        assert canonical_json(value) == canonical_dumps(value)
    for plain in ("a string", 'q"', 12, 1.5, None, True, [1, (2, 3)]):
        assert canonical_json(plain) == canonical_dumps(plain)


@pytest.mark.parametrize(
    "value",
    [
        {"x": float("nan")},
        {"x": [float("inf")]},
        {"x": object()},
        {"x": {1: "mixed", "a": "keys"}},
        {"x": b"bytes"},
    ],
)
def test_canonical_json_refuses_what_canonical_dumps_refuses(value: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)) as expected:
        canonical_dumps(value)
    with pytest.raises(expected.type) as got:
        canonical_json(value)
    assert str(got.value) == str(expected.value)


def test_a_cycle_is_refused_as_json_dumps_refuses_it() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        canonical_json({"a": loop})


def test_an_event_that_is_not_plain_json_is_refused() -> None:
    nan_ts = Event(seq=1, ts=float("nan"), type="t", actor="a")
    with pytest.raises(InvalidEvent, match="not plain JSON"):
        encode(nan_ts)
    surrogate = Event(seq=1, ts=1.0, type="t", actor="\ud800")
    with pytest.raises(InvalidEvent, match="not plain JSON"):
        encode(surrogate)


def test_stamp_serialises_each_draft_once_for_its_line_and_its_data() -> None:
    drafts = [
        EventDraft(type="task.created", actor="lead", data=d, op_id=op)
        for d, op in [
            ({"task_id": "task_1", "subject": 'é "q"', "blocked_by": ("task_0",)}, "op-1"),
            ({"task_id": "task_2", "subject": "s", "metadata": {"n": None}}, None),
        ]
    ]
    lines: list[bytes] = []
    new, result = stamp(drafts, next_seq=5, ts=12.5, lookup=lambda _op: None, lines=lines)
    assert result == new and [e.seq for e in new] == [5, 6]
    assert lines == [encode(event) for event in new] == [_reference(e) for e in new]
    for event, line in zip(new, lines, strict=True):
        assert (
            decode_event(line[:-1], event.seq) == event
        )  # the data handed back is what reads back
    assert new[0].data["blocked_by"] == ["task_0"]  # a tuple became a list
    assert new[0].data is not drafts[0].data


def test_stamp_refuses_data_that_is_not_plain_json_and_makes_no_line() -> None:
    bad = EventDraft(type="task.created", actor="lead", data={"task_id": "t", "x": float("nan")})
    lines: list[bytes] = []
    with pytest.raises(InvalidEvent):
        stamp([bad], next_seq=1, ts=1.0, lookup=lambda _op: None, lines=lines)
    assert lines == []
