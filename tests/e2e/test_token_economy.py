"""Issue 14, "Done when", as a test: the 4-task, 2-teammate workload
(``benchmarks/workloads/independent4.yaml``) run by ``teamctl run --headless`` in a subprocess,
through the real ``anthropic`` SDK, against the local fake Messages API with its prompt-cache
simulation on. Counts, not timings: every task completed, prefix-stable share >= 0.95, at most 5
lead calls, and ``teamctl cost --json`` adding up to the usage the server reported."""

from __future__ import annotations

import json
import statistics
import subprocess

import pytest

from benchmarks.bench_tokens import (
    LEAD,
    RunResult,
    load,
    notification_bytes,
    prefix_stable_shares,
    run_one,
    teamctl_command,
    total_usage,
)
from harness.model.fakeapi import ServedCall, api_blocks, count_tokens, wire_bytes
from harness.ports import Usage

WORKLOAD = load("independent4")


@pytest.fixture(scope="module")
def team_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return run_one(
        WORKLOAD, tmp_path_factory.mktemp("tokens"), team=True, runtime=None, timeout=120
    )


def figures(run: RunResult) -> str:
    shares = prefix_stable_shares(run.calls)
    per_agent: dict[str, int] = {}
    for call in run.calls:
        per_agent[call.agent] = per_agent.get(call.agent, 0) + 1
    share = statistics.fmean(shares) if shares else 0.0
    return f"prefix-stable share {share:.4f}, calls per agent {per_agent}"


def test_every_task_is_completed(team_run: RunResult) -> None:
    assert team_run.exit_code == 0, team_run.stderr
    assert team_run.script_errors == []
    assert team_run.completed_tasks == WORKLOAD["tasks"] == 4
    assert team_run.files_ok


def test_the_prefix_is_stable_and_the_lead_calls_at_most_five_times(team_run: RunResult) -> None:
    shares = prefix_stable_shares(team_run.calls)
    assert len(shares) >= 4, figures(team_run)
    assert statistics.fmean(shares) >= 0.95, figures(team_run)
    assert sum(1 for c in team_run.calls if c.agent == LEAD) <= 5, figures(team_run)


def test_cost_json_adds_up_to_the_usage_the_server_reported(team_run: RunResult) -> None:
    proc = subprocess.run(
        teamctl_command("cost", "--json"),
        cwd=team_run.root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    agents = {a["name"]: a for a in report["agents"]}
    fields = (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    )
    assert {"lead", "w1", "w2"} <= set(agents)
    for name in ("lead", "w1", "w2"):
        assert sum(agents[name][f] for f in fields if f != "output_tokens") > 0, name
        assert agents[name]["output_tokens"] > 0
    served = total_usage(team_run.calls)
    for field in fields:
        assert sum(a[field] for a in report["agents"]) == getattr(served, field), field
        assert report["total"][field] == getattr(served, field), field
    for name in ("lead", "w1", "w2"):
        mine = total_usage([c for c in team_run.calls if c.agent == name])
        assert [agents[name][f] for f in fields] == [getattr(mine, f) for f in fields], name


def test_notification_text_is_envelopes_and_digests_only() -> None:
    status = "[team status] 2 updates; open tasks: none\n- task_1 w1: completed — wrote a"
    idle = '[idle_notification from w2] Done.\ntask_id: "task_2"'
    question = "[message from w1] Which file?"
    reminder = "<system-reminder>\n# Team state\n</system-reminder>"
    text = "\n\n".join([status, question, idle, reminder])
    assert notification_bytes(text) == len(status.encode()) + len(idle.encode())
    assert notification_bytes("Write the four files.") == 0


def test_prefix_stable_share_is_per_agent_and_of_the_newer_request() -> None:
    def call(agent: str, text: str) -> ServedCall:
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
        return ServedCall(agent, body, Usage())

    calls = [call("a", "x" * 90), call("b", "y" * 10), call("a", "x" * 90 + "z" * 30)]
    first, third = wire_bytes(calls[0].body), wire_bytes(calls[2].body)
    common = first.index(b"x" * 90) + 90  # b's request in between does not count
    (share,) = prefix_stable_shares(calls)
    assert share == pytest.approx(common / len(third))
    (kept,) = prefix_stable_shares(calls, of_previous=True)
    assert kept == pytest.approx(common / len(first))


def test_the_second_teammate_reads_the_tools_and_the_shared_system_block(
    team_run: RunResult,
) -> None:
    # Teammates send the same tools and the same first system block (their names and the
    # lead's prompt come after it), so the one that starts second reads both from the cache the
    # first one wrote and writes only its own block and its brief.
    firsts: dict[str, ServedCall] = {}
    for c in team_run.calls:
        if c.agent != LEAD:
            firsts.setdefault(c.agent, c)
    one, two = firsts.values()
    assert one.body["tools"] == two.body["tools"]
    assert one.body["system"][0] == two.body["system"][0]
    assert one.body["system"][1] != two.body["system"][1]
    prefix = len(two.body["tools"]) + 1
    shared = count_tokens(sum(len(data) for data, _ in api_blocks(two.body)[:prefix]))
    assert two.usage.cache_read_input_tokens >= shared, figures(team_run)
