"""Projection files: written from the fold, repaired when they drift, identical after replay."""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import threading
from pathlib import Path

import pytest

from actors.board import projections
from actors.board.board import Board
from actors.board.fold import fold_all
from actors.board.projections import Projections, verify
from actors.board.state import EMPTY
from actors.errors import TeamError
from mailboxes import events as ev
from mailboxes import fsutil
from mailboxes.journal.store import FileJournal


def open_board(root: Path, actor: str = "lead") -> Board:
    team = root / ".team"
    team.mkdir(exist_ok=True)
    return Board(FileJournal(team), projections=Projections(root), actor=actor)


def replayed(root: Path) -> list[str]:
    """Fold the whole journal from scratch and diff it against the files on disk."""
    state = fold_all(EMPTY, FileJournal(root / ".team").read_from(1))
    return [str(d) for d in verify(state, root)]


def test_files_carry_the_task_and_its_seq(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    board.create("a", "do a", metadata={"area": "docs"})
    board.create("b", blocked_by=["task_1"])
    data = json.loads((tmp_path / ".tasks" / "task_1.json").read_text())
    assert data["id"] == "task_1" and data["description"] == "do a"
    assert data["blocks"] == ["task_2"] and data["seq"] == 2
    assert data["metadata"] == {"area": "docs"}
    assert replayed(tmp_path) == []


def test_only_changed_files_are_rewritten(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    board.create("a")
    board.create("b")
    untouched = tmp_path / ".tasks" / "task_1.json"
    before = untouched.stat().st_mtime_ns
    untouched.write_text(untouched.read_text())  # same bytes, new mtime
    marker = untouched.stat().st_mtime_ns
    board.claim("task_2", "w1")
    assert untouched.stat().st_mtime_ns == marker >= before


def test_hand_edited_file_is_repaired_on_next_write(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    board.create("a")
    path = tmp_path / ".tasks" / "task_1.json"
    edited = json.loads(path.read_text())
    edited["status"] = "completed"
    path.write_text(json.dumps(edited))
    assert [d.kind for d in verify(board.state, tmp_path)] == ["differs"]
    board.update("task_1", subject="A")
    assert replayed(tmp_path) == []
    assert json.loads(path.read_text())["status"] == "pending"


def test_drift_is_repaired_on_open_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    board = open_board(tmp_path)
    for name in "abcd":
        board.create(name)
    tasks = tmp_path / ".tasks"
    (tasks / "task_1.json").write_text('{"id": "task_1", "status": ')  # malformed
    (tasks / "task_2.json").unlink()  # missing
    edited = json.loads((tasks / "task_3.json").read_text())
    edited["owner"] = "mallory"
    (tasks / "task_3.json").write_text(json.dumps(edited))  # hand-edited
    (tasks / "task_9.json").write_text("{}")  # not in the journal
    # A process died between its journal append and its projection write: task_4 is stale.
    journal = FileJournal(tmp_path / ".team")
    claim = ev.TaskClaimed(task_id="task_4", owner="w1", epoch=1)
    journal.append(lambda seen: [ev.draft(claim.TYPE, "w1", claim)], after=journal.last_seq())
    kinds = sorted(d.kind for d in verify(fold_all(EMPTY, journal.read_from(1)), tmp_path))
    assert kinds == ["differs", "extra", "malformed", "missing", "stale", "stale"]

    with caplog.at_level(logging.INFO, logger="actors.board.projections"):
        reopened = open_board(tmp_path)
    assert replayed(tmp_path) == []
    assert not (tasks / "task_9.json").exists()
    assert len(caplog.records) == 6
    # Hand edits warn; a stale file (a writer died between append and projection) is routine.
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 4
    assert any(
        "task_4.json" in r.getMessage() and "stale" in r.getMessage() and r.levelno == logging.INFO
        for r in caplog.records
    )
    assert reopened.get("task_4").owner == "w1"
    assert reopened.repair_projections() == []


def test_read_back(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    board.create("a")
    board.create("b")
    board.claim("task_2", "w1")
    proj = Projections(tmp_path)
    assert [t["id"] for t in proj.read_tasks()] == ["task_1", "task_2"]
    assert proj.read_task("task_7") is None
    team = proj.read_team()
    assert team is not None and team["members"][0]["task"] == "task_2"


def random_commands(board: Board, rng: random.Random, steps: int) -> None:
    """Any mix of commands; refusals and errors are part of the mix."""
    owners = [f"w{i}" for i in range(4)]
    for step in range(steps):
        ids = list(board.state.tasks)
        pick = rng.choice(ids) if ids else "task_1"
        owner = rng.choice(owners)
        action = rng.randrange(9)
        try:
            if action <= 1 or not ids:
                deps = rng.sample(ids, k=min(len(ids), rng.randrange(3)))
                board.create(f"t{step}", blocked_by=deps, role=rng.choice([None, "x"]))
            elif action == 2:
                board.update(pick, add_blocked_by=[rng.choice(ids)], metadata={"s": step})
            elif action == 3:
                board.claim(pick, owner, human=rng.random() < 0.2)
            elif action == 4:
                board.claim_next(owner, role=rng.choice([None, "x"]))
            elif action in (5, 6):
                held = board.state.holding(owner)
                if held is not None:
                    board.complete(held.id, owner, held.epoch, f"done {step}")
            elif action == 7:
                held = board.state.holding(owner)
                if held is not None:
                    board.release(held.id, owner, held.epoch, "changed my mind")
            else:
                board.delete(pick, force=rng.random() < 0.3)
        except TeamError:
            pass


@pytest.mark.parametrize("seed", [1, 2])
def test_random_commands_then_replay_has_no_drift(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    boards = [open_board(tmp_path, "lead"), open_board(tmp_path, "w")]
    for _ in range(4):
        random_commands(rng.choice(boards), rng, 40)
    assert replayed(tmp_path) == []
    scratch = tmp_path / "scratch"
    Projections(scratch).write_all(fold_all(EMPTY, FileJournal(tmp_path / ".team").read_from(1)))
    for path in sorted((tmp_path / ".tasks").glob("task_*.json")):
        assert path.read_bytes() == (scratch / ".tasks" / path.name).read_bytes()
    assert (tmp_path / ".team" / "team.json").read_bytes() == (
        scratch / ".team" / "team.json"
    ).read_bytes()


@pytest.mark.deep
def test_long_random_run_has_no_drift(tmp_path: Path) -> None:
    rng = random.Random(7)
    boards = [open_board(tmp_path, f"b{i}") for i in range(3)]
    for _ in range(40):
        random_commands(rng.choice(boards), rng, 50)
    assert replayed(tmp_path) == []


def test_next_sync_covers_a_writer_that_died_before_projecting(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    board.create("a")
    board.create("b")
    # Another process appended, then died before its projection sync.
    journal = FileJournal(tmp_path / ".team")
    claim = ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1)
    journal.append(lambda seen: [ev.draft(claim.TYPE, "w1", claim)], after=journal.last_seq())
    assert [d.kind for d in verify(board.refresh(), tmp_path)] == ["stale", "stale"]
    board.claim("task_2", "w2")  # any later command's sync covers the gap
    assert replayed(tmp_path) == []
    assert Projections(tmp_path).projected_seq() == 4


def test_syncing_an_older_state_never_regresses_files(tmp_path: Path) -> None:
    board = open_board(tmp_path)
    board.create("a")
    old = board.state
    board.update("task_1", subject="A")
    Projections(tmp_path).sync(lambda: old)
    assert Projections(tmp_path).read_task("task_1")["subject"] == "A"  # type: ignore[index]
    assert replayed(tmp_path) == []


def test_a_writer_behind_other_writers_waits_once_and_writes_theirs_in_its_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Group commit for the files: the journal is already past our event (another process
    # appended after it), so the writer waits GROUP_WAIT_S, and what is appended meanwhile is
    # written in the same pass (one pass for three commands: team.json once).
    ours = open_board(tmp_path)
    ours.create("a")
    mine = Board(FileJournal(tmp_path / ".team"), actor="lead")  # appends, projects nothing
    other = Board(FileJournal(tmp_path / ".team"), actor="w2")
    own = mine.claim("task_1", "w1").task.seq
    other.create("b")  # appended after ours, before our sync
    waits: list[float] = []

    def meanwhile(seconds: float) -> None:
        waits.append(seconds)
        other.claim("task_2", "w2")  # a third command lands while we wait

    monkeypatch.setattr(projections, "_pause", meanwhile)
    passes: list[int] = []
    write = Projections.write

    def counted(self: Projections, state: object, *, since: int) -> None:
        passes.append(since)
        write(self, state, since=since)  # type: ignore[arg-type]

    monkeypatch.setattr(Projections, "write", counted)
    files = Projections(tmp_path)
    files.sync(ours.refresh, own=own)
    assert waits == [projections.GROUP_WAIT_S]
    assert passes == [own], "one pass from our event through the ones appended while we waited"
    assert files.projected_seq() == own + 2
    assert replayed(tmp_path) == []


def test_a_writer_with_nobody_writing_beside_it_does_not_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wait is for contention only: a lone command (a CLI call, the runtime's own commit)
    # must not pay it, nor a sync that is not after an append of its own (repair_all's).
    waits: list[float] = []
    monkeypatch.setattr(projections, "_pause", waits.append)
    board = open_board(tmp_path)
    board.create("a")
    board.claim("task_1", "w1")
    board.repair_projections()
    Projections(tmp_path).sync(board.refresh)
    assert waits == []
    assert replayed(tmp_path) == []


def reference_encoding(obj: dict[str, object]) -> bytes:
    """The documented file format: one key per line, each value as ``json.dumps`` writes it
    (UTF-8 kept), a list of objects one object per line."""
    lines = []
    for key, value in obj.items():
        head = f"  {json.dumps(key, ensure_ascii=False)}: "
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            rows = ",\n".join("    " + json.dumps(v, ensure_ascii=False) for v in value)
            lines.append(f"{head}[\n{rows}\n  ]")
        else:
            lines.append(head + json.dumps(value, ensure_ascii=False))
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode()


def test_files_are_byte_for_byte_the_documented_format(tmp_path: Path) -> None:
    # Files written by earlier versions must verify as current: the bytes may not move.
    board = open_board(tmp_path)
    board.create(
        'ünïcode "quoted" \\ line\nbreak \u2028',
        "tab\there",
        metadata={"n": 3, "f": 1.5, "ok": True, "none": None, "nested": {"l": [1, "é"]}},
        verify="true",
    )
    board.create("b", blocked_by=["task_1"], role="x")
    board.claim("task_1", "w1")
    proj = Projections(tmp_path)
    for tid in ("task_1", "task_2"):
        path = proj.task_file(tid)
        assert path.read_bytes() == reference_encoding(json.loads(path.read_bytes()))
    team = proj.team_file.read_bytes()
    assert team == reference_encoding(json.loads(team))
    assert b'"members": [\n    {' in team


def test_a_rewrite_does_not_rename_over_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rename over an existing file makes ext4 write the new data out at once (auto_da_alloc):
    # a disk write per projection per command. On Linux the files are exchanged instead.
    if sys.platform != "linux":
        pytest.skip("renameat2 is Linux's")
    board = open_board(tmp_path)
    board.create("a")

    rename = os.rename

    def no_rename(src: str, dst: str) -> None:
        if os.path.lexists(dst):  # (a rename onto a free name, as of a kept spare, is fine)
            raise AssertionError(f"renamed {src} over {dst}")
        rename(src, dst)

    monkeypatch.setattr(os, "replace", no_rename)
    monkeypatch.setattr(os, "rename", no_rename)
    board.claim("task_1", "w1")
    board.complete("task_1", "w1", 1, "done")
    assert Projections(tmp_path).read_task("task_1")["status"] == "completed"  # type: ignore[index]
    assert replayed(tmp_path) == []
    assert not list(tmp_path.rglob("*.tmp"))


def test_swap_in_without_the_exchange_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fsutil.exchange, "works", False)
    path = tmp_path / "f.json"
    projections.swap_in(path, b"one")  # nothing to exchange with: a plain rename
    projections.swap_in(path, b"two")
    assert path.read_bytes() == b"two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def test_a_reader_never_sees_a_torn_or_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "task_1.json"
    versions = [json.dumps({"n": n, "pad": "x" * (n * 37 % 3000)}).encode() for n in range(400)]
    projections.swap_in(path, versions[0])
    seen: list[bytes] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(path.read_bytes())  # FileNotFoundError would end the thread

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for data in versions[1:]:
            projections.swap_in(path, data)
    finally:
        done.set()
        reader.join(timeout=30)
    assert seen and set(seen) <= set(versions)
    assert path.read_bytes() == versions[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["task_1.json"]


def test_an_empty_task_file_is_repaired_on_open_even_when_the_mark_is_current(
    tmp_path: Path,
) -> None:
    # What a power cut can leave of a file written shortly before it (projections are not
    # fsynced), while the mark, written later, did reach the disk.
    board = open_board(tmp_path)
    board.create("a")
    board.create("b")
    proj = Projections(tmp_path)
    assert proj.projected_seq() == board.state.seq
    path = proj.task_file("task_1")
    stamp = path.stat()
    path.write_bytes(b"")
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # as old as before the mark
    open_board(tmp_path)
    assert proj.read_task("task_1") is not None
    assert replayed(tmp_path) == []


def test_a_folder_in_the_way_is_left_where_it_was(tmp_path: Path) -> None:
    folder = tmp_path / "task_1.json"
    folder.mkdir()
    (folder / "mine").write_text("x")
    with pytest.raises(IsADirectoryError):
        projections.swap_in(folder, b"{}")
    assert (folder / "mine").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["task_1.json"]
