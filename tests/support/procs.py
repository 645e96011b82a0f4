"""Child Python processes for the fault suites: started together, released at once, always
reaped (killed if a test fails half-way)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


class Children:
    """Python children running ``code`` with per-child arguments. Each child should read one
    line from stdin before it starts racing (``go``), print one JSON line and exit."""

    def __init__(self, code: str, argv: Sequence[Sequence[str]]) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for args in argv
        ]

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def ready(self) -> None:
        """Wait until every child printed its ``ready`` line (imports done, objects built)."""
        for proc in self.procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == "ready", (line, proc.stderr.read() if proc.stderr else "")

    def go(self) -> None:
        """Release every child at once (each is blocked on reading stdin)."""
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()

    def results(self, timeout: float = 120) -> list[Any]:
        """Every child's JSON line; fails with the child's stderr if it did not exit 0."""
        out = []
        for proc in self.procs:
            stdout, stderr = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, stderr
            out.append(json.loads(stdout.strip().splitlines()[-1]))
        return out

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


@contextmanager
def children(code: str, argv: Sequence[Sequence[str]]) -> Iterator[Children]:
    """``Children`` that are killed and reaped however the block ends."""
    group = Children(code, argv)
    try:
        yield group
    finally:
        group.kill()
