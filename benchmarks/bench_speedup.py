"""Speed-up: 8 independent tasks drained by 8 teammates vs by 1, every model call taking 300 ms.

A real ``TeamRuntime`` with the real team tools and a scripted model whose teammate replies each
take ``--latency-ms`` (the lead's replies are instant: it is not on the tasks' path). Teammates are
spawned and idle first; the clock starts when the 8 tasks are put on the board (in one commit, as
``teamctl task import`` does) and stops when all are completed and every teammate is idle again
(each task takes one model call: its ``complete_task`` ends the turn, a terminal tool). The
speed-up is a ratio of two drains in the same run. Prints one JSON object; exits 1 when a figure
misses its target.

Both drains time the same span and pay the same fixed costs once: the commit that puts the tasks
on the board, the watcher noticing it, and the tail of the last task (its usage record,
completion, notice and status change); spawning the teammates, waiting for them to settle and
stopping the runtime are outside the clock for both. What a process builds once (the teammate
tools' JSON schemas, at the first model call) is paid by the first run's one-teammate drain,
which runs first; with ``--runs`` of 3 or more the medians are of drains that find it built.

``--timeline`` adds, for the many-teammate drain, the ms from the tasks put on the board to the
last claim, the last completion and the last teammate idle (medians; from the journal's
timestamps): how much of the drain is fan-out before the model calls and how much the tail.

    python -m benchmarks.bench_speedup [--tasks 8] [--latency-ms 300] [--runs 3] [--timeline]
        [--quick]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from actors.board.bulk import NewTask
from actors.factory import init_team
from actors.runtime.runtime import TeamRuntime
from actors.services import TeammateSpec
from actors.settings import Settings, TeamSettings
from benchmarks.common import at_least, finish, parser, scratch, shown
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


PHASES = {
    "claimed": "task.claimed",
    "completed": "task.completed",
    "idle": "member.status_changed",
}
"""Where the time of the many-teammate drain goes (``--timeline``): the last event of each kind,
in ms after the tasks were put on the board, from the journal's timestamps."""


def timeline(root: Path, start: float) -> dict[str, float]:
    """The ms from ``start`` (wall time) to the last claim, completion and teammate idle."""
    last = dict.fromkeys(PHASES, 0.0)
    for line in (root / ".team" / "journal.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        for phase, kind in PHASES.items():
            if event.get("type") != kind or event["ts"] < start:
                continue
            if phase == "idle" and event["data"].get("status") != "idle":
                continue
            last[phase] = max(last[phase], (event["ts"] - start) * 1000)
    return last


def drain(
    teammates: int, tasks: int, latency_ms: float, tmp: Path
) -> tuple[float, dict[str, float]]:
    """Seconds from the tasks put on the board to all completed and every teammate idle, and
    the ``timeline`` of that drain."""
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
        t0, wall0 = time.monotonic(), time.time()
        # All at once, as `teamctl task import` puts them (one journal commit).
        rt.board.create_many([NewTask(f"independent task {i + 1}") for i in range(tasks)])

        def all_done() -> bool:
            # The state as this process last wrote or read it, without a refresh: every change
            # that ends the drain is a command of this process, folded in before the waiter is
            # told; a refresh here would queue on the board's lock behind the teammates' writes.
            state = rt.board.state
            if not all(t.status == "completed" for t in state.tasks.values()):
                return False
            return all(m.status == "idle" for m in state.members.values() if m.name != "lead")

        if not rt.wait_until(all_done, timeout=120):
            raise RuntimeError("tasks were not drained")
        took = time.monotonic() - t0
    finally:
        rt.stop()
    return took, timeline(root, wall0)


def main(argv: list[str] | None = None) -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--tasks", type=int, default=8)
    cmd.add_argument("--latency-ms", type=float, default=300.0)
    cmd.add_argument("--runs", type=int, default=3)
    cmd.add_argument(
        "--timeline",
        action="store_true",
        help="also report the last claim, completion and idle of the many-teammate drain",
    )
    args = cmd.parse_args(argv)
    if args.quick:
        args.tasks, args.latency_ms, args.runs = 2, 50.0, 1
    ones, eights = [], []
    phases: dict[str, list[float]] = {phase: [] for phase in PHASES}
    with scratch("speedup") as tmp:
        for run in range(args.runs):
            base = tmp / f"run{run}"
            base.mkdir()
            ones.append(drain(1, args.tasks, args.latency_ms, base)[0])
            took, last = drain(args.tasks, args.tasks, args.latency_ms, base)
            eights.append(took)
            for phase, ms in last.items():
                phases[phase].append(ms)
    one, eight = sorted(ones)[len(ones) // 2], sorted(eights)[len(eights) // 2]
    # n teammates on n tasks can at best be n times faster; 7 of 8 is the target.
    target = 7.0 * args.tasks / 8
    figures = [
        shown("drain_1_teammate", one, "s"),
        shown(f"drain_{args.tasks}_teammates", eight, "s"),
        at_least(f"speedup_{args.tasks}_vs_1", one / eight, "x", target, 2),
    ]
    if args.timeline:
        figures += [
            shown(f"last_{phase}_ms", statistics.median(ms), "ms", 1)
            for phase, ms in phases.items()
        ]
    finish("speedup", figures, quick=args.quick, tasks=args.tasks)


if __name__ == "__main__":
    main()
