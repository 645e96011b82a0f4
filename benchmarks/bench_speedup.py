"""Speed-up: 8 independent tasks drained by 8 teammates vs by 1, every model call taking 300 ms.

A real ``TeamRuntime`` with the real team tools and a scripted model whose teammate replies each
take ``--latency-ms`` (the lead's replies are instant: it is not on the tasks' path). Teammates are
spawned and idle first; the clock starts when the 8 tasks are put on the board and stops when all
are completed and every teammate is idle again (each task takes two calls: one that completes it,
one that ends the turn). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from actors.factory import init_team
from actors.runtime.runtime import TeamRuntime
from actors.services import TeammateSpec
from actors.settings import Settings, TeamSettings
from harness.model.scripted import ScriptedModel


def script(latency_ms: float) -> dict[str, Any]:
    return {
        "agents": {
            "lead": {"rules": [{"match": "(?s).", "text": "ok"}, {"match": "^$", "text": "ok"}]},
            "*": {
                "rules": [
                    {
                        "match": r"You now hold task (?P<id>task_\d+) \(claim",
                        "latency_ms": latency_ms,
                        "tool_uses": [
                            {
                                "name": "complete_task",
                                "input": {"task_id": "{id}", "summary": "ok"},
                            }
                        ],
                    },
                    {"match": "(?s).", "text": "done", "priority": -1, "latency_ms": latency_ms},
                ]
            },
        }
    }


def drain(teammates: int, tasks: int, latency_ms: float, tmp: Path) -> float:
    root = tmp / f"repo{teammates}"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    settings = Settings(team=TeamSettings(max_teammates=max(8, teammates)))
    rt = TeamRuntime(
        root,
        model=ScriptedModel(script(latency_ms)),
        settings=settings,
        scheduler=False,
        jobs=False,
        fsync_transcripts=False,
    )
    rt.start()
    try:
        for i in range(teammates):
            rt.services.spawn_teammate(TeammateSpec(name=f"w{i + 1}"), by="lead")
        if not rt.wait_idle(30):
            raise RuntimeError("the team did not settle")
        t0 = time.monotonic()
        for i in range(tasks):
            rt.board.create(f"independent task {i + 1}")

        def all_done() -> bool:
            state = rt.board.refresh()
            if not all(t.status == "completed" for t in state.tasks.values()):
                return False
            return all(m.status == "idle" for m in state.members.values() if m.name != "lead")

        if not rt.wait_until(all_done, timeout=120):
            raise RuntimeError("tasks were not drained")
        return time.monotonic() - t0
    finally:
        rt.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    ones, eights = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            base = Path(tmp) / f"run{run}"
            base.mkdir()
            ones.append(drain(1, args.tasks, args.latency_ms, base))
            eights.append(drain(args.tasks, args.tasks, args.latency_ms, base))
    ones.sort()
    eights.sort()
    one, eight = ones[len(ones) // 2], eights[len(eights) // 2]
    speedup = one / eight
    figures = [
        {
            "name": "drain_1_teammate",
            "value": round(one, 3),
            "unit": "s",
            "target": None,
            "ok": True,
        },
        {
            "name": "drain_8_teammates",
            "value": round(eight, 3),
            "unit": "s",
            "target": None,
            "ok": True,
        },
        {
            "name": "speedup_8_vs_1",
            "value": round(speedup, 2),
            "unit": "x",
            "target": 7.0,
            "ok": speedup >= 7.0,
        },
    ]
    print(json.dumps({"benchmark": "speedup", "tasks": args.tasks, "figures": figures}))
    return 0 if all(f["ok"] for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
