"""``benchmarks/bench_drain_s15.py`` without learn-claude-code's code: the "how to get it" exit, the
fake API naming s15's agents by their system prompts (real ``anthropic`` SDK, one connection),
the stdin-driven run of a stand-in s15 (our own few lines, shaped like s15: a REPL whose
teammates run in threads), and ``benchmarks/get_s15.sh`` fetching from a local folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anthropic

from benchmarks.bench_drain_s15 import S15Server, agent_of, find_s15, s15_run
from benchmarks.bench_tokens import load

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_drain_s15.py"


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TEAMCTL_S15"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_s15_it_says_how_to_get_it_and_exits_2(tmp_path: Path) -> None:
    out = bench(tmp_path, "--s15", str(tmp_path / "absent"))
    assert out.returncode == 2, out.stderr
    assert "benchmarks/get_s15.sh" in out.stderr.strip().splitlines()[-1]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["figures"] == [] and "get_s15.sh" in report["skipped"]
    assert report["ok"] is False
    assert os.listdir(tmp_path) == []


def test_without_s15_the_quick_smoke_run_passes(tmp_path: Path) -> None:
    out = bench(tmp_path, "--quick", "--s15", str(tmp_path / "absent"))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["quick"] is True and report["ok"] is True and report["skipped"]


def test_s15_is_found_as_a_file_or_as_its_folder(tmp_path: Path) -> None:
    agents = tmp_path / "s15" / "agents"
    agents.mkdir(parents=True)
    (agents / "s15_agent_teams.py").write_text("")
    assert find_s15(str(tmp_path / "s15")) is None  # its anthropic_client.py is missing
    (agents / "anthropic_client.py").write_text("")
    script = (agents / "s15_agent_teams.py").resolve()
    assert find_s15(str(tmp_path / "s15")) == script
    assert find_s15(str(agents / "s15_agent_teams.py")) == script


def test_agents_are_named_by_s15s_system_prompts() -> None:
    assert agent_of("You are a team lead at /w. Spawn teammates and communicate.") == "lead"
    assert agent_of("You are 'w2', role: writer, at /w. Use send_message.") == "w2"
    assert agent_of("You are Claude.") is None
    assert agent_of([{"type": "text", "text": "You are a team lead"}]) is None


def test_the_fake_api_answers_each_s15_agent_from_its_own_script() -> None:
    script = {
        "agents": {"lead": {"steps": ["lead here"]}, "w1": {"steps": ["w1 here", "w1 again"]}}
    }
    with S15Server(script) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
        texts = []
        for system in (
            "You are 'w1', role: writer, at /w.",
            "You are a team lead at /w.",
            "You are 'w1', role: writer, at /w.",
        ):
            reply = client.messages.create(
                model="m",
                max_tokens=10,
                system=system,
                messages=[{"role": "user", "content": "go"}],
            )
            texts.append(reply.content[0].text)  # type: ignore[union-attr]
        client.close()
        assert texts == ["w1 here", "lead here", "w1 again"]
        assert [call.agent for call in server.served] == ["w1", "lead", "w1"]
        assert server.script_errors == [] and server.first_at is not None


STAND_IN_CLIENT = (
    "from anthropic import Anthropic\n\ndef create_anthropic_client():\n    return Anthropic()\n"
)

STAND_IN_S15 = """
import json, os, sys, threading
from pathlib import Path
from dotenv import load_dotenv
from agents.anthropic_client import create_anthropic_client

load_dotenv(override=True)
WORK = Path.cwd()
client = create_anthropic_client()
MODEL = os.environ["MODEL_ID"]
INBOX = WORK / ".team" / "inbox"
INBOX.mkdir(parents=True, exist_ok=True)

