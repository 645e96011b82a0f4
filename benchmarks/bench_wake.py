"""Wake latency: a message written by another process → the lead's turn starts (its model call).

A real ``TeamRuntime`` hosts the lead (scripted model, no latency). A child process delivers one
message at a time into the lead's Maildir and reports the ``CLOCK_MONOTONIC`` time (system-wide
on Linux) at which the delivery was durable; the lead's model records when its call starts. The
watcher (blocking inotify on Linux, watchfiles elsewhere) is the only path: nothing in-process
tells the lead.
Prints one JSON object; exits 1 when a figure misses its target.

    python -m benchmarks.bench_wake [--messages 200] [--quick]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from actors.factory import init_team
from actors.runtime.runtime import TeamRuntime
from benchmarks.common import at_most, finish, parser, scratch
from harness.model.scripted import ScriptedModel
from harness.ports import ModelRequest, ModelResponse

CHILD = textwrap.dedent(
    """
    import sys, time
    from mailboxes.maildir import Maildir
    from mailboxes.messages import MessageDraft
    box = Maildir(sys.argv[1])
    for line in sys.stdin:
        box.deliver("bench", MessageDraft.text("lead", "ping " + line.strip()))
        print(time.monotonic(), flush=True)
    """
)


class Stamped:
    """Records when each call starts."""

    def __init__(self) -> None:
        self.inner = ScriptedModel(
            {"agents": {"lead": {"rules": [{"match": "ping", "text": "ok"}]}}}
        )
        self.started: list[float] = []
        self.called = threading.Event()

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.started.append(time.monotonic())
        self.called.set()
        return self.inner.complete(request)


def run(n: int, tmp: Path) -> list[float]:
    root = tmp / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    model = Stamped()
    rt = TeamRuntime(root, model=model, scheduler=False, jobs=False, fsync_transcripts=False)
    rt.start()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root / ".team" / "mailboxes")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    out: list[float] = []
    try:
        for i in range(n):
            model.called.clear()
            child.stdin.write(f"{i}\n")
            child.stdin.flush()
            written = float(child.stdout.readline())
            if not model.called.wait(10):
                raise RuntimeError("the lead never woke")
            out.append((model.started[-1] - written) * 1000.0)
            if not rt.wait_idle(10):
                raise RuntimeError("the lead never finished its turn")
    finally:
        child.stdin.close()
        child.wait()
        rt.stop()
    return out


def main(argv: list[str] | None = None) -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--messages", type=int, default=200)
    args = cmd.parse_args(argv)
    if args.quick:
        args.messages = 5
    with scratch("wake") as tmp:
        samples = sorted(run(args.messages, tmp))
    p50 = statistics.median(samples)
    p99 = samples[max(0, int(len(samples) * 0.99) - 1)]
    figures = [
        at_most("wake_latency_p50", p50, "ms", 10.0),
        at_most("wake_latency_p99", p99, "ms", 50.0),
    ]
    finish("wake", figures, quick=args.quick, messages=args.messages)


if __name__ == "__main__":
    main()
