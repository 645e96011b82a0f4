"""``bench_speedup --timeline``: where a drain's time goes, read from the journal's timestamps."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from actors.board.board import acting_as, draft
from actors.factory import init_team, open_team
from benchmarks.bench_speedup import timeline
from mailboxes.events import MemberSpawned, MemberStatusChanged


def test_the_timeline_is_the_last_claim_completion_and_idle_after_the_start(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    team = open_team(root, actor="runtime")
    try:
        board = team.board
        board.add_member(MemberSpawned(name="w1", role="general", model="m"))
        before = board.create("before the start")
        start = time.time()
        task = board.create("after the start")
        with acting_as("w1"):
            claimed = board.claim(task.id, "w1")
            assert claimed.task is not None
            board.complete(task.id, "w1", claimed.task.epoch, "done")
            for status in ("working", "idle"):
                body = MemberStatusChanged(name="w1", status=status)
                board.execute(lambda st, body=body: [draft(body.TYPE, "w1", body)])
        assert before.id != task.id
    finally:
        team.close()
    events = [
        json.loads(line) for line in (root / ".team" / "journal.jsonl").read_text().splitlines()
    ]
    at = {e["type"]: (e["ts"] - start) * 1000 for e in events if e["ts"] >= start}
    last = timeline(root, start)
    assert last == {
        "claimed": at["task.claimed"],
        "completed": at["task.completed"],
        "idle": at["member.status_changed"],  # the idle one, the last of them
    }
    assert 0 <= last["claimed"] <= last["completed"] <= last["idle"]
