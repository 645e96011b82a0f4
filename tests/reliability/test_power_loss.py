"""Simulated power loss (``tests/support/powerloss.py``): every acknowledged journal append and
Maildir delivery survives a cut at any fsync, and the store reopens cleanly.

The journal, the board and the Maildir run through ``PowerLoss.fsync``; at chosen fsyncs the
surviving state is copied out, then reopened like after a reboot (the journal repairs a torn
tail, the board repairs projections, the Maildir drops orphans and sweeps duplicates) and checked
with the nothing-lost oracle against what had been acknowledged at the moment of the cut.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.board.board import Board
from actors.board.projections import Projections
from mailboxes.fsutil import fsync_dir
from mailboxes.journal.store import FileJournal
from mailboxes.maildir import Maildir, MessageDraft
from tests.support.oracle import Ledger, assert_nothing_lost, journal_events
from tests.support.powerloss import PowerLoss
from tests.support.profiles import CI, DEEP

AGENTS = ("lead", "ann", "bob", "cat")


@dataclass
class Cut:
    """One simulated power cut: where its image is and what was acknowledged before it."""

    n: int
    image: Path
    acked: frozenset[str]
    delivered: frozenset[str]
    torn: bool


@dataclass
class Rig:
    """A team folder whose stores write through a power-loss simulation."""

    root: Path
    cuts_dir: Path
    at: set[int]
    torn: bool
    ledger: Ledger = field(default_factory=Ledger)
    cuts: list[Cut] = field(default_factory=list)
    sim: PowerLoss | None = None

    def start(self) -> tuple[Board, Maildir]:
        self.sim = PowerLoss(self.root, on_fsync=self._maybe_cut, real=False)
        journal = FileJournal(self.root / ".team", fsync=self.sim.fsync)
        board = Board(journal, projections=Projections(self.root), actor="lead")
        box = Maildir(self.root / ".team" / "mailboxes", ids=self.ledger, fsync=self.sim.fsync)
        return board, box

    def _maybe_cut(self, n: int) -> None:
        if n not in self.at:
            return
        assert self.sim is not None
        done = self.ledger.frozen()
        image = self.cuts_dir / f"cut_{n}"
        self.sim.image(image, torn=random.Random(n) if self.torn else None)
        self.cuts.append(Cut(n, image, done["acked"], done["delivered"], self.torn))


def make_root(tmp_path: Path) -> Path:
    """A team folder with its inboxes, all durable before the simulation starts."""
    root = tmp_path / "repo"
    (root / ".team").mkdir(parents=True)
    box = Maildir(root / ".team" / "mailboxes")
    for agent in AGENTS:
        box.ensure_inbox(agent)
    return root


def reboot(image: Path) -> None:
    """Open everything the way a fresh process does after a power cut."""
    journal = FileJournal(image / ".team")
    Board(journal, projections=Projections(image))
    box = Maildir(image / ".team" / "mailboxes")
    box.recover(older_than_s=0)
    for agent in box.agents():
        box.pending(agent, max_messages=1_000_000, max_bytes=1 << 30)  # sweeps duplicates


def check_cut(cut: Cut, ledger: Ledger) -> None:
    reboot(cut.image)
    assert_nothing_lost(
        cut.image,
        attempted=ledger.attempted,
        acked=cut.acked,
        sent=ledger.sent,
        delivered=cut.delivered,
        pids=(),  # an in-process workload: no children of its own
    )


def step(
    rng: random.Random,
    n: int,
    board: Board,
    box: Maildir,
    ledger: Ledger,
    agents: tuple[str, ...] = AGENTS[1:],
) -> None:
    """One random command of a small team: tasks, claims, completions, messages, acks.

    An op counts as acknowledged when the command returned having stored its event.
    """
    agent = rng.choice(agents)
    choice = rng.random()
    op_id = f"{agent}-{n}"
    if choice < 0.25:
        tasks = list(board.state.tasks)
        deps = [rng.choice(tasks)] if tasks and rng.random() < 0.3 else []
        ledger.attempt(op_id)
        board.create(f"work {n}", blocked_by=deps, op_id=op_id)
        ledger.ack(op_id)
    elif choice < 0.55:
        held = board.state.holding(agent)
        ledger.attempt(op_id)
        if held is None:
            if not board.claim_next(agent, op_id=op_id).ok:
                return  # refused: nothing was stored
        elif rng.random() < 0.8:
            board.complete(held.id, agent, held.epoch, f"done {n}", op_id=op_id)
        else:
            board.release(held.id, agent, held.epoch, op_id=op_id)
        ledger.ack(op_id)
    elif choice < 0.85:
        to = rng.choice(("*", *AGENTS))
        if to == agent:
            to = "lead"
        drafts = [MessageDraft.text(to, f"note {n}.{i}") for i in range(rng.randint(1, 3))]
        ledger.deliver(e.id for e in box.deliver_many(agent, drafts))
    else:
        ids = [m.id for m in box.pending(agent, max_messages=rng.randint(1, 4))]
        box.ack(agent, ids)


def run_workload(rig: Rig, steps: int, seed: int) -> None:
    board, box = rig.start()
    rng = random.Random(seed)
    for n in range(steps):
        step(rng, n, board, box, rig.ledger)


def fsync_count(tmp_path: Path, steps: int, seed: int) -> int:
    rig = Rig(make_root(tmp_path / "count"), tmp_path / "unused", set(), torn=False)
    run_workload(rig, steps, seed)
    assert rig.sim is not None
    return rig.sim.fsyncs


@pytest.mark.parametrize("torn", [False, True], ids=["clean-cut", "torn-writes"])
def test_every_acknowledged_write_survives_a_cut_at_any_fsync(tmp_path: Path, torn: bool) -> None:
    steps, seed = 40, 7
    total = fsync_count(tmp_path, steps, seed)
    stride = max(1, total // 20)
    rig = Rig(make_root(tmp_path), tmp_path / "cuts", set(range(1, total + 1, stride)), torn)
    run_workload(rig, steps, seed)
    assert len(rig.cuts) == len(rig.at) >= 20
    for cut in rig.cuts:
        check_cut(cut, rig.ledger)


@pytest.mark.deep
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("torn", [False, True], ids=["clean-cut", "torn-writes"])
def test_every_fsync_of_longer_runs_deep(tmp_path: Path, torn: bool, seed: int) -> None:
    steps = 120
    total = fsync_count(tmp_path, steps, seed)
    rig = Rig(make_root(tmp_path), tmp_path / "cuts", set(range(1, total + 1)), torn)
    run_workload(rig, steps, seed)
    for cut in rig.cuts:
        check_cut(cut, rig.ledger)


def cut_once(tmp_path: Path, seed: int, steps: int, where: float, torn: bool) -> None:
    """Run a random workload, cut power at the fsync at fraction ``where`` of the run, check."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        total = fsync_count(Path(scratch), steps, seed)
        n = max(1, round(where * total))
        rig = Rig(make_root(Path(scratch)), Path(scratch) / "cuts", {n}, torn)
        run_workload(rig, steps, seed)
        (cut,) = rig.cuts
        check_cut(cut, rig.ledger)


