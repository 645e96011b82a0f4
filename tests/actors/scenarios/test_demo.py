"""``teamctl demo`` in-process (non-interactive), and the event-driven ``LiveFeed`` it shows."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path

from click.testing import CliRunner

from actors.cli.main import cli
from actors.live.snapshot import Snapshot
from actors.scenarios.demo import LiveFeed


def test_demo_json_reports_tasks_agents_merges_files_and_tokens() -> None:
    out = CliRunner().invoke(cli, ["demo", "--json", "--keep"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    repo = Path(report["repo"])
    try:
        assert report["ok"] and report["idle"] and all(c["ok"] for c in report["checks"])
        tasks = report["tasks"]
        assert [(t["status"], t["worktree"]) for t in tasks] == [
            ("completed", "cart"),
            ("completed", "invoice"),
            ("completed", "report"),
        ]
        owners = {t["owner"] for t in tasks}
        assert len(owners) == 3 and "lead" not in owners
        agents = {a["name"]: a for a in report["agents"]}
        assert set(agents) == owners | {"lead"}
        assert agents["lead"]["tools"]["merge_worktree"] == 3
        assert all(a["tokens"] > 0 for a in agents.values())
        for name in owners:
            assert len(agents[name]["tasks"]) == 1
            assert agents[name]["tools"]["complete_task"] == 1
        merged = [(m["branch"], m["into"]) for m in report["merges"]]
        assert merged == [("wt/cart", "main"), ("wt/invoice", "main"), ("wt/report", "main")]
        assert [f["path"] for f in report["files"]] == [
            "shop/cart.py",
            "shop/invoice.py",
            "shop/report.py",
        ]
        assert "3 files changed" in report["diffstat"]
        # The kept repository is a real one: the merged branches are in main's history.
        log = subprocess.run(
            ["git", "log", "--format=%s", "main"], cwd=repo, capture_output=True, text=True
        ).stdout
        assert "cart: use order_total" in log and "task_3: Use order_total" in log
        assert (repo / ".team" / "journal.jsonl").is_file()
    finally:
        shutil.rmtree(repo.parent)


def test_demo_without_a_terminal_prints_a_log_of_changes_then_what_happened() -> None:
    out = CliRunner().invoke(cli, ["demo", "--latency-ms", "5"])
    assert out.exit_code == 0, out.output
    text = out.output
    assert text.startswith("teamctl demo:")
    live, _, summary = text.partition("What happened")
    # Not a terminal: an append-only log, one line per change, never a redrawn snapshot.
    assert live.count("team parallel-refactor") == 1
    log = [line for line in live.splitlines()[1:] if line.strip()]
    for n in (1, 2, 3):
        assert sum(f"task_{n} in progress -> completed" in line for line in log) == 1, log
    assert not any("┃" in line or "│" in line for line in log)  # no tables before the report
    assert len(live) < 15_000
    for heading in ("Tasks", "Who did what", "Branches merged", "Files changed", "Where to look"):
        assert heading in summary
    assert "wt/report" in summary and "shop/invoice.py" in summary
    assert "expectations hold" in summary
    assert "cleaned up" in summary and "teamctl watch" in summary and "teamctl events" in summary


class _Source:
    """Snapshots whose ``seq`` is a counter the test moves."""

    def __init__(self) -> None:
        self.seq = 1
        self.loads = 0

    def load(self) -> Snapshot:
        self.loads += 1
        return Snapshot(team="t", seq=self.seq)


def test_live_feed_redraws_on_events_only_when_the_team_changed() -> None:
    source = _Source()
    shown: list[int] = []
    drawn = threading.Semaphore(0)

    def show(snap: Snapshot) -> None:
        shown.append(snap.seq)
        drawn.release()

    feed = LiveFeed(show)
    feed({"type": "status"})  # before attach: nothing to draw yet
    feed.attach(source)
    assert drawn.acquire(timeout=10)
    source.seq = 2
    feed({"type": "team_event"})
    assert drawn.acquire(timeout=10)
    loads = source.loads
    feed({"type": "status"})  # same snapshot: loaded, not shown again
    source.seq = 3
    assert feed.close() == Snapshot(team="t", seq=3)  # the final picture is drawn on close
    assert shown == [1, 2, 3] and feed.shown == 3
    assert source.loads >= loads + 1
    feed({"type": "status"})
    assert feed.close() == Snapshot(team="t", seq=3) and shown == [1, 2, 3]
