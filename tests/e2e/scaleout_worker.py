"""One racing CLI worker process of tests/e2e/test_scaleout_done.py.

``python -m tests.e2e.scaleout_worker NAME SEED``, started in a checkout, runs ``teamctl``
commands in a loop: the console script's own click group (``actors.cli.main.cli``), each
command opening the team, acting and closing it exactly as the ``teamctl`` process would, but
in this one process, so eight workers cost eight interpreter start-ups instead of one per
command. Each round: ``tasks --status ready --json``; ``task claim ID --as NAME`` on one of
them at random; ``task complete`` when the claim was won. It stops when none is ready (a task in
progress is its owner's to complete) and prints one JSON line, ``{"completed": [...], "lost":
[...]}``. A command failing in any other way exits 1 naming it.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import sys


def teamctl(*args: str) -> tuple[int, str, str]:
    """``teamctl ARGS`` in this process: (exit code, stdout, stderr)."""
    from actors.cli.main import cli

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(list(args), prog_name="teamctl")
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def ok(*args: str) -> str:
    code, out, err = teamctl(*args)
    if code != 0:
        sys.exit(f"teamctl {' '.join(args)} exited {code}:\n{err}")
    return out


def main(name: str, seed: int) -> None:
    rng = random.Random(seed)
    completed: list[str] = []
    lost: list[str] = []
    while True:
        ready = [t["id"] for t in json.loads(ok("tasks", "--status", "ready", "--json"))]
        if not ready:
            break
        task_id = rng.choice(ready)
        code, _, err = teamctl("task", "claim", task_id, "--as", name)
        if code != 0:
            if "cannot claim" not in err:  # only a lost race is an expected refusal
                sys.exit(f"teamctl task claim {task_id} exited {code}:\n{err}")
            lost.append(task_id)  # another worker, in this clone or the other, was first
            continue
        ok("task", "complete", task_id, "--as", name, "--summary", f"{name} did {task_id}")
        completed.append(task_id)
    print(json.dumps({"completed": completed, "lost": lost}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