@given(
    seed=st.integers(0, 2**32 - 1),
    steps=st.integers(1, 25),
    where=st.floats(0, 1),
    torn=st.booleans(),
)
@settings(CI)
def test_any_workload_cut_anywhere_loses_nothing(
    tmp_path: Path, seed: int, steps: int, where: float, torn: bool
) -> None:
    cut_once(tmp_path, seed, steps, where, torn)


@pytest.mark.deep
@given(
    seed=st.integers(0, 2**32 - 1),
    steps=st.integers(1, 80),
    where=st.floats(0, 1),
    torn=st.booleans(),
)
@settings(DEEP)
def test_any_workload_cut_anywhere_loses_nothing_deep(
    tmp_path: Path, seed: int, steps: int, where: float, torn: bool
) -> None:
    cut_once(tmp_path, seed, steps, where, torn)


def test_threads_racing_through_cuts_lose_nothing_acknowledged(tmp_path: Path) -> None:
    rig = Rig(make_root(tmp_path), tmp_path / "cuts", set(range(5, 400, 17)), torn=True)
    board, box = rig.start()
    barrier = threading.Barrier(3)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        barrier.wait(timeout=30)
        for n in range(30):  # each thread hosts its own agent: holdings are per agent
            step(rng, seed * 1000 + n, board, box, rig.ledger, agents=(AGENTS[seed],))

    with ThreadPoolExecutor(3) as pool:
        for done in [pool.submit(worker, seed) for seed in (1, 2, 3)]:
            done.result(timeout=120)
    assert len(rig.cuts) >= 5
    for cut in rig.cuts:
        check_cut(cut, rig.ledger)


