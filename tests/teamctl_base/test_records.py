"""``Record`` behaves as the frozen pydantic model of the same declarations (teamctl_base/records.py):
for every payload of mailboxes/payloads.py and both envelopes of mailboxes/messages.py, generated
values are accepted or refused alike (the same ``ValidationError`` text), and what is accepted
holds and dumps the same values of the same types. The oracle is a pydantic model built here from
each record's declared fields, independently of the record's own fallback."""

from __future__ import annotations

import copy
import math
import pickle
import re
import subprocess
import sys
import types
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic import Field as PydanticField

from mailboxes.messages import Envelope, MessageDraft
from mailboxes.payloads import PAYLOADS
from teamctl_base.records import Field, Record

MODELS: list[type[Record]] = [*PAYLOADS.values(), MessageDraft, Envelope]


def oracle(cls: type[Record]) -> type[BaseModel]:
    """The pydantic model of ``cls``'s declarations (``frozen``, ``extra="forbid"``)."""
    fields: Any = {}
    for slot in cls.__record_slots__:  # type: ignore[attr-defined]
        spec = slot.spec
        options: dict[str, Any] = {}
        if spec.default_factory is not None:
            options["default_factory"] = spec.default_factory
        elif slot.default is not _missing():
            options["default"] = spec.default
        for name, value in (("alias", spec.json_key), ("pattern", spec.pattern), ("ge", spec.ge)):
            if value is not None:
                options[name] = value
        fields[slot.name] = (slot.annotation, PydanticField(**options))
    config = ConfigDict(frozen=True, extra="forbid")
    if cls.model_config.get("populate_by_name"):
        config["populate_by_name"] = True
    return create_model(cls.__name__, __config__=config, **fields)  # type: ignore[no-any-return]


def _missing() -> object:
    from teamctl_base import records

    return records._MISSING


ORACLES = {cls: oracle(cls) for cls in MODELS}

# --- values -------------------------------------------------------------------------------------

_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # nan and inf included
    st.text(max_size=4),
)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
    ),
    max_leaves=6,
)
_odd = st.one_of(
    _json,
    st.binary(max_size=3),
    st.sets(st.integers(), max_size=2),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),  # non-str keys
    st.sampled_from(["3", "1.5", "true", "x" * 65, "bob\n", "", "*", "..", 2.0, 2.5, -1, 2**70]),
)
_names = st.sampled_from(["bob", "a.b", "x_1-2", "*", "", ".x", "a/b", "é", "b" * 64, "b" * 65])


