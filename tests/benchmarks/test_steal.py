"""The steal share ``bench_claims`` reports: read from Linux's ``/proc/stat``, whose ``cpu``
line counts guest time inside user and nice (so it must not be added twice)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from benchmarks.common import cpu_ticks, parse_cpu_line, steal_share

# The first line of /proc/stat on the 2-core virtual machine these benchmarks were tuned on:
# user nice system idle iowait irq softirq steal guest guest_nice.
LINE = "cpu  78568 0 31449 2635000 3699 0 1033 7846 120 0\n"


def test_steal_and_total_come_from_the_right_columns() -> None:
    steal, total = parse_cpu_line(LINE) or (None, None)
    assert steal == 7846
    assert total == 78568 + 31449 + 2635000 + 3699 + 1033 + 7846  # guest (120) not again


def test_the_share_is_of_the_cpu_time_between_two_readings() -> None:
    assert steal_share((100, 1000), (400, 2000)) == 0.3
    assert steal_share(None, (400, 2000)) is None
    assert steal_share((100, 1000), (100, 1000)) is None  # no time passed: no share


def test_anything_but_a_cpu_line_is_unknown(tmp_path: Path) -> None:
    assert parse_cpu_line("cpu0 1 2 3 4 5 6 7 8 9 10") is None
    assert parse_cpu_line("cpu 1 2 3") is None
    assert cpu_ticks(tmp_path / "missing") is None
    other = tmp_path / "stat"
    other.write_text(LINE)
    assert cpu_ticks(other) == (7846, 78568 + 31449 + 2635000 + 3699 + 1033 + 7846)


def test_this_machine_reports_a_share_between_zero_and_one() -> None:
    before = cpu_ticks()
    if sys.platform != "linux":
        assert before is None
        return
    assert before is not None
    deadline = time.process_time() + 0.1
    while time.process_time() < deadline:  # CPU time, so the total moves by several ticks
        pass
    share = steal_share(before, cpu_ticks())
    assert share is not None and 0.0 <= share <= 1.0
