"""What every benchmark shares: the figure record, the report (one JSON object, exit status from
the ``ok`` flags), the ``--quick`` flag and a scratch folder outside the working tree.

A report is ``{"benchmark": name, "quick": bool, "ok": bool, "figures": [figure, ...], ...}``;
a figure is ``{"name", "value", "unit", "target", "ok"}`` with ``target`` a string such as
``">= 500"``, ``"<= 1.3x baseline"`` or ``"report"`` (shown for scale, always ok).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
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


@contextmanager
def scratch(name: str) -> Iterator[Path]:
    """A fresh folder in the system's temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        yield Path(tmp)
