"""The projection encoder writes each value exactly as ``json.dumps(value, ensure_ascii=False)``
(its fast paths for floats, empty containers and the C encoder made once included)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.board.projections import _dumps, _encode

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(derandomize=True, max_examples=400)
@given(_VALUES)
def test_each_value_is_encoded_as_json_dumps_would(value: Any) -> None:
    assert _dumps(value) == json.dumps(value, ensure_ascii=False)


def test_the_values_a_task_file_holds() -> None:
    values = [1.5, 0.1, -0.0, 1e300, 10**30, [], {}, ["task_1"], {"required": False}, "é\u2028"]
    values += [float("nan"), float("inf"), (1, 2), {"t": (1,)}, [{"a": [{}]}, None, True]]
    for value in values:
        assert _dumps(value) == json.dumps(value, ensure_ascii=False)
    obj = {"id": "task_1", "at": 1700000000.123, "blocks": [], "plan": {"a": 1, "b": [2.5]}}
    lines = [f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in obj.items()]
    assert _encode(obj) == ("{\n" + ",\n".join(lines) + "\n}\n").encode()


def test_a_value_json_refuses_is_refused_alike() -> None:
    for bad in ([object()], {"k": {1, 2}}, {(1, 2): 3}):
        try:
            json.dumps(bad, ensure_ascii=False)
        except TypeError as exc:
            expected = str(exc)
        else:  # pragma: no cover - every value above is refused
            raise AssertionError(bad)
        try:
            _dumps(bad)
        except TypeError as exc:
            assert str(exc) == expected
        else:
            raise AssertionError(f"{bad!r} was encoded")
