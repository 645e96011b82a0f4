"""State snapshots: a board starts from the last snapshot and folds only the events after it; a
snapshot that does not check out is ignored (the journal is folded from the start), and
``replay --verify`` compares a snapshot with the fold of the journal."""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.board import snapshot
from actors.board.board import Board
from actors.board.fold import fold_all
from actors.board.state import EMPTY
from mailboxes.blobs import FileBlobs
from mailboxes.events import Event, MemberSpawned
from mailboxes.journal.store import FileJournal
from tests.actors.cli.cli_support import git_repo, ok, run


class CountingJournal(FileJournal):
    """A file journal that records from which seq it was asked to read."""

    reads: list[int]

    def read_from(self, seq: int) -> Iterator[Event]:
        self.reads.append(seq)
        return super().read_from(seq)


def _journal(folder: Path) -> CountingJournal:
    journal = CountingJournal(folder)
    journal.reads = []
    return journal


@pytest.fixture
def team_dir(tmp_path: Path) -> Path:
    folder = tmp_path / ".team"
    folder.mkdir()
    return folder


def _fill(board: Board, count: int) -> None:
    for n in range(count):
        board.create(f"task {n}", description=f"about {n}", metadata={"n": n} if n % 2 else None)
    claimed = board.claim("task_1", "alice", human=True)
    assert claimed.task is not None
    board.complete("task_1", "alice", claimed.task.epoch, summary="done")


def test_a_board_starts_from_the_snapshot_and_folds_only_the_tail(team_dir: Path) -> None:
    blobs = FileBlobs(team_dir / "snapshots")
    board = Board(_journal(team_dir), snapshots=blobs, snapshot_every=5)
    _fill(board, 12)
    saved = blobs.get(snapshot.SNAPSHOT_BLOB)
    assert saved is not None
    state_at, _ = snapshot.decode(saved)
    assert 5 <= state_at.seq <= board.state.seq

    journal = _journal(team_dir)
    reopened = Board(journal, snapshots=blobs, snapshot_every=5)
    # Never read from the start: only the snapshot's own event (its identity check) and on.
    assert min(journal.reads) == state_at.seq
    # The state is the fold of the whole journal, value for value.
    assert reopened.state == fold_all(EMPTY, FileJournal(team_dir).read_from(1))
    # And the board keeps working from there.
    reopened.create("one more")
    assert reopened.state == fold_all(EMPTY, FileJournal(team_dir).read_from(1))