def run_tool(me, name, args):
    if name == "write_file":
        path = WORK / args["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(args["content"])
        return "wrote"
    if name == "send_message":
        with open(INBOX / (args["to"] + ".jsonl"), "a") as f:
            f.write(json.dumps({"from": me, "content": args["content"]}) + "\\n")
        return "sent"
    if name == "spawn_teammate":
        threading.Thread(target=loop, args=(args["name"], args["prompt"]), daemon=True).start()
        return "spawned"
    return "unknown"

def loop(me, prompt):
    system = ("You are a team lead at %s." % WORK) if me == "lead" else (
        "You are '%s', role: writer, at %s." % (me, WORK))
    messages = [{"role": "user", "content": prompt}]
    while True:
        reply = client.messages.create(model=MODEL, system=system, messages=messages,
                                       max_tokens=100, tools=[])
        messages.append({"role": "assistant", "content": reply.content})
        if reply.stop_reason != "tool_use":
            return
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": run_tool(me, b.name, b.input)}
            for b in reply.content if b.type == "tool_use"]})

for line in sys.stdin:
    if line.strip() in ("q", ""):
        break
    loop("lead", line.strip())
(WORK / "left-by-q").write_text("the REPL read q and returned")
"""


def test_a_stand_in_s15_is_driven_through_stdin_and_quits_through_its_repl(
    tmp_path: Path,
) -> None:
    agents = tmp_path / "s15" / "agents"
    agents.mkdir(parents=True)
    (agents / "anthropic_client.py").write_text(STAND_IN_CLIENT)
    (agents / "s15_agent_teams.py").write_text(textwrap.dedent(STAND_IN_S15))
    script = find_s15(str(tmp_path / "s15"))
    assert script is not None
    base = tmp_path / "run"
    drain = s15_run(script, load("independent4"), base, timeout=60)
    assert 0 < drain < 60
    for name in ("one", "two", "three", "four"):
        assert (base / "work" / "notes" / f"{name}.txt").read_text() == f"{name}\n"
    lead_inbox = (base / "work" / ".team" / "inbox" / "lead.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["content"] for line in lead_inbox) == sorted(
        f"done: notes/{n}.txt" for n in ("one", "two", "three", "four")
    )
    assert (base / "work" / "left-by-q").is_file()  # it quit through its REPL, not a kill


def test_get_s15_fetches_the_three_files_into_the_folder(tmp_path: Path) -> None:
    source = tmp_path / "upstream"
    (source / "agents").mkdir(parents=True)
    for rel in ("LICENSE", "agents/s15_agent_teams.py", "agents/anthropic_client.py"):
        (source / rel).write_text(f"content of {rel}\n")
    dest = tmp_path / "dest"
    env = {**os.environ, "S15_BASE_URL": source.as_uri()}
    out = subprocess.run(
        ["sh", str(ROOT / "benchmarks" / "get_s15.sh"), str(dest)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert (dest / "agents" / "s15_agent_teams.py").read_text() == (
        "content of agents/s15_agent_teams.py\n"
    )
    assert (dest / "LICENSE").is_file() and (dest / "agents" / "anthropic_client.py").is_file()
    assert find_s15(str(dest)) == (dest / "agents" / "s15_agent_teams.py").resolve()
    assert not list(dest.rglob("*.part"))


def test_the_floor_does_the_drains_calls_and_fsyncs_bare(tmp_path: Path) -> None:
    """The gate's floor (``FLOOR_CHILD``): a fresh process with nothing but the SDK makes the
    warm-up call, the lead's two and one per task, and writes the four files."""
    from benchmarks.bench_drain_s15 import FLOOR_FILES, FloorServer, floor_run, floor_script

    took = floor_run(tmp_path, 120)
    assert took > 0
    work = tmp_path / "work"
    assert [(work / name).read_text() for name in FLOOR_FILES] == [
        "one\n",
        "two\n",
        "three\n",
        "four\n",
    ]
    assert len((work / "journal").read_text().splitlines()) == 8  # tasks, 4 claims, 3 completions
    with FloorServer(floor_script()) as server:  # the warm-up request does not start the clock
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
        started = []
        for agent in ("warm-up", "lead"):
            client.messages.create(
                model="m",
                max_tokens=8,
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={"x-teamctl-agent": agent},
            )
            started.append(server.first_at)
        assert started[0] is None and started[1] is not None
        assert [r.agent for r in server.requests] == ["warm-up", "lead"]
