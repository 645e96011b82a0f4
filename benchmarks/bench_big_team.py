"""Commands on a big team: wall time of ``status``, ``task show``, ``task add``, ``task claim``
and ``send`` on a team of ``--tasks`` tasks (imported with ``teamctl task import``) whose journal
holds ``--events`` events.

The activity after the import (members joining, tasks claimed and completed, model calls
recorded) is appended straight to the journal in large commits so that setting the team up takes
seconds, not the hours a real team needs; then one ``teamctl task add`` renders the projections,
the team is opened once for writing, which saves the state snapshot a long-lived team has, and
``--tail`` more events (model calls) put the snapshot as far behind as it is on average.
Each sample is a fresh process run from the repository (what a person or a script pays); the
bare interpreter start (``python -c pass``) is measured in the same run for scale. Medians; exits
1 when a command misses its budget (docs/ARCHITECTURE.md, "Start-up and benchmarks").

    python -m benchmarks.bench_big_team [--samples 7] [--tasks 20000] [--events 100000]
        [--tail 2048] [--keep DIR] [--quick]

``--keep DIR`` builds the team in ``DIR/repo`` and keeps it; a later run with the same ``DIR``
reuses it instead of building it again (its ``task add`` and ``claim`` samples make it grow),
after saving its state snapshot ``--tail`` events behind the end with the code being measured.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from actors.board.snapshot import SNAPSHOT_EVERY
from benchmarks.bench_cli import teamctl_command
from benchmarks.common import at_most, finish, parser, scratch, shown

TARGET_MS = 300.0
MEMBERS = 20
BATCH = 5000


def median_ms(
    cmd: list[str], cwd: Path, samples: int, args: list[list[str]] | None = None
) -> float:
    """Median wall time of ``cmd`` (``cmd + args[i]`` for sample ``i`` when given)."""
    times = []
    for i in range(samples):
        extra = args[i] if args else []
        start = time.perf_counter()
        subprocess.run([*cmd, *extra], cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def import_tasks(teamctl: list[str], repo: Path, tasks: int) -> None:
    """``tasks`` tasks in one ``teamctl task import``; every third waits for the one before."""
    lines = []
    for i in range(1, tasks + 1):
        row: dict[str, Any] = {"subject": f"task {i}", "description": f"do part {i} of the work"}
        if i % 3 == 0:
            row["blocked_by"] = [f"task {i - 1}"]
        lines.append(json.dumps(row))
    source = repo.parent / "tasks.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    subprocess.run(
        [*teamctl, "task", "import", str(source)], cwd=repo, check=True, stdout=subprocess.DEVNULL
    )


def activity(tasks: int, want: int, have: int) -> list[tuple[str, str, dict[str, Any]]]:
    """``(type, actor, data)`` of the events a team's work leaves, until the journal holds
    ``want`` events: members join, tasks are claimed, model calls recorded, tasks completed
    (in id order, so their blockers are done first); a few tasks stay in progress."""
    from mailboxes.events import (
        MemberSpawned,
        Payload,
        TaskClaimed,
        TaskCompleted,
        UsageRecorded,
    )

    out: list[tuple[str, Payload]] = []
    names = [f"dev{m}" for m in range(MEMBERS)]
    for name in names:
        out.append(("lead", MemberSpawned(name=name, role="developer")))
    left = want - have - len(out)
    per_task = 8  # claimed, six model calls, completed
    done = min(tasks // 2, max(0, left // per_task))
    for n in range(1, done + 1):
        owner = names[n % MEMBERS]
        tid = f"task_{n}"
        usage = UsageRecorded(
            agent=owner, model="m", task_id=tid, input_tokens=900, output_tokens=90
        )
        out.append((owner, TaskClaimed(task_id=tid, owner=owner, epoch=1)))
        out += [(owner, usage)] * 6
        out.append((owner, TaskCompleted(task_id=tid, owner=owner, epoch=1, summary="done")))
    for m, owner in enumerate(names):  # one task in progress each
        tid = f"task_{done + 1 + m}"
        out.append((owner, TaskClaimed(task_id=tid, owner=owner, epoch=1)))
    while have + len(out) < want:
        out.append(("lead", UsageRecorded(agent="lead", model="m", input_tokens=500)))
    return [(body.TYPE, actor, body.model_dump(mode="json")) for actor, body in out]


def _always(drafts: list[Any]) -> Callable[[Any], list[Any]]:
    """A journal decision that appends ``drafts`` whatever it sees."""
    return lambda _seen: drafts


def build_team(
    teamctl: list[str], repo: Path, tasks: int, events: int, tail: int
) -> tuple[int, list[int]]:
    """The big team in ``repo``, its state snapshot ``tail`` events behind the journal's end;
    returns the journal's last seq and the numbers of the ready tasks nobody holds (highest
    first)."""
    from actors.factory import open_team
    from mailboxes.events import EventDraft, UsageRecorded

    def append(rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        with open_team(repo) as team:
            journal = team.journal
            for at in range(0, len(rows), BATCH):
                batch = [EventDraft(type=t, actor=a, data=d) for t, a, d in rows[at : at + BATCH]]
                journal.append(_always(batch), after=journal.last_seq())

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*teamctl, "init"], cwd=repo, check=True, stdout=subprocess.DEVNULL)
    import_tasks(teamctl, repo, tasks)
    with open_team(repo) as team:
        have = team.journal.last_seq()
        for m in range(MEMBERS):
            team.mailbox.ensure_inbox(f"dev{m}")
    append(activity(tasks, events - 1 - tail, have))  # the task add below is one more
    # One command through the board: renders the projections of everything appended above.
    subprocess.run(
        [*teamctl, "task", "add", "one more"], cwd=repo, check=True, stdout=subprocess.DEVNULL
    )
    with open_team(repo) as team:  # a writer's open saves the snapshot a long-lived team has
        team.state()
    # Then the work goes on: model calls the snapshot does not cover yet (it is saved every
    # SNAPSHOT_EVERY events, so a command finds it half that far behind on average).
    # Through the board, as the runtime records them (the projections' mark follows).
    call = UsageRecorded(agent="dev0", model="m", input_tokens=700, output_tokens=70)
    calls = [EventDraft(type=call.TYPE, actor="dev0", data=call.model_dump(mode="json"))]
    with open_team(repo) as team:
        for at in range(0, tail, BATCH):
            batch = calls * min(BATCH, tail - at)
            team.board.execute(_always(batch))
    with open_team(repo, read_only=True) as team:
        state = team.state()
        ready = sorted((t.number for t in state.ready()), reverse=True)
        return team.journal.last_seq(), ready


def place_snapshot(repo: Path, tail: int) -> int:
    """Save the state snapshot ``tail`` events before the journal's end, made by this code (a
    kept team's snapshot may be of another fold or format, which any change to ``fold.py``
    makes it, or its commands may have moved it); returns the seq it covers."""
    import itertools

    from actors.board import snapshot
    from actors.board.fold import fold_all
    from actors.board.state import EMPTY
    from actors.factory import open_team

    with open_team(repo, read_only=True) as team:
        journal = team.journal
        covered = max(1, journal.last_seq() - tail)
        state = fold_all(
            EMPTY, itertools.takewhile(lambda e: e.seq <= covered, journal.read_from(1))
        )
        at = next(iter(journal.read_from(covered)))
        if not snapshot.save(team.blobs, state, at):
            raise SystemExit(f"could not write the state snapshot of {repo}")
    return covered


def existing_team(repo: Path, tail: int) -> tuple[int, list[int]]:
    """The journal's last seq and the ready tasks nobody holds (highest first) of a kept team,
    its state snapshot put ``tail`` events behind the journal's end first."""
    from actors.factory import open_team

    place_snapshot(repo, tail)
    with open_team(repo, read_only=True) as team:
        state = team.state()
        ready = sorted((t.number for t in state.ready()), reverse=True)
        return team.journal.last_seq(), ready


