"""A teammate's ``complete_task`` goes through ``TeamServices.complete_task``: in the runtime,
completions of teammates that finish together share one journal commit with each other and with
the members' other writes (actors/runtime/commits.py, actors/runtime/services.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.board.board import Board
from actors.board.rules import Completion
from actors.board.state import TeamState
from actors.errors import StaleEpoch
from actors.runtime.commits import Batch
from harness.model.scripted import ScriptedModel
from mailboxes.events import EventDraft, MemberSpawned
from mailboxes.journal.store import FileJournal
from tests.actors.runtime.runtime_support import runtime, team_repo

DEADLINE_S = 30.0


def test_completions_that_meet_in_the_runtime_share_one_commit(tmp_path: Path) -> None:
    root = team_repo(tmp_path)
    rt = runtime(root, ScriptedModel({"agents": {"lead": {"rules": []}}}))
    board: Board = rt.team.board
    for name in ("w1", "w2"):
        board.add_member(MemberSpawned(name=name, role="general"))
    board.create("one")
    board.create("two")
    board.create("after both", blocked_by=["task_1", "task_2"])
    assert board.claim("task_1", "w1").ok and board.claim("task_2", "w2").ok

    executes: list[int] = []
    execute = board.execute

    def counted(decision: Callable[[TeamState], Any]) -> Any:
        executes.append(1)
        return execute(decision)

    board.execute = counted  # type: ignore[method-assign]
    # Another member's write being committed (held while deciding) when both completions come.
    entered, release = threading.Event(), threading.Event()

    def held(state: TeamState, batch: Batch) -> list[EventDraft]:
        entered.set()
        assert release.wait(DEADLINE_S)
        return []

    holder = threading.Thread(target=rt.commits.write, args=(held,))
    holder.start()
    assert entered.wait(DEADLINE_S)
    done: dict[str, Completion | BaseException] = {}

    def finish(name: str, tid: str, epoch: int) -> None:
        try:
            done[name] = rt.services.complete_task(tid, name, epoch, f"{name} done")
        except BaseException as exc:
            done[name] = exc

    finishers = [
        threading.Thread(target=finish, args=("w1", "task_1", 1)),
        threading.Thread(target=finish, args=("w2", "task_2", 1)),
        threading.Thread(target=finish, args=("w3", "task_2", 1)),  # not the owner
    ]
    for thread in finishers:
        thread.start()
    deadline = time.monotonic() + DEADLINE_S
    while len(rt.commits._queue) < 3:  # all three queued behind the held commit
        assert time.monotonic() < deadline, "the completions never queued"
        time.sleep(0.001)
    release.set()
    for thread in (holder, *finishers):
        thread.join(DEADLINE_S)
        assert not thread.is_alive()

    assert len(executes) == 2  # the held write's commit, then one for all three completions
    assert isinstance(done.pop("w3"), Exception)
    assert all(isinstance(c, Completion) for c in done.values())
    stored = [e for e in FileJournal(root / ".team").read_from(1) if e.type == "task.completed"]
    assert [e.actor for e in stored] == [e.data["owner"] for e in stored]
    assert sorted(e.actor for e in stored) == ["w1", "w2"]
    later = stored[-1].actor
    assert {n: c.unblocked for n, c in done.items() if isinstance(c, Completion)} == {
        "w1": ("task_3",) if later == "w1" else (),
        "w2": ("task_3",) if later == "w2" else (),
    }
    state = Board(FileJournal(root / ".team")).state
    assert [t.id for t in state.ready()] == ["task_3"]
    with pytest.raises(StaleEpoch):  # the claim is fenced as Board.complete fences it
        rt.services.complete_task("task_1", "w1", 7, "again")
