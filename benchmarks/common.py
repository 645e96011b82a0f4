"""What every benchmark shares: the figure record, the report (one JSON object, exit status from
the ``ok`` flags), the ``--quick`` flag and a scratch folder outside the working tree.

A report is ``{"benchmark": name, "quick": bool, "ok": bool, "figures": [figure, ...], ...}``;
a figure is ``{"name", "value", "unit", "target", "ok"}`` with ``target`` a string such as
``">= 500"``, ``"<= 1.3x baseline"`` or ``"report"`` (shown for scale, always ok).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Figure = dict[str, Any]

FIGURE_KEYS = ("name", "value", "unit", "target", "ok")


def figure(name: str, value: float, unit: str, target: str, ok: bool, digits: int = 3) -> Figure:
    """One figure; ``target`` is shown as written."""
    return {"name": name, "value": round(value, digits), "unit": unit, "target": target, "ok": ok}


def at_least(name: str, value: float, unit: str, floor: float, digits: int = 3) -> Figure:
    """A figure that must be ``>= floor``."""
    return figure(name, value, unit, f">= {floor:g}", value >= floor, digits)


def at_most(name: str, value: float, unit: str, ceiling: float, digits: int = 3) -> Figure:
    """A figure that must be ``<= ceiling``."""
    return figure(name, value, unit, f"<= {ceiling:g}", value <= ceiling, digits)


def shown(name: str, value: float, unit: str, digits: int = 3) -> Figure:
    """A figure reported for scale, with no target."""
    return figure(name, value, unit, "report", True, digits)


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser with the shared ``--quick`` flag (small sizes, for the smoke test)."""
    out = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    out.add_argument(
        "--quick", action="store_true", help="small sizes: checks that it runs, not the figures"
    )
    return out


def report(benchmark: str, figures: Sequence[Figure], *, quick: bool, **extra: Any) -> int:
    """Print the report as one JSON line; the exit status: 0 if every figure is ok, else 1."""
    ok = all(f["ok"] for f in figures)
    body = {"benchmark": benchmark, "quick": quick, "ok": ok, **extra, "figures": list(figures)}
    print(json.dumps(body), flush=True)
    return 0 if ok else 1


def finish(benchmark: str, figures: Sequence[Figure], *, quick: bool, **extra: Any) -> None:
    """``report`` and exit with its status."""
    sys.exit(report(benchmark, figures, quick=quick, **extra))


def cpu_ticks(stat: Path = Path("/proc/stat")) -> tuple[int, int] | None:
    """``(steal, total)`` CPU time since boot, in ticks, from Linux's ``/proc/stat`` (None
    elsewhere): on a virtual machine, steal is time its CPUs were ready to run but the host ran
    someone else. Two readings around a measurement give the share of the machine's CPU taken
    away meanwhile (``steal_share``), which says how far a CPU-bound figure is the host's doing."""
    try:
        with stat.open() as f:
            line = f.readline()
    except OSError:
        return None
    return parse_cpu_line(line)


def parse_cpu_line(line: str) -> tuple[int, int] | None:
    """``(steal, total)`` from the ``cpu`` line of ``/proc/stat``: user, nice, system, idle,
    iowait, irq, softirq, steal (guest time is already counted in user and nice, so it is not
    added again)."""
    fields = line.split()
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    ticks = [int(v) for v in fields[1:9]]
    return ticks[7], sum(ticks)


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of CPU time stolen between two ``cpu_ticks`` readings (None if unknown)."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def percentile(values: list[float], q: float) -> float:
    """The value at quantile ``q`` (0..1) of ``values``: the nearest rank, never past the end."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def scratch(name: str) -> Iterator[Path]:
    """A fresh folder in the system's temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        yield Path(tmp)


# The probe's input: JSON lines like a journal's, made once (the same bytes in every run).
_PROBE_LINES = [
    json.dumps(
        {
            "seq": n,
            "type": "task.claimed",
            "actor": f"worker-{n % 8}",
            "ts": n * 0.5,
            "data": {"task_id": f"task_{n // 3}", "owner": f"worker-{n % 8}", "epoch": n % 4},
        },
        sort_keys=True,
    )
    for n in range(20_000)
]


def _probe_once() -> float:
    """Milliseconds for one fixed pass of the kind of work the CPU-bound figures do: parse JSON
    lines, build a tuple per line, index and count them in dicts."""
    start = time.perf_counter()
    rows: dict[str, tuple[object, ...]] = {}
    counts: dict[str, int] = {}
    for line in _PROBE_LINES:
        event = json.loads(line)
        data = event["data"]
        rows[data["task_id"]] = (event["seq"], event["actor"], data["owner"], data["epoch"])
        counts[event["actor"]] = counts.get(event["actor"], 0) + 1
    if len(rows) != len(_PROBE_LINES) // 3 + 1 or sum(counts.values()) != len(_PROBE_LINES):
        raise AssertionError("the host probe computed something else")  # pragma: no cover
    return (time.perf_counter() - start) * 1000


def host_probe(rounds: int = 7) -> dict[str, float]:
    """How fast this host runs Python right now: the median and fastest of ``rounds`` passes of
    a fixed piece of work (``_probe_once``, tens of milliseconds). The same code on a shared
    virtual machine takes from 1x to 2x as long from one minute to the next. ``python -m
    benchmarks`` probes before every benchmark and after the last, so its table says how fast
    and how steady the host was while each figure was taken."""
    _probe_once()  # not counted: the first pass in a process also grows its heap
    times = [_probe_once() for _ in range(rounds)]
    return {"median_ms": round(statistics.median(times), 2), "fastest_ms": round(min(times), 2)}