@contextlib.contextmanager
def workdir(keep: str | None) -> Iterator[Path]:
    """``keep`` (created when missing, never removed) or a scratch folder removed afterwards."""
    if keep is None:
        with scratch("big-team") as tmp:
            yield tmp
    else:
        path = Path(keep).resolve()
        path.mkdir(parents=True, exist_ok=True)
        yield path


def main() -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--samples", type=int, default=7)
    cmd.add_argument("--tasks", type=int, default=20000)
    cmd.add_argument("--events", type=int, default=100000)
    cmd.add_argument(
        "--tail",
        type=int,
        default=SNAPSHOT_EVERY // 2,
        help="events after the state snapshot (default: half the snapshot interval)",
    )
    cmd.add_argument(
        "--keep",
        metavar="DIR",
        help="build the team in DIR/repo and keep it; reuse it when it is already there",
    )
    args = cmd.parse_args()
    if args.quick:
        args.samples, args.tasks, args.events, args.tail = 2, 200, 1000, 50
    teamctl = teamctl_command()
    with workdir(args.keep) as tmp:
        repo = tmp / "repo"
        started = time.perf_counter()
        reused = args.keep is not None and (repo / ".team").is_dir()
        if reused:
            seq, ready = existing_team(repo, args.tail)
        else:
            seq, ready = build_team(teamctl, repo, args.tasks, args.events, args.tail)
        setup_s = time.perf_counter() - started
        n = args.samples
        last = args.tasks  # the last imported task: pending, never claimed by the activity
        claimable = ready[:n]
        figures = [
            shown(
                "python -c pass (median wall time)",
                median_ms([sys.executable, "-c", "pass"], repo, n),
                "ms",
                1,
            ),
            at_most(
                "teamctl status (median wall time)",
                median_ms([*teamctl, "status"], repo, n),
                "ms",
                TARGET_MS,
                1,
            ),
            at_most(
                "teamctl task show (median wall time)",
                median_ms([*teamctl, "task", "show", f"task_{last}"], repo, n),
                "ms",
                TARGET_MS,
                1,
            ),
            at_most(
                "teamctl task add (median wall time)",
                median_ms([*teamctl, "task", "add"], repo, n, [[f"added {i}"] for i in range(n)]),
                "ms",
                TARGET_MS,
                1,
            ),
            at_most(
                "teamctl task claim (median wall time)",
                median_ms(
                    [*teamctl, "task", "claim"],
                    repo,
                    n,
                    [[f"task_{t}", "--as", f"person{i}-{seq}"] for i, t in enumerate(claimable)],
                ),
                "ms",
                TARGET_MS,
                1,
            ),
            at_most(
                "teamctl send (median wall time)",
                median_ms([*teamctl, "send", "dev1"], repo, n, [[f"note {i}"] for i in range(n)]),
                "ms",
                TARGET_MS,
                1,
            ),
        ]
    finish(
        "big_team",
        figures,
        quick=args.quick,
        tasks=args.tasks,
        events=seq,
        tail=args.tail,
        samples=args.samples,
        setup_s=round(setup_s, 1),
        reused=reused,
    )


if __name__ == "__main__":
    main()