def _rewrite(blobs: FileBlobs, change: str) -> None:
    data = blobs.get(snapshot.SNAPSHOT_BLOB)
    assert data is not None
    head, _, body = data.partition(b"\n")
    header = json.loads(head)
    if change == "checksum":
        body = body.replace(b"task 3", b"task X")
    elif change == "fold":
        header["fold"] = "0" * 64
    elif change == "codec":  # written by another Python: its marshal format may differ
        header["codec"] = "marshal-4-py3.99"
    elif change == "event":
        header["at"][1] += 1.0  # the journal's event of that seq has another time
    elif change == "truncated":
        body = body[: len(body) // 2]
    blobs.put(snapshot.SNAPSHOT_BLOB, json.dumps(header).encode() + b"\n" + body)


@pytest.mark.parametrize("change", ["checksum", "fold", "codec", "event", "truncated"])
def test_a_snapshot_that_does_not_check_out_is_ignored(
    team_dir: Path, change: str, caplog: pytest.LogCaptureFixture
) -> None:
    blobs = FileBlobs(team_dir / "snapshots")
    board = Board(_journal(team_dir), snapshots=blobs, snapshot_every=5)
    _fill(board, 8)
    _rewrite(blobs, change)
    journal = _journal(team_dir)
    with caplog.at_level(logging.INFO, logger="actors.board.snapshot"):
        reopened = Board(journal, snapshots=blobs, snapshot_every=1000)
    assert "state snapshot ignored" in caplog.text
    assert min(journal.reads) == 1  # folded from the start
    assert reopened.state == fold_all(EMPTY, FileJournal(team_dir).read_from(1))


def test_a_snapshot_beyond_the_journal_is_ignored(team_dir: Path, tmp_path: Path) -> None:
    blobs = FileBlobs(team_dir / "snapshots")
    _fill(Board(_journal(team_dir), snapshots=blobs, snapshot_every=5), 8)
    other = tmp_path / "other" / ".team"
    other.mkdir(parents=True)
    short = Board(_journal(other))
    short.create("only task")
    # Another (shorter) journal with the first team's snapshot: not used.
    assert snapshot.load(blobs, FileJournal(other)) is None


def test_replay_verify_reports_a_snapshot_that_differs_from_the_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    monkeypatch.setattr("actors.factory.SNAPSHOT_EVERY", 3)
    for n in range(6):
        ok(["task", "add", f"task {n}"])
    assert "projections match" in ok(["replay", "--verify"]).stdout
    blobs = FileBlobs(root / ".team" / "snapshots")
    data = blobs.get(snapshot.SNAPSHOT_BLOB)
    assert data is not None
    # A snapshot that passes every check but says something else: only a full fold tells.
    head, _, body = data.partition(b"\n")
    body = body.replace(b"task 1", b"task !")
    assert body != data.partition(b"\n")[2]
    header = json.loads(head)
    header["sha256"] = hashlib.sha256(body).hexdigest()
    blobs.put(snapshot.SNAPSHOT_BLOB, json.dumps(header).encode() + b"\n" + body)
    result = run(["replay", "--verify"])
    assert result.exit_code == 1
    assert "state snapshot" in result.stdout and "differs from the fold" in result.stdout


def test_commands_use_and_refresh_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    monkeypatch.setattr("actors.factory.SNAPSHOT_EVERY", 4)
    for n in range(9):
        ok(["task", "add", f"task {n}"])
    blob = FileBlobs(root / ".team" / "snapshots").get(snapshot.SNAPSHOT_BLOB)
    assert blob is not None
    state, _ = snapshot.decode(blob)
    assert state.seq >= 5 and "task_4" in state.tasks
    assert "task 8" in ok(["tasks"]).stdout


def test_decode_gives_back_the_state_it_was_made_of_and_leaves_the_collector_as_it_was(
    team_dir: Path,
) -> None:
    import dataclasses
    import gc
    from types import MappingProxyType

    board = Board(_journal(team_dir))
    _fill(board, 6)
    board.create("needs a plan", blocked_by=("task_2",), plan_required=True)
    state = board.state
    at = next(iter(FileJournal(team_dir).read_from(state.seq)))
    # A lone surrogate is what json.dumps writes and pydantic's parser refuses: still read.
    odd = state.tasks["task_3"]._replace(subject="half \ud800 a pair")
    state = dataclasses.replace(state, tasks=MappingProxyType({**state.tasks, "task_3": odd}))
    for enabled in (True, False):
        gc.enable() if enabled else gc.disable()
        try:
            decoded, key = snapshot.decode(snapshot.encode(state, at))
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
        assert decoded == state and key == snapshot.event_key(at)
        assert decoded.tasks["task_3"].subject == "half \ud800 a pair"
        assert decoded.tasks["task_7"].plan == state.tasks["task_7"].plan
        assert decoded.tasks["task_2"].metadata == {"n": 1}


def test_nested_task_metadata_survives_the_snapshot(team_dir: Path) -> None:
    blobs = FileBlobs(team_dir / "snapshots")
    board = Board(_journal(team_dir), snapshots=blobs, snapshot_every=2)
    nested = {"tags": ["a", "b"], "more": {"x": 1.5, "y": None, "deep": [{"k": True}]}}
    board.create("a", metadata=nested)
    board.create("b")
    board.create("c")
    saved = blobs.get(snapshot.SNAPSHOT_BLOB)
    assert saved is not None
    state, _ = snapshot.decode(saved)
    assert dict(state.tasks["task_1"].metadata) == nested
    reopened = Board(_journal(team_dir), snapshots=blobs)
    assert reopened.state == fold_all(EMPTY, FileJournal(team_dir).read_from(1))


def test_a_state_without_tasks_round_trips(team_dir: Path) -> None:
    board = Board(_journal(team_dir))
    board.add_member(MemberSpawned(name="ann", role="dev"))
    state = board.state
    at = next(iter(FileJournal(team_dir).read_from(state.seq)))
    decoded, _ = snapshot.decode(snapshot.encode(state, at))
    assert decoded == state and not decoded.tasks


@pytest.mark.parametrize("damage", ["short column", "missing column", "short usage"])
def test_a_checksummed_body_of_the_wrong_shape_is_rejected(team_dir: Path, damage: str) -> None:
    board = Board(_journal(team_dir))
    _fill(board, 4)
    state = board.state
    at = next(iter(FileJournal(team_dir).read_from(state.seq)))
    head, _, raw = snapshot.encode(state, at).partition(b"\n")
    body = marshal.loads(raw)
    if damage == "short column":
        body["tasks"]["columns"][3].pop()
    elif damage == "missing column":
        body["tasks"]["columns"].pop()
    else:
        body["task_usage"] = {"task_1": (1, 2)}
    raw = marshal.dumps(body)
    header = json.loads(head)
    header["sha256"] = hashlib.sha256(raw).hexdigest()
    with pytest.raises(snapshot.SnapshotRejected):
        snapshot.decode(json.dumps(header).encode() + b"\n" + raw)
