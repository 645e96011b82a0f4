"""Run every benchmark (``benchmarks/bench_*.py``), one subprocess at a time, and print one table
(benchmark, figure, value, target, ok) and then the combined JSON on the last line. Exits 1 if any
figure misses its target, or a benchmark fails or reports nothing.

    python -m benchmarks [--quick] [--only NAME ...] [--timeout S] [--probe-rounds N]

Each benchmark runs with a fresh temporary folder as its working directory, so nothing it
forgets to clean up lands in the checkout. Before each benchmark and after the last, this process
times a fixed piece of Python work (``benchmarks.common.host_probe``), and it reads the CPU time
the hypervisor stole while each benchmark ran (``steal_share``): the lines under the table say
how fast and how steady the host was while each figure was taken, since on a shared virtual
machine the same code runs up to twice as slowly from one minute to the next. They are reported,
not judged.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import cpu_ticks, host_probe, steal_share

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass
class Outcome:
    """One benchmark's run: its exit status and its report (None if it printed none)."""

    name: str
    exit_code: int
    report: dict[str, Any] | None
    seconds: float
    stderr: str
    leftovers: list[str]
    """What the benchmark left in its working directory (scratch belongs in a temporary one)."""
    host: dict[str, Any] = field(default_factory=dict)
    """How fast the host was just before (``probe_*_ms``) and how much CPU time was stolen from
    it during (``steal_share``) the run, when measured."""

    @property
    def ok(self) -> bool:
        """Reported, every figure ok, an exit status that says so, and nothing left behind."""
        reported_ok = (
            self.report is not None
            and self.report.get("ok") is True
            and all(f.get("ok") is True for f in self.report["figures"])
        )
        return reported_ok and self.exit_code == 0 and not self.leftovers

    def as_json(self) -> dict[str, Any]:
        if self.report is not None:
            return {
                **self.report,
                "exit_code": self.exit_code,
                "seconds": round(self.seconds, 1),
                "leftovers": self.leftovers,
                "host": self.host,
            }
        return {
            "benchmark": self.name,
            "ok": False,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 1),
            "error": self.stderr[-2000:],
            "leftovers": self.leftovers,
            "host": self.host,
            "figures": [],
        }


def discover(folder: Path, only: list[str]) -> list[Path]:
    """``bench_*.py`` in ``folder`` by name; ``only`` keeps those named (``claims`` or
    ``bench_claims``)."""
    found = sorted(folder.glob("bench_*.py"))
    if not only:
        return found
    wanted = {n.removeprefix("bench_").removesuffix(".py") for n in only}
    missing = wanted - {p.stem.removeprefix("bench_") for p in found}
    if missing:
        raise SystemExit(f"no such benchmark: {', '.join(sorted(missing))}")
    return [p for p in found if p.stem.removeprefix("bench_") in wanted]


def last_report(stdout: str) -> dict[str, Any] | None:
    """The last line of ``stdout`` that is a JSON object with ``figures``."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                body = json.loads(line)
            except ValueError:
                continue
            if isinstance(body, dict) and isinstance(body.get("figures"), list):
                return body
    return None


def run_one(script: Path, *, quick: bool, timeout: float) -> Outcome:
    """Run one benchmark in a fresh working folder; its report and exit status."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    name = script.stem.removeprefix("bench_")
    cmd = [sys.executable, str(script), *(["--quick"] if quick else [])]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"bench-run-{name}-") as cwd:
        # Its own process group: a timeout or a Ctrl-C stops the benchmark *and* what it
        # started (servers, teammates), not only the benchmark's own process.
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            _, err = proc.communicate()
            return Outcome(name, -1, None, time.monotonic() - start, f"timed out\n{err}", [])
        except BaseException:
            _stop_group(proc)
            raise
        leftovers = sorted(os.listdir(cwd))
    return Outcome(
        name, proc.returncode, last_report(out), time.monotonic() - start, err, leftovers
    )


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the benchmark's process group, SIGKILL to what is left after 5 s."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its children, if any outlived it
        return


