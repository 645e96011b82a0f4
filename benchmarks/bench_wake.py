"""Wake latency: a message written by another process → the lead's turn starts (its model call).

A real ``TeamRuntime`` hosts the lead (scripted model, no latency). A child process delivers one
message at a time into the lead's Maildir and reports the ``CLOCK_MONOTONIC`` time (system-wide
on Linux) at which the delivery was durable; the lead's model records when its call starts. The
watcher (inotify, debounce 5 ms, step 5 ms) is the only path: nothing in-process tells the lead.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from actors.factory import init_team
from actors.runtime.runtime import TeamRuntime
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        samples = sorted(run(args.messages, Path(tmp)))
    p50 = statistics.median(samples)
    p99 = samples[max(0, int(len(samples) * 0.99) - 1)]

    def fig(name: str, value: float, target: float | None) -> dict[str, Any]:
        ok = target is None or value <= target
        return {"name": name, "value": round(value, 3), "unit": "ms", "target": target, "ok": ok}

    figures = [fig("wake_latency_p50", p50, 10.0), fig("wake_latency_p99", p99, 50.0)]
    print(json.dumps({"benchmark": "wake", "messages": args.messages, "figures": figures}))
    return 0 if all(f["ok"] for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
