"""Journal replay benchmark: fold 200,000 events from ``.team/journal.jsonl``.

Prints one JSON object: {"benchmark": "replay", "figures": [{"name", "value", "unit", "target",
"ok"}, ...]}. Rates are medians over ``--repeat`` runs.

- ``replay``: ``read_from(1)`` on an open journal plus a trivial fold (every line CRC-checked and
  parsed into an ``Event``) — the figure with the ≥ 100,000 events/s target.
- ``cold_start``: open the journal (validate every line, index seqs and op_ids, check the tail)
  and then replay: what a CLI command without a snapshot pays.
- ``append_one_p50``: one event appended and fsynced (flock, catch-up, write, fsync), for scale.

    python benchmarks/bench_replay.py [--events 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from mailboxes import events as ev
from mailboxes.journal.store import FileJournal

TARGET = 100_000


def sample_draft(n: int) -> ev.EventDraft:
    """A realistic mix: creations, claims and completions with op_ids."""
    task_id = f"task_{n // 3 + 1}"
    match n % 3:
        case 0:
            body: ev.Payload = ev.TaskCreated(
                task_id=task_id, subject=f"refactor module {n}", description="x" * 40
            )
            return ev.draft(body.TYPE, "lead", body, op_id=f"op-{n}")
        case 1:
            body = ev.TaskClaimed(task_id=task_id, owner=f"worker-{n % 8}", epoch=1)
            return ev.draft(body.TYPE, f"worker-{n % 8}", body, op_id=f"op-{n}")
        case _:
            body = ev.TaskCompleted(task_id=task_id, owner=f"worker-{n % 8}", epoch=1, summary="ok")
            return ev.draft(body.TYPE, f"worker-{n % 8}", body)


def constant(drafts: list[ev.EventDraft]) -> Callable[[Sequence[ev.Event]], list[ev.EventDraft]]:
    """A ``decide`` that appends ``drafts`` whatever it sees."""
    return lambda _seen: drafts


def write_journal(team: Path, count: int, batch: int = 5_000) -> None:
    journal = FileJournal(team)
    for start in range(0, count, batch):
        drafts = [sample_draft(n) for n in range(start, min(start + batch, count))]
        journal.append(constant(drafts), after=start)
    journal.close()


def fold(journal: FileJournal) -> int:
    """A trivial fold: counts per type and the last seq."""
    counts: Counter[str] = Counter()
    last = 0
    for event in journal.read_from(1):
        counts[event.type] += 1
        last = event.seq
    return last


def timed_replay(team: Path, count: int) -> tuple[float, float]:
    """(replay seconds on an open journal, cold start seconds: open + replay)."""
    start = time.perf_counter()
    journal = FileJournal(team)
    opened = time.perf_counter()
    last = fold(journal)
    done = time.perf_counter()
    if last != count:
        raise SystemExit(f"replay saw {last} events, expected {count}")
    journal.close()
    return done - opened, done - start


def append_latency(team: Path, samples: int) -> list[float]:
    journal = FileJournal(team)
    after = journal.last_seq()
    latencies = []
    for n in range(samples):
        body = ev.TaskReleased(task_id="task_1", owner="w", epoch=1, reason="bench")
        d = ev.draft(body.TYPE, "runtime", body, op_id=f"lat-{n}")
        start = time.perf_counter()
        after = journal.append(constant([d]), after=after).appended[-1].seq
        latencies.append((time.perf_counter() - start) * 1000)
    journal.close()
    return latencies


def figure(name: str, value: float, unit: str, target: str, ok: bool) -> dict[str, object]:
    return {"name": name, "value": round(value, 3), "unit": unit, "target": target, "ok": ok}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        team = Path(scratch)
        write_journal(team, args.events)
        size = (team / "journal.jsonl").stat().st_size
        runs = [timed_replay(team, args.events) for _ in range(args.repeat)]
        replay = args.events / statistics.median(r[0] for r in runs)
        cold = args.events / statistics.median(r[1] for r in runs)
        append_p50 = statistics.median(append_latency(team, 200))
    figures = [
        figure("replay", replay, "events/s", f">= {TARGET}", replay >= TARGET),
        figure("cold_start_open_and_replay", cold, "events/s", "report", True),
        figure("journal_size", size / args.events, "bytes/event", "report", True),
        figure("append_one_p50", append_p50, "ms", "report", True),
    ]
    print(json.dumps({"benchmark": "replay", "events": args.events, "figures": figures}))


if __name__ == "__main__":
    main()
