"""The job table: a pure fold of ``job.*`` events and its views, tested with plain events."""

from __future__ import annotations

from pathlib import Path

from actors.jobs.table import JobRecord, fold_jobs, job_views, notification
from mailboxes import events as ev


def event(seq: int, body: ev.Payload) -> ev.Event:
    return ev.Event(
        seq=seq,
        ts=100.0 + seq,
        type=body.TYPE,
        actor="jobs",
        data=body.model_dump(mode="json"),
        v=body.VERSION,
    )


def started(seq: int, job_id: str, owner: str = "alice") -> ev.Event:
    return event(
        seq, ev.JobStarted(job_id=job_id, owner=owner, command=f"run {job_id}", cwd=".", pid=seq)
    )


def test_fold_records_starts_and_finishes_and_ignores_other_events() -> None:
    table = fold_jobs(
        {},
        [
            started(1, "job_1"),
            event(2, ev.TeamCreated(name="t")),
            started(3, "job_2"),
            event(4, ev.JobFinished(job_id="job_1", status="exited", exit_code=0)),
        ],
    )
    assert table["job_1"] == JobRecord(
        "job_1", "alice", "run job_1", ".", 1, None, 101.0, "exited", 0, 104.0
    )
    assert table["job_2"].status == "running"
    assert table["job_2"].finished_at is None


def test_fold_is_pure_and_returns_the_same_table_when_nothing_is_a_job_event() -> None:
    before = fold_jobs({}, [started(1, "job_1")])
    after = fold_jobs(before, [event(2, ev.JobFinished(job_id="job_1", status="killed"))])
    assert before["job_1"].status == "running"
    assert after["job_1"].status == "killed"
    assert fold_jobs(after, [event(3, ev.TeamCreated(name="t"))]) is after


def test_a_finish_without_a_start_is_ignored() -> None:
    table = fold_jobs({}, [event(1, ev.JobFinished(job_id="job_9", status="exited"))])
    assert dict(table) == {}


def test_views_put_running_jobs_first_then_the_latest_finished(tmp_path: Path) -> None:
    table = fold_jobs(
        {},
        [
            started(1, "job_1"),
            started(2, "job_2"),
            started(3, "job_3"),
            event(4, ev.JobFinished(job_id="job_1", status="exited", exit_code=0)),
            event(5, ev.JobFinished(job_id="job_3", status="timeout")),
        ],
    )
    views = job_views(table, tmp_path)
    assert [v.job_id for v in views] == ["job_2", "job_3", "job_1"]
    assert views[0].log_path == str(tmp_path / "job_2.log")
    assert [v.job_id for v in job_views(table, tmp_path, limit=1)] == ["job_2"]


def test_notification_carries_the_log_excerpt_given_to_it(tmp_path: Path) -> None:
    record = JobRecord("job_1", "alice", "make", ".", 7, None, 1.0, "exited", 2, 3.0)
    log = tmp_path / "job_1.log"
    message = notification(record, log, "first lines", "last lines", 9000)
    assert message.to == "alice"
    assert message.type == "task_notification"
    assert message.body["exit_code"] == 2
    assert message.body["size"] == 9000
    assert "--- head ---\nfirst lines" in message.body["text"]
    assert message.body["text"].endswith("--- tail ---\nlast lines")
