"""Draining the 4-task / 2-teammate workload: teamctl against learn-claude-code's s15, same run.

The baseline is ``agents/s15_agent_teams.py`` of https://github.com/shareAI-lab/learn-claude-code
(MIT licence) at the commit pinned in ``benchmarks/get_s15.sh``: a lead whose teammates run in
threads and talk through JSONL inbox files. Its code is not part of this repository;
``benchmarks/get_s15.sh`` downloads it (with its licence) into ``benchmarks/baselines/s15/``, which
git ignores. The script is found at ``--s15 PATH``, else ``$TEAMCTL_S15``, else that folder (a path
may name the script or the folder that holds ``agents/s15_agent_teams.py``; the script imports
``agents.anthropic_client`` from beside it).

Both sides run as real subprocesses with the real ``anthropic`` SDK against the local fake
Messages API (``harness/model/fakeapi.py``, zero latency, loopback), on the same workload: the
prompt of ``benchmarks/workloads/independent4.yaml`` (4 independent tasks, each writing one notes
file, 2 teammates). teamctl runs it with ``teamctl run --headless`` as ``bench_startup`` does (its
lead puts 4 tasks on the board, 2 teammates claim them). s15 has no task board, so its lead hands
out two tasks in each ``spawn_teammate`` prompt; each teammate writes one file per model call and
reports it to the lead's inbox with ``send_message`` in the same response (as a teamctl teammate
writes and completes a task in one response), then ends its turn. s15's REPL is driven through
stdin (no terminal): the prompt, then ``q`` once the work is done; the process and everything it
started are stopped afterwards. The fake API tells s15's agents apart by their system prompts.

Measured: the first model request → the last of the four files written (its mtime), per side;
medians over ``--runs`` runs, alternating the sides.

Why the gate is not a ratio to s15. The issue set ">= 25x faster than s15" when s15 took 4.22 s
in its run; the s15 pinned here has no fixed delay and drains in 30-45 ms, so 25x would leave
1.2-1.8 ms for the whole critical path: three model round trips in sequence (the lead's, then a
teammate's two tasks one after the other) and the writes that make claims and completions
durable. That is below the bare SDK's own round trips on the same machine, so no program could
meet it. s15 is an in-process toy (threads, no fsync, no journal, nothing survives a crash), so
the comparison is kept as a figure without a target. What the issue asks underneath — "the
critical path is about eight model round trips of a few milliseconds each plus a few fsyncs, so
well under 0.17 s" — is measured instead, against a floor taken in the same run: a fresh Python
process doing that work bare, one step after another, with the same ``anthropic`` SDK against
the same fake API (``FLOOR_CHILD``): the SDK warmed up first (``teamctl run`` warms it while it
starts, ``actors/runtime/warmup.py``), then the model calls teamctl makes before its last file —
the lead's two, one per task — and the fsyncs of a durable drain: the tasks created, each claim,
each completion before the last file; timed the same way (its first ``lead`` request → its last
file). The gate is teamctl's drain over that floor, at most ``FLOOR_RATIO`` = 6: the issue's own
budget, 0.17 s for about eight round trips of ~3 ms and a few fsyncs of ~1 ms (~28 ms), is six
times their bare cost. Measured in the same run, the figure does not move with the machine's
speed the way an absolute budget would; it moves with what teamctl adds on top of the calls and
fsyncs it cannot avoid (its prompts and tool schemas, transcripts, usage records, projections,
mail, the second teammate and the lead working beside it in one interpreter). On a loaded machine
the floor's serial fsyncs and calls slow down more than teamctl's overlapped ones, so the ratio
is lower there than on a quiet one: the quiet machine is where it is judged.

- ``drain_over_floor``: teamctl's drain over the floor's; target <= ``FLOOR_RATIO``.
- ``drain_speedup_vs_s15``: s15's drain over teamctl's (reported, no target).
- ``teamctl_drain_first_request_to_last_file``, ``s15_drain_first_request_to_last_file``,
  ``floor_first_request_to_last_file``.

Without the s15 script it measures nothing: it prints one line saying how to get it and a report
with ``"skipped"``, and exits 2 (0 with ``--quick``, the test suite's smoke run, which must not need
it). Prints one JSON object; exits 1 when a figure misses its target.

    python -m benchmarks.bench_drain_s15 [--runs 3] [--s15 PATH] [--quick]
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.bench_startup import StampedServer, one_run
from benchmarks.bench_tokens import files_ok, load
from benchmarks.common import at_most, finish, parser, scratch, shown
from harness.model.fakeapi import FakeMessagesServer, RecordedRequest, _Handler, _HTTPServer
from harness.model.wire import AGENT_HEADER

HERE = Path(__file__).resolve().parent
WORKLOAD = "independent4"
FLOOR_RATIO = 6.0
"""The most teamctl's drain may take, as a multiple of the bare floor measured in the same run."""
S15_FILE = Path("agents") / "s15_agent_teams.py"
DEFAULT_DIR = HERE / "baselines" / "s15"
HOW_TO_GET = (
    "learn-claude-code s15 not found: run benchmarks/get_s15.sh (downloads it into "
    "benchmarks/baselines/s15/), or pass --s15 PATH or set TEAMCTL_S15"
)

