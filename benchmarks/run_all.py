"""Run every benchmark (``benchmarks/bench_*.py``), one subprocess at a time, and print one table
(benchmark, figure, value, target, ok) and then the combined JSON on the last line. Exits 1 if any
figure misses its target, or a benchmark fails or reports nothing.

    python -m benchmarks [--quick] [--only NAME ...] [--timeout S]

Each benchmark runs with a fresh temporary folder as its working directory, so nothing it
forgets to clean up lands in the checkout.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
            }
        return {
            "benchmark": self.name,
            "ok": False,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 1),
            "error": self.stderr[-2000:],
            "leftovers": self.leftovers,
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
    args = parser.parse_args(argv)
    outcomes = []
    for script in discover(args.dir, args.only):
        print(f"running {script.stem} ...", file=sys.stderr, flush=True)
        outcome = run_one(script, quick=args.quick, timeout=args.timeout)
        if outcome.report is None:
            print(outcome.stderr[-2000:], file=sys.stderr, flush=True)
        outcomes.append(outcome)
    ok = all(o.ok for o in outcomes)
    print(table(outcomes))
    print()
    print(
        json.dumps({"ok": ok, "quick": args.quick, "benchmarks": [o.as_json() for o in outcomes]}),
        flush=True,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
