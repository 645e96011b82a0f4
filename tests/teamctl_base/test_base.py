"""The bottom layer stays cheap to import, and its clock, ids and ``Frozen`` base behave as the
ports and the values expect (its layering is checked in ``tests/test_package.py``)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from pydantic import ConfigDict, ValidationError

from teamctl_base.clock import SystemClock, UuidIds, new_id
from teamctl_base.models import Frozen


def test_clock_and_crash_points_import_only_the_standard_library() -> None:
    probe = (
        "import sys, teamctl_base, teamctl_base.clock, teamctl_base.crashpoints\n"
        "print(sorted(m for m in ('pydantic', 'actors', 'harness', 'mailboxes') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_the_system_clock_reads_the_real_time() -> None:
    clock = SystemClock()
    before = time.time()
    assert before <= clock.now() <= time.time()
    first = clock.monotonic()
    clock.sleep(-1.0)  # a non-positive wait returns at once
    clock.sleep(0.0)
    assert clock.monotonic() >= first


def test_ids_are_32_hex_digits_and_unique() -> None:
    import uuid

    ids = [new_id() for _ in range(100)] + [UuidIds().new_id() for _ in range(100)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    for i in ids:  # random uuid4s, as uuid.uuid4().hex makes them
        parsed = uuid.UUID(hex=i)
        assert (parsed.version, parsed.variant, parsed.hex) == (4, uuid.RFC_4122, i)
    assert len({i[n] for i in ids for n in (0, 31)}) > 1  # not a constant


def test_making_an_id_does_not_import_uuid() -> None:
    probe = (
        "import sys\nfrom teamctl_base.clock import new_id\nnew_id()\nprint('uuid' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


class _Point(Frozen):
    x: int


class _Aliased(Frozen):
    model_config = ConfigDict(**Frozen.model_config, populate_by_name=True)

    sender: str = ""


def test_frozen_values_are_immutable_and_strict() -> None:
    point = _Point(x=1)
    with pytest.raises(ValidationError):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(ValidationError):
        _Point.model_validate({"x": 1, "y": 2})
    assert _Aliased.model_config == {"frozen": True, "extra": "forbid", "populate_by_name": True}
