"""``teamctl cost``, and the tokens and cost ``status`` and ``watch`` show per member, in-process
against a journal holding ``usage.recorded`` events."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.factory import open_team
from actors.runtime.usage import UsageMeter
from actors.settings import TeamSettings
from harness.ports import ModelResponse, TextBlock, Usage
from mailboxes.events import MemberSpawned
from tests.actors.cli.cli_support import git_repo, ok, ok_json

SUBJECT = "fix \x1b[2Jthe parser"
"""Agent-written: an escape sequence that would clear the screen."""


def _call(model: str, **tokens: int) -> ModelResponse:
    content = (TextBlock(text="ok"),)
    return ModelResponse(
        id="m", model=model, content=content, stop_reason="end_turn", usage=Usage(**tokens)
    )


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = git_repo(tmp_path, monkeypatch)
    with open_team(root, actor="runtime") as team:
        board = team.board
        for name, role in (("lead", "lead"), ("w1", "general"), ("w2", "general")):
            board.add_member(MemberSpawned(name=name, role=role))
        task = board.create(SUBJECT)
        meter = UsageMeter(board, TeamSettings())
        meter.record("lead", _call("claude-opus-4-8", input_tokens=1000, output_tokens=100))
        assert board.claim(task.id, "w1").ok
        sonnet = "claude-sonnet-4-6"
        meter.record("w1", _call(sonnet, input_tokens=100, cache_read_input_tokens=900))
        meter.record("w1", _call(sonnet, cache_creation_input_tokens=1000, output_tokens=10))
        meter.record("w2", _call("some-unknown-model", input_tokens=5))
    return root


def test_cost_json_lists_agents_and_tasks_with_exact_totals(repo: Path) -> None:
    report = ok_json(["cost"])
    agents = {row["name"]: row for row in report["agents"]}
    assert list(agents) == ["lead", "w1", "w2"]
    lead, w1, w2 = agents["lead"], agents["w1"], agents["w2"]
    assert (lead["input_tokens"], lead["output_tokens"], lead["calls"]) == (1000, 100, 1)
    assert lead["cost_usd"] == pytest.approx((1000 * 5 + 100 * 25) / 1e6)
    assert (w1["cache_read_input_tokens"], w1["cache_creation_input_tokens"]) == (900, 1000)
    assert w1["cost_usd"] == pytest.approx((100 * 3 + 900 * 0.3 + 1000 * 3.75 + 10 * 15) / 1e6)
    assert w1["cache_hit_rate"] == pytest.approx(900 / 2000, abs=1e-4)
    assert (w2["cost_usd"], w2["unpriced_calls"], w2["input_tokens"]) == (0.0, 1, 5)
    [task] = report["tasks"]
    assert (task["id"], task["subject"], task["calls"]) == ("task_1", SUBJECT, 2)  # exact text
    assert task["cost_usd"] == w1["cost_usd"]
    assert report["no_task"]["calls"] == 2
    total = report["total"]
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
        assert total[key] == sum(row[key] for row in agents.values())
    assert total["calls"] == 4 and total["cost_usd"] == pytest.approx(
        lead["cost_usd"] + w1["cost_usd"]
    )


def test_cost_table_shows_both_views_with_agent_text_escaped(repo: Path) -> None:
    out = ok(["cost"]).stdout
    assert "\x1b" not in out and "\\x1b[2Jthe parser" in out
    lines = out.splitlines()
    assert lines[0] == "by agent" and any(line.startswith("by task") for line in lines)
    w1 = next(line for line in lines if line.startswith("w1 "))
    assert "900" in w1 and "1,000" in w1 and "45%" in w1
    w2 = next(line for line in lines if line.startswith("w2 "))
    assert "(+1 unpriced)" in w2
    assert any(line.startswith("total ") for line in lines)


def test_status_and_watch_show_tokens_and_cost_per_member(repo: Path) -> None:
    status = ok_json(["status"])
    members = {m["name"]: m for m in status["members"]}
    assert members["w1"]["tokens"] == 100 + 900 + 1000 + 10
    assert members["lead"]["cost_usd"] == pytest.approx(0.0075)
    assert status["usage"]["calls"] == 4
    out = ok(["status"]).stdout
    assert "model usage: 4 calls, 3,115 tokens, $0." in out
    lead_row = next(line for line in out.splitlines() if line.startswith("lead "))
    assert "1,100" in lead_row and "$0.0075" in lead_row
    snap = ok_json(["watch", "--once"])
    rows = {m["name"]: m for m in snap["members"]}
    assert rows["w1"]["tokens"] == 2010 and rows["lead"]["cost_usd"] == pytest.approx(0.0075)
    view = ok(["watch", "--once"]).stdout
    lead_line = next(line for line in view.splitlines() if line.startswith("lead "))
    assert "1,100" in lead_line and "$0.0075" in lead_line
