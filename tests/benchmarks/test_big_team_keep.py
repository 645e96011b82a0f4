"""``bench_big_team --keep DIR`` builds the big team once and reuses it in later runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from actors.board import snapshot
from mailboxes.blobs import FileBlobs

ROOT = Path(__file__).resolve().parents[2]


def bench(keep: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_big_team", "--quick", "--keep", str(keep)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a figure short on a busy machine
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_keep_builds_the_team_once_then_reuses_it(tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    first = bench(keep)
    journal = keep / "repo" / ".team" / "journal.jsonl"
    assert first["reused"] is False and journal.is_file()
    born = journal.read_bytes().split(b"\n", 1)[0]  # the team.created event
    second = bench(keep)
    assert second["reused"] is True
    assert journal.read_bytes().split(b"\n", 1)[0] == born  # the same team, not a new one
    # Its commands ran on the kept team: the journal grew from where the first run left it.
    assert isinstance(first["events"], int) and isinstance(second["events"], int)
    assert second["events"] > first["events"]
    # The kept team's state snapshot was put --tail (50 with --quick) events behind its end by
    # the code measuring it (one of another fold or format would be ignored: a full fold).
    events = second["events"]
    assert isinstance(events, int)
    blob = FileBlobs(keep / "repo" / ".team" / "snapshots").get(snapshot.SNAPSHOT_BLOB)
    assert blob is not None
    state, _ = snapshot.decode(blob)
    assert state.seq == events - 50
