"""Journal replay benchmark: fold 200,000 events from ``.team/journal.jsonl``.

Prints one JSON object: {"benchmark": "replay", "figures": [{"name", "value", "unit", "target",
"ok"}, ...]} and exits 1 when a figure misses its target. Rates are medians over ``--repeat`` runs.

- ``replay_state_fold``: ``read_from(1)`` on an open journal (every line CRC-checked and parsed
  into an ``Event``) folded into team state by the real fold (``actors/board/fold.py``
  ``fold_all``) — the headline, with the >= 100,000 events/s target.
- ``replay_state_fold_cpu``: the same in the process's CPU time, for a loaded machine, where the
  wall time also counts the waits for a core.
- ``cold_start_open_and_fold``: open the journal (validate every line, index seqs and op_ids,
  check the tail), then replay and fold: what a CLI command without a snapshot pays.
- ``read_and_parse_only``: the replay without the fold, for scale.
- ``append_one_p50``: one event appended and fsynced (flock, catch-up, write, fsync), for scale.

    python -m benchmarks.bench_replay [--events 200000] [--repeat 3] [--quick]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from actors.board.fold import fold_all
from actors.board.state import EMPTY
from benchmarks.common import at_least, finish, parser, scratch, shown
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


def state_fold(journal: FileJournal) -> int:
    """The real fold over every event; the number of tasks it ends with."""
    return len(fold_all(EMPTY, journal.read_from(1)).tasks)


def read_only(journal: FileJournal) -> int:
    """Read and parse every event, fold nothing; the last seq."""
    last = 0
    for event in journal.read_from(1):
        last = event.seq
    return last


def timed_replay(team: Path, count: int) -> tuple[float, float, float, float]:
    """(fold seconds on an open journal, cold start seconds: open + fold, read-only seconds, fold
    CPU seconds)."""
    start = time.perf_counter()
    journal = FileJournal(team)
    opened = time.perf_counter()
    cpu = time.process_time()
    tasks = state_fold(journal)
    cpu = time.process_time() - cpu
    done = time.perf_counter()
    if tasks != (count + 2) // 3:
        raise SystemExit(f"the fold saw {tasks} tasks, expected {(count + 2) // 3}")
    last = read_only(journal)
    read = time.perf_counter() - done
    if last != count:
        raise SystemExit(f"replay saw {last} events, expected {count}")
    journal.close()
    return done - opened, done - start, read, cpu


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


def main() -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--events", type=int, default=200_000)
    cmd.add_argument("--repeat", type=int, default=3)
    args = cmd.parse_args()
    if args.quick:
        args.events, args.repeat = 3_000, 1
    with scratch("replay") as team:
        write_journal(team, args.events)
        size = (team / "journal.jsonl").stat().st_size
        runs = [timed_replay(team, args.events) for _ in range(args.repeat)]
        replay = args.events / statistics.median(r[0] for r in runs)
        cold = args.events / statistics.median(r[1] for r in runs)
        read = args.events / statistics.median(r[2] for r in runs)
        cpu = args.events / statistics.median(r[3] for r in runs)
        append_p50 = statistics.median(append_latency(team, 20 if args.quick else 200))
    figures = [
        at_least("replay_state_fold", replay, "events/s", TARGET),
        shown("replay_state_fold_cpu", cpu, "events/s"),
        shown("cold_start_open_and_fold", cold, "events/s"),
        shown("read_and_parse_only", read, "events/s"),
        shown("journal_size", size / args.events, "bytes/event"),
        shown("append_one_p50", append_p50, "ms"),
    ]
    finish("replay", figures, quick=args.quick, events=args.events)


if __name__ == "__main__":
    main()
