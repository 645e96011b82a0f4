"""Idle cost: 32 idle teammates in one runtime — CPU share of one core and RSS per teammate.

A real ``TeamRuntime`` (watcher with its 2 s rescan tick, Supervisor) hosts the lead and 32
teammates that have nothing to do (scripted model, never called). CPU is the process's user+sys
time over a quiet window divided by the window; RSS per teammate is the growth of the process's
resident set from the lead-only runtime to the 32-teammate one, divided by 32. The same team
with the fallback watcher (``TEAMCTL_WATCHER=watchfiles``, a 5 ms polling step) is measured in
the same run for comparison (shown, no target). Prints one JSON object; exits 1 when a figure
misses its target.

    python -m benchmarks.bench_idle_cost [--teammates 32] [--window 10] [--quick]
"""

from __future__ import annotations

import gc
import os
import resource
import subprocess
import threading
import time
from pathlib import Path

from actors.factory import init_team
from actors.runtime.runtime import TeamRuntime
from actors.services import TeammateSpec
from actors.settings import Settings, TeamSettings
from benchmarks.common import at_most, finish, parser, scratch, shown
from harness.model.scripted import ScriptedModel


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(teammates: int, window_s: float, tmp: Path) -> dict[str, float]:
    root = tmp / "repo"
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    model = ScriptedModel({"agents": {"*": {"rules": []}}})
    settings = Settings(team=TeamSettings(max_teammates=teammates + 1))
    rt = TeamRuntime(
        root,
        model=model,
        settings=settings,
        scheduler=False,
        jobs=False,
        fsync_transcripts=False,
    )
    rt.start()
    try:
        # Warm the code paths a teammate uses, so the difference is per-teammate state only.
        rt.services.spawn_teammate(TeammateSpec(name="warm"), by="lead")
        rt.wait_idle(30)
        gc.collect()
        before = rss_kib()
        for i in range(teammates):
            rt.services.spawn_teammate(TeammateSpec(name=f"w{i + 1}"), by="lead")
        if not rt.wait_idle(60):
            raise RuntimeError("the team did not settle")
        gc.collect()
        after = rss_kib()
        c0, t0 = cpu_s(), time.monotonic()
        threading.Event().wait(window_s)  # the quiet window being measured
        c1, t1 = cpu_s(), time.monotonic()
        return {"cpu_pct": 100.0 * (c1 - c0) / (t1 - t0), "rss_kib": (after - before) / teammates}
    finally:
        rt.stop()


def main(argv: list[str] | None = None) -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--teammates", type=int, default=32)
    cmd.add_argument("--window", type=float, default=10.0)
    args = cmd.parse_args(argv)
    if args.quick:
        args.teammates, args.window = 2, 0.5
    with scratch("idle-cost") as tmp:
        got = run(args.teammates, args.window, tmp / "default")
        before, os.environ["TEAMCTL_WATCHER"] = os.environ.get("TEAMCTL_WATCHER"), "watchfiles"
        try:
            fallback = run(args.teammates, args.window, tmp / "fallback")
        finally:
            if before is None:
                del os.environ["TEAMCTL_WATCHER"]
            else:
                os.environ["TEAMCTL_WATCHER"] = before
    figures = [
        at_most("idle_cpu_pct_of_one_core", got["cpu_pct"], "%", 1.0),
        at_most("idle_rss_per_teammate", got["rss_kib"] / 1024.0, "MiB", 1.0),
        shown("idle_cpu_pct_of_one_core_watchfiles_fallback", fallback["cpu_pct"], "%"),
    ]
    finish("idle_cost", figures, quick=args.quick, teammates=args.teammates)


if __name__ == "__main__":
    main()