# --- the simulation and the oracle can fail ----------------------------------------------------


def test_unsynced_bytes_and_unsynced_renames_do_not_survive(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "old").write_bytes(b"base")
    sim = PowerLoss(tmp_path)
    fd = os.open(tmp_path / "d" / "old", os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"+synced")
    sim.fsync(fd)
    os.write(fd, b"+lost")
    os.close(fd)
    os.rename(tmp_path / "d" / "old", tmp_path / "d" / "new")
    (tmp_path / "d" / "fresh").write_bytes(b"never synced")

    sim.image(tmp_path / "cut1")
    assert os.listdir(tmp_path / "cut1" / "d") == ["old"]
    assert (tmp_path / "cut1" / "d" / "old").read_bytes() == b"base+synced"

    fsync_dir(tmp_path / "d", sim.fsync)
    sim.image(tmp_path / "cut2")
    assert sorted(os.listdir(tmp_path / "cut2" / "d")) == ["fresh", "new"]
    assert (tmp_path / "cut2" / "d" / "new").read_bytes() == b"base+synced"
    assert (tmp_path / "cut2" / "d" / "fresh").read_bytes() == b""  # name durable, data not

    sim.image(tmp_path / "cut3", torn=random.Random(3))
    kept = (tmp_path / "cut3" / "d" / "new").read_bytes()
    assert b"base+synced+lost".startswith(kept) and kept.startswith(b"base+synced")
    sim.close()


def test_a_rename_between_folders_is_atomic_once_either_folder_is_synced(tmp_path: Path) -> None:
    for folder in ("new", "cur"):
        (tmp_path / folder).mkdir()
    (tmp_path / "new" / "m1").write_bytes(b"one")
    (tmp_path / "new" / "m2").write_bytes(b"two")
    sim = PowerLoss(tmp_path, real=False)
    os.rename(tmp_path / "new" / "m1", tmp_path / "cur" / "m1")
    os.rename(tmp_path / "new" / "m2", tmp_path / "cur" / "m2")
    sim.image(tmp_path / "cut0")  # nothing synced: both still where they were
    assert os.listdir(tmp_path / "cut0" / "cur") == []
    assert sorted(os.listdir(tmp_path / "cut0" / "new")) == ["m1", "m2"]
    fsync_dir(tmp_path / "new", sim.fsync)  # the source folder: the targets gain the names
    sim.image(tmp_path / "cut1")
    assert os.listdir(tmp_path / "cut1" / "new") == []
    assert sorted(os.listdir(tmp_path / "cut1" / "cur")) == ["m1", "m2"]
    assert (tmp_path / "cut1" / "cur" / "m2").read_bytes() == b"two"
    os.rename(tmp_path / "cur" / "m1", tmp_path / "new" / "m1")
    os.unlink(tmp_path / "cur" / "m2")
    fsync_dir(tmp_path / "new", sim.fsync)  # the target folder: the source loses the name
    sim.image(tmp_path / "cut2")
    assert os.listdir(tmp_path / "cut2" / "new") == ["m1"]
    assert os.listdir(tmp_path / "cut2" / "cur") == ["m2"]  # the unlink was never synced
    sim.close()


def test_a_store_that_acknowledges_before_fsync_is_caught(tmp_path: Path) -> None:
    """Negative control: bypass the seam (the journal fsyncs, the simulation never hears of
    it), so acknowledged appends are not durable as far as the cut is concerned."""
    root = make_root(tmp_path)
    sim = PowerLoss(root, real=False)
    board = Board(FileJournal(root / ".team"), actor="lead")
    ledger = Ledger()
    for n in range(3):
        ledger.attempt(f"op-{n}")
        board.create(f"task {n}", op_id=f"op-{n}")
        ledger.ack(f"op-{n}")
    sim.image(tmp_path / "cut")
    assert journal_events(tmp_path / "cut" / ".team" / "journal.jsonl") == ([], [])
    with pytest.raises(AssertionError, match="3 acknowledged op"):
        assert_nothing_lost(tmp_path / "cut", **ledger.frozen(), projections=False, pids=())
