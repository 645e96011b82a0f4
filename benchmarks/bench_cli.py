"""CLI start-up benchmark: wall time of ``teamctl --help`` and ``teamctl tasks``.

Each sample is a fresh process (what a person or a script pays), run from a sub-folder of a
scratch repository holding ``--tasks`` tasks. Prints one JSON object:
{"benchmark": "cli", "figures": [{"name", "value", "unit", "target", "ok"}, ...]} with medians.

    python benchmarks/bench_cli.py [--samples 15] [--tasks 50]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MS = 300.0


def teamctl_command() -> list[str]:
    """The installed console script, or the module entry point when it is not on PATH."""
    script = shutil.which("teamctl") or str(Path(sys.executable).with_name("teamctl"))
    if Path(script).exists():
        return [script]
    return [sys.executable, "-c", "from actors.cli.main import main; main()"]


def median_ms(cmd: list[str], cwd: Path, samples: int) -> float:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--tasks", type=int, default=50)
    args = parser.parse_args()
    teamctl = teamctl_command()
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch) / "repo"
        sub = repo / "src" / "pkg"
        sub.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run([*teamctl, "init"], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        from actors.factory import open_team

        with open_team(repo) as team:
            for i in range(args.tasks):
                team.board.create(f"task {i}", blocked_by=(f"task_{i}",) if i % 3 else ())
        figures = []
        for name, extra in (("teamctl --help", ["--help"]), ("teamctl tasks", ["tasks"])):
            value = median_ms([*teamctl, *extra], sub, args.samples)
            figures.append(
                {
                    "name": f"{name} (median wall time)",
                    "value": round(value, 1),
                    "unit": "ms",
                    "target": f"<= {TARGET_MS:.0f}",
                    "ok": value <= TARGET_MS,
                }
            )
    print(json.dumps({"benchmark": "cli", "figures": figures}))


if __name__ == "__main__":
    main()