def _options(annotation: Any) -> list[Any]:
    """The annotations of ``annotation`` (those of a union but ``None``)."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        return [a for a in get_args(annotation) if a is not type(None)]
    return [annotation]


def plain_values(annotation: Any, ge: float | None = None) -> st.SearchStrategy[Any]:
    """Values of ``annotation`` as written by the program (and ``None`` when optional), at
    least ``ge``."""
    found: list[st.SearchStrategy[Any]] = []
    if len(_options(annotation)) != 1 or annotation is not _options(annotation)[0]:
        found.append(st.none())
    for kind in _options(annotation):
        origin = get_origin(kind)
        if kind is str:
            found += [st.text(max_size=6), _names]
        elif kind is int:
            low = None if ge is None else int(ge)
            found += [st.integers(-3 if low is None else low, 3), st.integers(min_value=low)]
        elif kind is float:
            found += [
                st.floats(min_value=ge),
                st.integers(-3 if ge is None else int(ge), 3),
                st.integers(-(2**60) if ge is None else int(ge), 2**60),
            ]
        elif kind is bool:
            found.append(st.booleans())
        elif origin is Literal:
            found.append(st.sampled_from(get_args(kind)))
        elif origin is tuple:
            strings = st.lists(st.text(max_size=3), max_size=3)
            found += [strings, strings.map(tuple)]
        elif origin is dict:
            found.append(st.dictionaries(st.text(max_size=3), _json, max_size=3))
        else:
            found.append(_json)
    return st.one_of(*found)


_COERCIBLE = [
    True,
    False,
    0,
    1,
    2,
    -1,
    2.0,
    2.5,
    -0.0,
    2**53,
    2**53 + 1,
    2**70,
    2**1024,
    "3",
    " 3",
    "3.0",
    "1.5",
    "inf",
    "nan",
    "true",
    "yes",
    "x",
    b"x",
    bytearray(b"y"),
    math.inf,
    math.nan,
    None,
    ["a"],
    ("a",),
    {"a"},
    frozenset({"b"}),
    ["a", 1],
    "ab",
    {1: "x"},
    {"k": 1},
    [("k", 1)],
    [],
    (),
    {},
    {"k": {1, 2}},
    {"k": object()},
    {"k": b"x"},
]
"""Values pydantic coerces or refuses for one field type or another."""


def odd_values(annotation: Any, ge: float | None = None) -> st.SearchStrategy[Any]:
    coercible = st.sampled_from(_COERCIBLE)
    return st.one_of(coercible, coercible, _odd, plain_values(annotation))


@st.composite
def inputs(draw: st.DrawFn, cls: type[Record]) -> dict[str, Any]:
    """Keyword input for ``cls``: every field plain but at most one (odd: coerced or refused),
    each given under its name or JSON key or left out, sometimes with an unknown key."""
    slots = cls.__record_slots__  # type: ignore[attr-defined]
    odd = draw(st.integers(-1, len(slots) - 1)) if slots else -1
    data: dict[str, Any] = {}
    for i, slot in enumerate(slots):
        if draw(st.integers(0, 14)) == 0:
            continue  # left out
        key = slot.name
        if slot.key != slot.name and draw(st.booleans()):
            key = slot.key
        make = odd_values if i == odd else plain_values
        data[key] = draw(make(slot.annotation, slot.spec.ge))
    if draw(st.integers(0, 19)) == 0:
        data["unknown"] = 1
    return data


# --- outcomes -----------------------------------------------------------------------------------


def _typed(value: Any) -> str:
    """``value`` spelled with its types (``1``, ``1.0`` and ``True`` differ; nan equals nan),
    an object without a value of its own by its type only (a copy is another object)."""
    return re.sub(r" at 0x[0-9a-f]+>", ">", repr(value))


def outcome(make: Callable[[], Any], data: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """What making a value gives: the refusal's text, or the value's fields with their types,
    its dumps, and which fields hold the very container they were given."""
    try:
        made = make()
    except ValidationError as exc:
        return ("refused", str(exc))
    dumps = []
    for mode in ("python", "json"):
        for by_alias in (None, True):
            try:
                dumps.append(_typed(made.model_dump(mode=mode, by_alias=by_alias)))
            except Exception as exc:  # e.g. an object JSON cannot hold: the same error
                dumps.append(f"{type(exc).__name__}: {exc}")
    values = {name: _typed(getattr(made, name)) for name in type(made).model_fields}
    given = data or {}
    shared = sorted(
        name
        for name, info in type(made).model_fields.items()
        for key in {name, info.alias or name}
        if isinstance(given.get(key), dict | list) and getattr(made, name) is given[key]
    )
    return ("made", repr(made), str(made), values, sorted(made.model_fields_set), dumps, shared)


def assert_same(cls: type[Record], twin: type[BaseModel], data: dict[str, Any]) -> None:
    """``data`` makes the same through the record as through the pydantic model: as keywords,
    validated, and validated as ``parse_envelope`` reads a mailbox file (strict, JSON keys)."""
    assert outcome(lambda: cls(**data), data) == outcome(lambda: twin(**data), data), data
    assert outcome(lambda: cls.model_validate(data), data) == outcome(
        lambda: twin.model_validate(data), data
    ), data
    strict: dict[str, Any] = {"strict": True, "by_alias": True, "by_name": False}
    assert outcome(lambda: cls.model_validate(data, **strict), data) == outcome(
        lambda: twin.model_validate(data, **strict), data
    ), data


SETTINGS = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,  # the same examples every run
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_a_record_makes_and_refuses_what_its_pydantic_model_does(cls: type[Record]) -> None:
    twin = ORACLES[cls]

    @SETTINGS
    @given(inputs(cls))
    def check(data: dict[str, Any]) -> None:
        assert_same(cls, twin, data)

    check()


def _canonical(annotation: Any) -> Any:
    """One plain value of ``annotation``."""
    kind = _options(annotation)[0]
    origin = get_origin(kind)
    if origin is Literal:
        return get_args(kind)[0]
    if origin is tuple:
        return ("a",)
    if origin is dict:
        return {"k": [1, "x", None]}
    return {str: "a", int: 1, float: 1.5, bool: True}.get(kind)


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_every_field_takes_each_odd_value_as_pydantic_does(cls: type[Record]) -> None:
    """Exhaustive over fields and ``_COERCIBLE``: one field odd, the others plain."""
    twin = ORACLES[cls]
    slots = cls.__record_slots__  # type: ignore[attr-defined]
    plain = {slot.key: _canonical(slot.annotation) for slot in slots}
    assert outcome(lambda: cls(**plain))[0] == "made"
    for slot in slots:
        for value in _COERCIBLE:
            assert_same(cls, twin, {**plain, slot.key: value})


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_records_compare_and_copy_as_their_pydantic_models(cls: type[Record]) -> None:
    twin = ORACLES[cls]

    @SETTINGS
    @given(inputs(cls), inputs(cls))
    def check(one: dict[str, Any], two: dict[str, Any]) -> None:
        try:
            a, b = cls(**one), cls(**two)
            ta, tb = twin(**one), twin(**two)
        except ValidationError:
            return
        assert (a == b) == (ta == tb)
        # Equal to itself rebuilt exactly when pydantic's is (a NaN field is equal to nothing).
        assert (a == cls(**one)) == (ta == twin(**one)) and a != ta
        for twin_copy, made in ((ta, a), (ta, pickle.loads(pickle.dumps(a)))):
            assert _typed(made) == _typed(twin_copy)
        assert _typed(copy.deepcopy(a)) == _typed(ta) and copy.copy(a) == a
        try:
            expected: object = hash(ta)
        except TypeError:
            expected = TypeError
        if expected is TypeError:
            with pytest.raises(TypeError):
                hash(a)
        else:
            assert hash(a) == hash(copy.copy(a))

    check()


def test_a_record_is_frozen_with_pydantic_s_refusal() -> None:
    cls = PAYLOADS["task.claimed"]
    claimed = cls(task_id="task_1", owner="a", epoch=1)  # type: ignore[call-arg]
    twin = ORACLES[cls](task_id="task_1", owner="a", epoch=1)
    for target in (claimed, twin):
        with pytest.raises(ValidationError) as info:
            target.owner = "b"  # type: ignore[misc]
        with pytest.raises(ValidationError):
            del target.owner  # type: ignore[misc]
    assert "Instance is frozen" in str(info.value) and claimed.owner == "a"


def test_model_copy_construct_and_fields_match_pydantic() -> None:
    cls = PAYLOADS["task.created"]
    body = cls(task_id="t", subject="s", blocked_by=["a"])  # type: ignore[call-arg]
    twin = ORACLES[cls](task_id="t", subject="s", blocked_by=["a"])
    assert repr(body.model_copy(update={"subject": "u"})) == repr(
        twin.model_copy(update={"subject": "u"})
    )
    assert body.model_copy(update={"subject": "u"}).model_fields_set == {
        "task_id",
        "subject",
        "blocked_by",
    }
    assert repr(cls.model_construct(task_id="t", subject="s")) == repr(
        ORACLES[cls].model_construct(task_id="t", subject="s")
    )
    assert set(cls.model_fields) == set(ORACLES[cls].model_fields)
    assert cls.model_validate(body) is body
    assert body.model_dump_json() == twin.model_dump_json()
    assert body.model_dump(exclude_defaults=True) == twin.model_dump(exclude_defaults=True)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        cls.nope  # type: ignore[attr-defined]  # noqa: B018


def test_envelope_dumps_under_its_json_key() -> None:
    made = Envelope(id="a", sender="lead", to="bob", type="message", ts=1.0)
    assert made.model_dump(by_alias=True)["from"] == "lead"
    assert "from" not in made.model_dump()
    assert Envelope.model_validate(made.model_dump(by_alias=True)) == made
    assert math.isnan(Envelope.model_validate({**made.model_dump(), "ts": math.nan}).ts)


def test_unsupported_declarations_are_refused_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="unsupported record field type"):

        class _Listed(Record):
            items: list[int]

    with pytest.raises(TypeError, match="pattern on a non-string"):

        class _Patterned(Record):
            count: int = Field(default=0, pattern="x")


def test_plain_values_need_no_pydantic() -> None:
    """Making, dumping and parsing well-formed payloads and envelopes leaves pydantic unloaded;
    the first odd value loads it (to decide as pydantic would)."""
    code = (
        "import sys\n"
        "from mailboxes import events, messages\n"
        "from mailboxes.payloads import parse_payload\n"
        "body = events.TaskCreated(task_id='task_1', subject='s', blocked_by=['task_0'],"
        " metadata={'k': [1, 2.5, None]})\n"
        "data = events.draft(body.TYPE, 'lead', body).data\n"
        "assert parse_payload('task.created', 1, data) == body\n"
        "draft = messages.MessageDraft(to='bob', body={'text': 'hi'})\n"
        "env = messages.envelope_for(draft, id='a1', sender='lead', to='bob', ts=1.0)\n"
        "assert messages.parse_envelope(messages.dump_envelope(env)) == env\n"
        "print('pydantic' in sys.modules)\n"
        "events.TaskClaimed(task_id='t', owner='w', epoch='2')\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