# -- the workload as s15 does it --------------------------------------------------------------

SPLIT = {"w1": ("one", "three"), "w2": ("two", "four")}
"""Which teammate writes which notes file (two each, as teamctl's two teammates end up)."""


def _teammate_steps(first: str, second: str) -> list[Any]:
    def step(name: str) -> dict[str, Any]:
        report = {"to": "lead", "content": f"done: notes/{name}.txt"}
        return {
            "tool_uses": [
                {
                    "name": "write_file",
                    "input": {"path": f"notes/{name}.txt", "content": f"{name}\n"},
                },
                {"name": "send_message", "input": report},
            ]
        }

    return [step(first), step(second), "Done."]


def s15_script() -> dict[str, Any]:
    """The fake API's script for s15: the lead spawns two teammates with two tasks each."""
    spawns = [
        {
            "name": "spawn_teammate",
            "input": {
                "name": name,
                "role": "writer",
                "prompt": f"Write notes/{a}.txt, then notes/{b}.txt; report each to the lead.",
            },
        }
        for name, (a, b) in SPLIT.items()
    ]
    lead_rules = [
        {"match": "^Write the four notes files", "once": True, "tool_uses": spawns},
        {"match": "(?s).", "text": "Noted.", "priority": -1},
        {"match": "^$", "text": "Noted.", "priority": -2},
    ]
    agents: dict[str, Any] = {"lead": {"rules": lead_rules}}
    for name, (a, b) in SPLIT.items():
        agents[name] = {"steps": _teammate_steps(a, b)}
    return {"agents": agents}


S15_CALLS = 2 + 3 * len(SPLIT)
"""Model calls when s15 has drained the workload: the lead's two, three per teammate."""


# -- a fake API that names s15's agents by their system prompts ------------------------------

_TEAMMATE = re.compile(r"^You are '([^']+)'")


def agent_of(system: Any) -> str | None:
    """s15's agent behind a request: ``lead`` or the teammate's name (None: not s15's)."""
    if not isinstance(system, str):
        return None
    if system.startswith("You are a team lead"):
        return "lead"
    found = _TEAMMATE.match(system)
    return found.group(1) if found else None


class _NamingHandler(_Handler):
    """Sets the agent header from the request's system prompt (s15 sends none of its own)."""

    def do_POST(self) -> None:
        real = self.rfile
        raw = real.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        name = agent_of(body.get("system")) if isinstance(body, dict) else None
        if name is not None:
            del self.headers[AGENT_HEADER]
            self.headers[AGENT_HEADER] = name
        self.rfile = io.BytesIO(raw)  # the body once more, for the fake's own handler
        try:
            super().do_POST()
        finally:
            self.rfile = real  # the connection stays usable for the next request (keep-alive)


class _NamingHTTPServer(_HTTPServer):
    def __init__(self, address: tuple[str, int], fake: Any) -> None:
        self.fake = fake
        ThreadingHTTPServer.__init__(self, address, _NamingHandler)


