"""``teamctl jobs`` and ``teamctl cron``, in-process against a real repository."""

from __future__ import annotations

import threading
from pathlib import Path

import pykka
import pytest

from actors.jobs.actor import JobsHandle
from actors.jobs.scheduler import MaildirDelivery
from mailboxes.journal.store import FileJournal
from mailboxes.messages import MessageDraft
from teamctl_base.clock import SystemClock, UuidIds
from tests.actors.cli.cli_support import fails, git_repo, ok, ok_json
from tests.actors.jobs.cron_support import stop_actors

__all__ = ["stop_actors"]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_actors: None) -> Path:
    return git_repo(tmp_path, monkeypatch)


def test_cron_add_list_cancel(repo: Path) -> None:
    assert ok(["cron"]).stdout.strip() == "no cron jobs"
    added = ok_json(["cron", "add", "30 9 * * mon-fri", "standup summary", "--tz", "UTC"])
    cron_id = added["cron_id"]
    assert added["next_fire"].endswith("09:30:00+00:00")
    assert (added["recurring"], added["owner"], added["status"]) == (True, "lead", "active")
    once = ok_json(["cron", "add", "0 0 1 1 *", "happy new year", "--once"])
    assert once["recurring"] is False
    listed = ok_json(["cron", "list"])
    assert [c["cron_id"] for c in listed] == [cron_id, once["cron_id"]]
    assert cron_id in ok(["cron"]).stdout
    assert ok_json(["cron", "cancel", cron_id]) == {"cron_id": cron_id, "cancelled": True}
    assert "already finished or been cancelled" in ok(["cron", "cancel", cron_id]).stdout
    assert [c["cron_id"] for c in ok_json(["cron", "list"])] == [once["cron_id"]]
    every = ok_json(["cron", "list", "--all"])
    assert {c["cron_id"]: c["status"] for c in every} == {
        cron_id: "cancelled",
        once["cron_id"]: "active",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["61 * * * *", "p"], "minute field: 61 is out of range 0-59"),
        (["* * * *", "p"], "has 4 fields; expected 5"),
        (["* * * * *", "p", "--tz", "Nowhere/City"], "unknown time zone 'Nowhere/City'"),
        (["* * * * *", "p", "--owner", "../x"], "invalid agent name"),
    ],
)
def test_cron_add_refuses_bad_input_in_one_line(repo: Path, args: list[str], message: str) -> None:
    assert message in fails(["cron", "add", *args])
    assert ok(["cron"]).stdout.strip() == "no cron jobs"


def test_cron_cancel_unknown(repo: Path) -> None:
    assert fails(["cron", "cancel", "cron_nope"]) == "error: unknown cron job 'cron_nope'"


class Signal(MaildirDelivery):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.done = threading.Event()

    def __call__(self, sender: str, draft: MessageDraft, message_id: str) -> None:
        super().__call__(sender, draft, message_id)
        self.done.set()


def test_jobs_lists_running_and_finished(repo: Path) -> None:
    assert ok(["jobs"]).stdout.strip() == "no background jobs"
    journal = FileJournal(repo / ".team")
    deliver = Signal(repo / ".team" / "mailboxes")
    try:
        jobs = JobsHandle.start(
            journal, deliver, jobs_dir=repo / ".team" / "jobs", clock=SystemClock(), ids=UuidIds()
        )
        view = jobs.start_job("echo done; exit 4", cwd=repo, owner="lead")
        assert deliver.done.wait(20)
    finally:
        pykka.ActorRegistry.stop_all()
        journal.close()
    [listed] = ok_json(["jobs"])
    assert (listed["job_id"], listed["status"], listed["exit_code"]) == (view.job_id, "exited", 4)
    assert Path(listed["log_path"]).read_text() == "done\n"
    text = ok(["jobs"]).stdout
    assert view.job_id in text
    assert "exited" in text
