"""The dashboard's read side in process (``actors/web/state.py``): details stay cheap on a long
journal — a request reads only the events appended since the last one, not the whole journal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.factory import open_team
from actors.live.load import LiveSource
from actors.web import state as web_state
from actors.web.state import Dashboard, NotFound
from mailboxes.events import JobStarted, TaskVerified, draft
from tests.actors.team_support import RealTeam, real_team


class CountingJournal:
    """The team's event store, counting the events every ``read_from`` hands out."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.read = 0

    def read_from(self, seq: int) -> Iterator[Any]:
        for event in self.inner.read_from(seq):
            self.read += 1
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def team(tmp_path: Path) -> Iterator[RealTeam]:
    team = real_team(tmp_path / "repo")
    yield team
    team.close()


@pytest.fixture
def dashboard(team: RealTeam) -> Iterator[tuple[Dashboard, CountingJournal]]:
    opened = open_team(team.root)
    counting = CountingJournal(opened.journal)
    opened.journal = counting  # type: ignore[assignment]
    board = Dashboard(LiveSource(opened, owns=True), human="user")
    yield board, counting
    board.close()


def test_a_task_detail_reads_only_what_the_journal_gained_since_the_last_request(
    team: RealTeam, dashboard: tuple[Dashboard, CountingJournal]
) -> None:
    board, counting = dashboard
    for n in range(60):
        team.board.create(f"task {n}", "")
    team.board.update("task_1", description="first")
    team.board.record_verification(
        TaskVerified(task_id="task_1", command="true", stage="complete", passed=True, output="ok")
    )
    detail = board.task("task_1")
    assert [e["type"] for e in detail["history"]] == [
        "task.created",
        "task.updated",
        "task.verified",
    ]
    assert detail["history_total"] == 3
    assert [v["output"] for v in detail["verifications"]] == ["ok"]
    assert board.task("task_60")["history"][0]["data"]["subject"] == "task 59"
    with pytest.raises(NotFound):
        board.task("task_99")

    counting.read = 0
    team.board.update("task_1", description="second")
    for _ in range(3):  # the page asks again on every event while the detail is open
        detail = board.task("task_1")
    board.state("csrf")
    assert detail["task"]["description"] == "second"
    assert [e["type"] for e in detail["history"]][-1] == "task.updated"
    # One new event: read once by the live view's fold and once by the detail index.
    assert counting.read <= 2


def test_a_long_task_history_keeps_its_latest_events(
    team: RealTeam, dashboard: tuple[Dashboard, CountingJournal], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_state, "TASK_HISTORY", 3)
    board, _ = dashboard
    team.board.create("busy", "")
    for n in range(5):
        team.board.update("task_1", description=f"edit {n}")
    detail = board.task("task_1")
    assert detail["history_total"] == 6
    assert [e["data"].get("description") for e in detail["history"]] == [
        "edit 2",
        "edit 3",
        "edit 4",
    ]


def test_job_output_looks_the_job_up_without_rereading_the_journal(
    team: RealTeam, dashboard: tuple[Dashboard, CountingJournal]
) -> None:
    board, counting = dashboard
    for n in range(40):
        team.board.create(f"task {n}", "")
    body = JobStarted(job_id="job_1", owner="lead", command="make", cwd=str(team.root))
    team.journal.append(lambda seen: [draft("job.started", "jobs", body)], after=0)
    (team.root / ".team" / "jobs").mkdir(exist_ok=True)
    (team.root / ".team" / "jobs" / "job_1.log").write_text("built\n")
    assert board.job_output("job_1")["output"] == "built\n"
    counting.read = 0
    for _ in range(3):
        assert board.job_output("job_1")["status"] == "running"
    with pytest.raises(NotFound):
        board.job_output("job_2")
    assert counting.read == 0


def test_ahead_behind_runs_git_again_only_when_a_branch_moved(
    team: RealTeam, dashboard: tuple[Dashboard, CountingJournal]
) -> None:
    import subprocess

    from tests.web.conftest import teamctl

    board, _ = dashboard

    def commit(where: Path, name: str) -> None:
        (where / name).write_text(name)
        for args in (["add", name], ["commit", "-qm", name]):
            git = ["git", "-c", "user.name=t", "-c", "user.email=t@x", *args]
            subprocess.run(git, cwd=where, check=True, capture_output=True)

    commit(team.root, "base.txt")
    team.board.create("work", "")
    teamctl(team.root, "worktree", "add", "w1", "--task", "task_1")
    tree = team.root / ".worktrees" / "w1"
    commit(tree, "one.txt")
    git = board._repo_git()
    ran: list[tuple[str, ...]] = []
    real = git.run

    def counting(*args: str, **kw: Any) -> Any:
        ran.append(args)
        return real(*args, **kw)

    git.run = counting  # type: ignore[method-assign]
    [row] = board.state("csrf")["worktrees"]
    assert (row["ahead"], row["behind"]) == (1, 0)
    assert [a[0] for a in ran] == ["for-each-ref", "rev-list"]
    ran.clear()
    for _ in range(3):  # the page reads the state on every event
        [row] = board.state("csrf")["worktrees"]
    assert (row["ahead"], row["behind"]) == (1, 0)
    assert [a[0] for a in ran] == ["for-each-ref"] * 3
    ran.clear()
    commit(tree, "two.txt")
    commit(team.root, "main.txt")
    [row] = board.state("csrf")["worktrees"]
    assert (row["ahead"], row["behind"]) == (2, 1)
    assert [a[0] for a in ran] == ["for-each-ref", "rev-list"]