class S15Server(StampedServer):
    """The fake API with the first request's time, telling s15's agents apart."""

    def start(self) -> S15Server:
        self._server = _NamingHTTPServer(self._address, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __enter__(self) -> S15Server:
        return self.start()


# -- running s15 ------------------------------------------------------------------------------


def find_s15(given: str | None) -> Path | None:
    """The s15 script: ``given``, else ``$TEAMCTL_S15``, else the default folder."""
    path = Path(given or os.environ.get("TEAMCTL_S15") or DEFAULT_DIR).expanduser()
    if path.is_dir():
        path = path / S15_FILE
    if path.is_file() and (path.parent / "anthropic_client.py").is_file():
        return path.resolve()
    return None


def s15_env(base: Path, server: S15Server, script: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}
    paths = [str(script.parent.parent)]  # s15 imports agents.anthropic_client
    if importlib.util.find_spec("dotenv") is None:
        # s15 calls python-dotenv's load_dotenv(), which does nothing when it finds no .env file;
        # where the package is not installed, a stand-in that does nothing behaves the same.
        shim = base / "shim"
        shim.mkdir(parents=True, exist_ok=True)
        (shim / "dotenv.py").write_text("def load_dotenv(*args, **kwargs):\n    return False\n")
        paths.append(str(shim))
    env.update(
        HOME=str(base / "home"),
        ANTHROPIC_BASE_URL=server.base_url,
        ANTHROPIC_API_KEY="bench-dummy-key",
        MODEL_ID="claude-bench",
        PYTHONPATH=os.pathsep.join(paths),
        PYTHONUNBUFFERED="1",
    )
    return env


def stop(proc: subprocess.Popen[str]) -> None:
    """The process and its group (it was started in a session of its own) gone."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(5)
    with contextlib.suppress(ProcessLookupError):  # threads or children that outlived it
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def s15_run(script: Path, workload: dict[str, Any], base: Path, timeout: float) -> float:
    """Seconds from s15's first model request to the last notes file written."""
    work = base / "work"
    work.mkdir(parents=True)
    (base / "home").mkdir()
    log_path = base / "s15.log"
    with S15Server(s15_script()) as server, log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, str(script)],
            cwd=work,
            env=s15_env(base, server, script),
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            assert proc.stdin is not None
            proc.stdin.write(workload["prompt"] + "\n")
            proc.stdin.flush()
            deadline = time.monotonic() + timeout
            while not (len(server.served) >= S15_CALLS and files_ok(work, workload)):
                if proc.poll() is not None or time.monotonic() > deadline or server.script_errors:
                    break
                time.sleep(0.005)
            done = files_ok(work, workload) and server.first_at is not None
            if proc.poll() is None:
                proc.stdin.write("q\n")  # the REPL's own way out
                proc.stdin.close()
                proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            done = False
        finally:
            stop(proc)
    if not done or server.first_at is None:
        tail = log_path.read_text(errors="replace")[-2000:]
        raise SystemExit(f"the s15 run failed: {server.script_errors[-1:]}\n{tail}")
    last = max(os.stat(work / spec["path"]).st_mtime_ns / 1e9 for spec in workload["files"])
    return last - server.first_at


# -- the floor: the same critical path done bare ---------------------------------------------

FLOOR_CHILD = """
import os, sys
import anthropic

work, header = sys.argv[1], sys.argv[2]
client = anthropic.Anthropic(max_retries=0)
tools = [
    {
        "name": "write_file",
        "description": "Write a file.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    }
]


def call(agent, text):
    with client.messages.stream(
        model="claude-bench",
        max_tokens=1024,
        system="You write notes files.",
        messages=[{"role": "user", "content": text}],
        tools=tools,
        extra_headers={header: agent},
    ) as stream:
        return stream.get_final_message()


journal = os.open(os.path.join(work, "journal"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def durable(line):
    os.write(journal, line.encode() + b"\\n")
    os.fdatasync(journal)


call("warm-up", "warm up")
call("lead", "Write the four notes files.")
durable("four tasks created")
call("lead", "Four tasks created, two teammates spawned.")
names = ("one", "two", "three", "four")
for name in names:
    durable("claimed " + name)
    call("w1", "Write notes/" + name + ".txt")
    with open(os.path.join(work, "notes", name + ".txt"), "w") as f:
        f.write(name + "\\n")
    if name != names[-1]:
        durable("completed " + name)
"""
"""The floor's process (argv: the folder to work in, the header naming the agent): nothing but
the SDK and ``os``, making one after another the model calls teamctl makes before its last file
(the lead's two, one per task) and the fsyncs of a durable drain (the tasks, each claim, each
completion before the last file)."""