def table(outcomes: list[Outcome]) -> str:
    """The figures of every benchmark as an aligned text table."""
    rows = [("benchmark", "figure", "value", "target", "ok")]
    for out in outcomes:
        if out.report is None:
            rows.append((out.name, f"(exit {out.exit_code}, no report)", "", "", "FAIL"))
            continue
        if out.report.get("skipped"):
            reason = str(out.report["skipped"])
            rows.append((out.name, f"(skipped: {reason})", "", "", "skip"))
        for fig in out.report["figures"]:
            value = f"{fig.get('value')} {fig.get('unit', '')}".strip()
            target = fig.get("target")
            rows.append(
                (
                    str(out.report.get("benchmark", out.name)),
                    str(fig.get("name")),
                    value,
                    "" if target is None else str(target),
                    "ok" if fig.get("ok") else "SHORT",
                )
            )
        if out.exit_code != 0 and all(f.get("ok") for f in out.report["figures"]):
            rows.append((out.name, f"(exit {out.exit_code})", "", "", "FAIL"))
        if out.leftovers:
            rows.append((out.name, f"(left {len(out.leftovers)} files in its cwd)", "", "", "FAIL"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (the smoke test)")
    parser.add_argument("--only", action="append", default=[], help="run this one (repeatable)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per benchmark, seconds")
    parser.add_argument("--dir", type=Path, default=HERE, help="folder of bench_*.py scripts")
    parser.add_argument(
        "--probe-rounds",
        type=int,
        default=7,
        help="passes of the host probe before each benchmark (0: do not probe)",
    )
    args = parser.parse_args(argv)
    if args.probe_rounds < 0:
        parser.error("--probe-rounds must be 0 or more")
    outcomes = []
    for script in discover(args.dir, args.only):
        print(f"running {script.stem} ...", file=sys.stderr, flush=True)
        probe = _probe(args.probe_rounds)
        ticks = cpu_ticks()
        outcome = run_one(script, quick=args.quick, timeout=args.timeout)
        outcome.host = {**probe, **_stolen(ticks)}
        if outcome.report is None:
            print(outcome.stderr[-2000:], file=sys.stderr, flush=True)
        outcomes.append(outcome)
    after = _probe(args.probe_rounds)
    ok = all(o.ok for o in outcomes)
    print(table(outcomes))
    lines = host_lines(outcomes, after)
    if lines:
        print()
        print("\n".join(lines))
    print()
    body = {"ok": ok, "quick": args.quick, "benchmarks": [o.as_json() for o in outcomes]}
    if after:
        body["host_after"] = after
    print(json.dumps(body), flush=True)
    return 0 if ok else 1


def _probe(rounds: int) -> dict[str, float]:
    """``host_probe`` as ``probe_median_ms`` and ``probe_fastest_ms`` (nothing if ``rounds`` is
    0)."""
    if rounds == 0:
        return {}
    return {f"probe_{key}": value for key, value in host_probe(rounds).items()}


def _stolen(before: tuple[int, int] | None) -> dict[str, float]:
    share = steal_share(before, cpu_ticks())
    return {} if share is None else {"steal_share": round(share, 3)}


def host_lines(outcomes: list[Outcome], after: dict[str, float]) -> list[str]:
    """The lines under the table: the host probe before each benchmark (and after the last),
    the steal during each, and the spread of the probe over the run (slowest / fastest)."""
    rows = []
    medians = []
    for out in outcomes:
        cells = []
        if "probe_median_ms" in out.host:
            medians.append(out.host["probe_median_ms"])
            cells.append(f"probe {out.host['probe_median_ms']:.1f} ms before")
        if "steal_share" in out.host:
            cells.append(f"steal {out.host['steal_share']:.3f} during")
        if cells:
            rows.append(f"host  {out.name}: {', '.join(cells)}")
    if "probe_median_ms" in after:
        medians.append(after["probe_median_ms"])
        rows.append(f"host  after the last: probe {after['probe_median_ms']:.1f} ms")
    if len(medians) >= 2 and min(medians) > 0:
        rows.append(
            f"host  probe spread over the run: {max(medians) / min(medians):.2f}x "
            f"(fastest {min(medians):.1f} ms, slowest {max(medians):.1f} ms; "
            "CPU-bound figures scale with it)"
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
