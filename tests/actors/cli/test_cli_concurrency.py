"""Two "terminals": real ``teamctl`` processes claiming and completing the same tasks at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.actors.cli.cli_support import git_repo, ok, ok_json

TASKS = 6

# One terminal: try every task in order; complete the ones this person won.
TERMINAL = """
for i in $(seq 1 "$N"); do
  if "$PY" -c "$CLI" task claim "task_$i" --as "$WHO"; then
    "$PY" -c "$CLI" task complete "task_$i" --as "$WHO" --summary "by $WHO" || exit 3
  fi
done
"""


def test_two_terminals_claim_and_complete_concurrently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = git_repo(tmp_path, monkeypatch)
    for i in range(1, TASKS + 1):
        ok(["task", "add", f"t{i}"])

    def terminal(who: str) -> subprocess.Popen[str]:
        env = {
            "PATH": "/usr/bin:/bin",
            "PY": sys.executable,
            "CLI": "from actors.cli.main import main; main()",
            "WHO": who,
            "N": str(TASKS),
        }
        return subprocess.Popen(
            ["bash", "-c", TERMINAL],
            cwd=repo / ".tasks",  # any folder inside the repository
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    terminals = {who: terminal(who) for who in ("ann", "bob")}
    outputs = {who: proc.communicate(timeout=240) for who, proc in terminals.items()}
    for who, proc in terminals.items():
        out, err = outputs[who]
        assert proc.returncode == 0, (who, out, err)
        assert "Traceback" not in err
        # Every refusal is one plain line, for a task the other person holds or finished.
        for line in err.splitlines():
            assert line.startswith(f"error: {who} cannot claim task_"), line

    tasks = ok_json(["tasks"])
    assert [t["status"] for t in tasks] == ["completed"] * TASKS
    won = {
        who: [line.split()[-1] for line in out.splitlines() if " claimed " in line]
        for who, (out, _) in outputs.items()
    }
    assert sorted(won["ann"] + won["bob"]) == sorted(t["id"] for t in tasks)
    for t in tasks:
        assert t["summary"] == f"by {t['owner']}" and t["id"] in won[t["owner"]]
        assert t["epoch"] == 1

    events = [json.loads(line) for line in ok(["events", "--json"]).stdout.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    claimed = [e["data"]["task_id"] for e in events if e["type"] == "task.claimed"]
    completed = [e["data"]["task_id"] for e in events if e["type"] == "task.completed"]
    assert sorted(claimed) == sorted(completed) == sorted(t["id"] for t in tasks)
    spawned = sorted(e["data"]["name"] for e in events if e["type"] == "member.spawned")
    assert spawned == sorted(who for who in won if won[who])
    ok(["replay", "--verify"])
    assert ok_json(["journal", "check"])["ok"] is True