FLOOR_FILES = ("notes/one.txt", "notes/two.txt", "notes/three.txt", "notes/four.txt")


class FloorServer(StampedServer):
    """The fake API noting when the floor's first ``lead`` request arrived (not the warm-up)."""

    def record(self, request: RecordedRequest) -> None:
        if self.first_at is None and request.agent == "lead":
            self.first_at = time.time()
            self.first.set()
        FakeMessagesServer.record(self, request)


def floor_script() -> dict[str, Any]:
    return {
        "agents": {
            "*": {"rules": [{"match": "(?s).", "text": "ok"}, {"match": "^$", "text": "ok"}]}
        }
    }


def floor_run(base: Path, timeout: float) -> float:
    """Seconds from the floor's first ``lead`` request to its last file written."""
    work = base / "work"
    (work / "notes").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}
    with FloorServer(floor_script()) as server:
        env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="bench-dummy-key")
        proc = subprocess.run(
            [sys.executable, "-c", FLOOR_CHILD, str(work), AGENT_HEADER],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if proc.returncode != 0 or server.first_at is None or server.script_errors:
        raise SystemExit(
            f"the floor run failed: {server.script_errors[-1:]}\n{proc.stderr[-2000:]}"
        )
    last = max(os.stat(work / name).st_mtime_ns / 1e9 for name in FLOOR_FILES)
    return last - server.first_at


def main() -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--runs", type=int, default=3, help="runs of each side, alternating")
    cmd.add_argument(
        "--s15",
        help="the s15 script (or its folder); default $TEAMCTL_S15 or benchmarks/baselines/s15",
    )
    cmd.add_argument("--timeout", type=float, default=120.0)
    args = cmd.parse_args()
    if args.quick:
        args.runs = 1
    script = find_s15(args.s15)
    if script is None:
        print(HOW_TO_GET, file=sys.stderr)
        code = 0 if args.quick else 2  # not measured
        print(
            json.dumps(
                {
                    "benchmark": "drain_s15",
                    "quick": args.quick,
                    "ok": not code,
                    "skipped": HOW_TO_GET,
                    "figures": [],
                }
            ),
            flush=True,
        )
        sys.exit(code)
    workload = load(WORKLOAD)
    ours: list[float] = []
    theirs: list[float] = []
    floors: list[float] = []
    with scratch("drain-s15") as tmp:
        for n in range(args.runs):
            theirs.append(s15_run(script, workload, tmp / f"s15-{n}", args.timeout))
            ours.append(one_run(workload, tmp / f"teamctl-{n}", args.timeout, 1)["drain"])
            floors.append(floor_run(tmp / f"floor-{n}", args.timeout))
    s15_s, teamctl_s = statistics.median(theirs), statistics.median(ours)
    floor_s = statistics.median(floors)
    figures = [
        at_most("drain_over_floor", teamctl_s / floor_s, "x", FLOOR_RATIO, 2),
        shown("drain_speedup_vs_s15", s15_s / teamctl_s, "x", 2),
        shown("teamctl_drain_first_request_to_last_file", teamctl_s * 1000, "ms", 1),
        shown("s15_drain_first_request_to_last_file", s15_s * 1000, "ms", 1),
        shown("floor_first_request_to_last_file", floor_s * 1000, "ms", 1),
    ]
    finish(
        "drain_s15", figures, quick=args.quick, workload=WORKLOAD, runs=args.runs, s15=str(script)
    )


if __name__ == "__main__":
    main()
