"""CLI start-up benchmark: wall time of ``teamctl --help``, ``teamctl tasks`` and ``teamctl status``.

Each sample is a fresh process (what a person or a script pays), run from a sub-folder of a
scratch repository holding ``--tasks`` tasks (a fresh team). The bare interpreter start
(``python -c pass``) is measured in the same run for scale. Prints one JSON object
{"benchmark": "cli", "figures": [{"name", "value", "unit", "target", "ok"}, ...]} with medians;
exits 1 when a figure misses its target.

    python -m benchmarks.bench_cli [--samples 15] [--tasks 50] [--quick]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import at_most, finish, parser, scratch, shown

TARGET_MS = 200.0


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
    cmd = parser(__doc__)
    cmd.add_argument("--samples", type=int, default=15)
    cmd.add_argument("--tasks", type=int, default=50)
    args = cmd.parse_args()
    if args.quick:
        args.samples, args.tasks = 2, 5
    teamctl = teamctl_command()
    with scratch("cli") as tmp:
        repo = tmp / "repo"
        sub = repo / "src" / "pkg"
        sub.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run([*teamctl, "init"], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        from actors.factory import open_team

        with open_team(repo) as team:
            for i in range(args.tasks):
                team.board.create(f"task {i}", blocked_by=(f"task_{i}",) if i % 3 else ())
        figures = [
            shown(
                "python -c pass (median wall time)",
                median_ms([sys.executable, "-c", "pass"], sub, args.samples),
                "ms",
                1,
            )
        ]
        for name, extra in (
            ("teamctl --help", ["--help"]),
            ("teamctl tasks", ["tasks"]),
            ("teamctl status", ["status"]),
        ):
            value = median_ms([*teamctl, *extra], sub, args.samples)
            figures.append(at_most(f"{name} (median wall time)", value, "ms", TARGET_MS, 1))
    finish("cli", figures, quick=args.quick, tasks=args.tasks, samples=args.samples)


if __name__ == "__main__":
    main()
