"""Start-up, drain and shut-down of ``teamctl run --headless`` on a scripted team workload.

The workload is ``benchmarks/workloads/independent4.yaml`` (4 independent tasks, 2 teammates, each
writing one file) served by the local fake Messages API (``harness/model/fakeapi.py``, zero
latency) to ``teamctl`` run as a real subprocess, as ``benchmarks/bench_tokens.py`` runs it.
Python's start-up and ``import anthropic`` set the floor of a process that calls the model, so the
start-up figure is a ratio to the bare ``python -c "import anthropic"`` measured in the same run.
Figures (medians over ``--runs``):

- ``startup_vs_bare_import_anthropic``: process start → the first model request arrives, over the
  bare import time timed right before and after the same run; the median of the runs' ratios;
  target <= 1.3.
- ``drain_first_request_to_last_file``: the first model request → the last expected file written
  (its mtime), for scale (the issue compares it with another project's run, not measured here).
- ``exit_after_last_completion``: the last ``task.completed`` event → the process has exited;
  target <= 100 ms.

Prints one JSON object; exits 1 when a figure misses its target.

    python -m benchmarks.bench_startup [--runs 5] [--samples 5] [--quick]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_tokens import child_env, files_ok, load, make_repo, teamctl_command
from benchmarks.common import at_most, finish, parser, scratch, shown
from harness.model.fakeapi import FakeMessagesServer, RecordedRequest

WORKLOAD = "independent4"
STARTUP_RATIO = 1.3
EXIT_MS = 100.0


class StampedServer(FakeMessagesServer):
    """The fake API, noting the wall time at which the first request arrived."""

    def __init__(self, script: dict[str, Any]) -> None:
        super().__init__(script)
        self.first_at: float | None = None
        self.first = threading.Event()

    def record(self, request: RecordedRequest) -> None:
        if self.first_at is None:
            self.first_at = time.time()
            self.first.set()
        super().record(request)


def bare_import_s(env: dict[str, str], cwd: Path, samples: int) -> float:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import anthropic"], cwd=cwd, env=env, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def last_completion(root: Path) -> float:
    """The ``ts`` of the last ``task.completed`` event in the journal."""
    last = 0.0
    journal = root / ".team" / "journal.jsonl"
    for line in journal.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == "task.completed":
            last = max(last, float(event["ts"]))
    return last


def one_run(workload: dict[str, Any], base: Path, timeout: float, samples: int) -> dict[str, float]:
    """Seconds: start → first request, first request → last file, last completion → exit, and
    the bare ``import anthropic`` with the same environment right after."""
    with StampedServer(workload["team"]) as server:
        env = child_env(base, server, None)
        root = make_repo(base, workload, env, team=True)
        args = ["run", "--headless", "--timeout", str(timeout), workload["prompt"]]
        # The bare import is timed right before and right after the run, so the run's ratio
        # pairs times taken under the same load.
        before = bare_import_s(env, root, (samples + 1) // 2)
        started = time.time()
        proc = subprocess.run(
            teamctl_command(*args), cwd=root, env=env, capture_output=True, text=True
        )
        ended = time.time()
        bare = statistics.median([before, bare_import_s(env, root, max(samples // 2, 1))])
    if proc.returncode != 0 or not files_ok(root, workload) or server.first_at is None:
        raise SystemExit(f"the team run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    last_file = max(os.stat(root / spec["path"]).st_mtime_ns / 1e9 for spec in workload["files"])
    return {
        "startup": server.first_at - started,
        "drain": last_file - server.first_at,
        "exit": ended - last_completion(root),
        "bare": bare,
    }


def main() -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--runs", type=int, default=5)
    cmd.add_argument("--samples", type=int, default=5, help="bare imports timed")
    cmd.add_argument("--timeout", type=float, default=120.0)
    args = cmd.parse_args()
    if args.quick:
        args.runs, args.samples = 1, 1
    workload = load(WORKLOAD)
    with scratch("startup") as tmp:
        runs = [  # each run times the bare import too, so both see the same machine
            one_run(workload, tmp / f"run{n}", args.timeout, args.samples) for n in range(args.runs)
        ]
    startup = statistics.median(r["startup"] for r in runs)
    bare = statistics.median(r["bare"] for r in runs)
    ratio = statistics.median(r["startup"] / r["bare"] for r in runs)
    drain = statistics.median(r["drain"] for r in runs)
    exit_ms = statistics.median(r["exit"] for r in runs) * 1000
    figures = [
        at_most("startup_vs_bare_import_anthropic", ratio, "x", STARTUP_RATIO, 2),
        shown("startup_to_first_model_request", startup * 1000, "ms", 1),
        shown("bare_python_import_anthropic", bare * 1000, "ms", 1),
        shown("drain_first_request_to_last_file", drain * 1000, "ms", 1),
        at_most("exit_after_last_completion", exit_ms, "ms", EXIT_MS, 1),
    ]
    finish("startup", figures, quick=args.quick, workload=WORKLOAD, runs=args.runs)


if __name__ == "__main__":
    main()
