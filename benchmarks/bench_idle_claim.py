"""Claim latency: a task becomes ready → an idle teammate has claimed it.

A real ``TeamRuntime`` with idle teammates (scripted model, no latency, the real team tools).
Another process adds one ready task at a time to the board (a journal append: the only wake-up
is the watcher's journal hint); the time from the start of the append to the ``task.claimed``
event's commit (the teammate's ``claimed`` runtime event) is one sample. (Not from the append's
return: with group commit a teammate may see the new line, claim it and have its own commit
durable, covering the creation too, before the creator's acknowledgement comes back —
docs/RELIABILITY.md, "What is guaranteed".) The teammate then
completes it and goes idle again before the next task. Prints one JSON object; exits 1 when a
figure misses its target.

    python -m benchmarks.bench_idle_claim [--tasks 100] [--teammates 2] [--quick]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actors.factory import init_team
from actors.runtime.runtime import TeamRuntime
from actors.services import TeammateSpec
from benchmarks.common import at_most, finish, parser, scratch, shown
from harness.model.scripted import ScriptedModel

CHILD = textwrap.dedent(
    """
    import sys, time
    from actors.factory import open_team
    team = open_team(__import__("pathlib").Path(sys.argv[1]))
    for line in sys.stdin:
        start = time.monotonic()
        team.board.create("task " + line.strip())
        print(start, flush=True)
    """
)

SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {"rules": [{"match": "(?s).", "text": "ok"}, {"match": "^$", "text": "ok"}]},
        "*": {
            "rules": [
                {
                    "match": r"You now hold task (?P<id>task_\d+) \(claim",
                    "tool_uses": [
                        {"name": "complete_task", "input": {"task_id": "{id}", "summary": "ok"}}
                    ],
                },
                {"match": "(?s).", "text": "done", "priority": -1},
            ]
        },
    }
}


def run(n: int, teammates: int, tmp: Path) -> list[float]:
    root = tmp / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    claimed: list[float] = []
    got = threading.Event()

    def on_event(event: Mapping[str, Any]) -> None:
        if event["type"] == "claimed":
            claimed.append(time.monotonic())
            got.set()

    rt = TeamRuntime(
        root,
        model=ScriptedModel(SCRIPT),
        on_event=on_event,
        scheduler=False,
        jobs=False,
        fsync_transcripts=False,
    )
    rt.start()
    for i in range(teammates):
        rt.services.spawn_teammate(TeammateSpec(name=f"w{i + 1}"), by="lead")
    if not rt.wait_idle(30):
        raise RuntimeError("the team did not settle")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    out: list[float] = []
    try:
        for i in range(n):
            got.clear()
            child.stdin.write(f"{i}\n")
            child.stdin.flush()
            ready = float(child.stdout.readline())
            if not got.wait(10):
                raise RuntimeError("nobody claimed the task")
            out.append((claimed[-1] - ready) * 1000.0)
            if not rt.wait_idle(10):
                raise RuntimeError("the team did not settle")
    finally:
        child.stdin.close()
        child.wait()
        rt.stop()
    return out


def main(argv: list[str] | None = None) -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--tasks", type=int, default=100)
    cmd.add_argument("--teammates", type=int, default=2)
    args = cmd.parse_args(argv)
    if args.quick:
        args.tasks = 5
    with scratch("idle-claim") as tmp:
        samples = sorted(run(args.tasks, args.teammates, tmp))
    p50 = statistics.median(samples)
    p99 = samples[max(0, int(len(samples) * 0.99) - 1)]
    figures = [at_most("claim_latency_p50", p50, "ms", 20.0), shown("claim_latency_p99", p99, "ms")]
    finish("idle_claim", figures, quick=args.quick, tasks=args.tasks)


if __name__ == "__main__":
    main()
