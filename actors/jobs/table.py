"""The job table folded from the journal, and its views: pure values, no processes.

``fold_jobs(table, events) -> table`` applies ``job.started``/``job.finished``; ``job_views`` is
what ``teamctl jobs`` and the live view show; ``notification`` is the message a job's owner gets
when it finishes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from mailboxes.events import Event, JobFinished, JobStarted, payload
from mailboxes.messages import MessageDraft

JobStatus = Literal["running", "exited", "killed", "timeout", "lost"]


class JobRecord(NamedTuple):
    """One job as folded from the journal."""

    job_id: str
    owner: str
    command: str
    cwd: str
    pid: int | None
    start_time: float | None
    started_at: float
    status: JobStatus = "running"
    exit_code: int | None = None
    finished_at: float | None = None


JobTable = Mapping[str, JobRecord]


def fold_jobs(table: JobTable, events: Iterable[Event]) -> JobTable:
    """``table`` with the job events among ``events`` applied (others ignored); pure."""
    out: dict[str, JobRecord] | None = None
    for event in events:
        if not event.type.startswith("job."):
            continue
        out = dict(table) if out is None else out
        body = payload(event)
        if isinstance(body, JobStarted):
            out[body.job_id] = JobRecord(
                body.job_id, body.owner, body.command, body.cwd, body.pid, body.start_time, event.ts
            )
        elif isinstance(body, JobFinished) and body.job_id in out:
            status: Any = body.status
            out[body.job_id] = out[body.job_id]._replace(
                status=status, exit_code=body.exit_code, finished_at=event.ts
            )
    return table if out is None else MappingProxyType(out)


@dataclass(frozen=True)
class JobView:
    """One job as ``teamctl jobs`` shows it."""

    job_id: str
    owner: str
    command: str
    cwd: str
    pid: int | None
    status: str
    exit_code: int | None
    started_at: float
    finished_at: float | None
    log_path: str

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def job_views(table: JobTable, jobs_dir: Path, *, limit: int = 50) -> tuple[JobView, ...]:
    """Running jobs first, then the most recently finished, at most ``limit``."""
    records = sorted(
        table.values(), key=lambda r: (r.status != "running", -(r.finished_at or r.started_at))
    )
    return tuple(
        JobView(
            r.job_id,
            r.owner,
            r.command,
            r.cwd,
            r.pid,
            r.status,
            r.exit_code,
            r.started_at,
            r.finished_at,
            str(jobs_dir / f"{r.job_id}.log"),
        )
        for r in records[:limit]
    )


def notification(
    record: JobRecord, log_path: Path, head: str, tail: str, size: int
) -> MessageDraft:
    """The ``task_notification`` for a finished job whose log at ``log_path`` holds ``size``
    bytes, starting with ``head`` and ending with ``tail`` (``actors.jobs.proc.head_tail``)."""
    text = (
        f"Background job {record.job_id} {record.status} (exit code {record.exit_code}): "
        f"{record.command}\nFull output ({size} bytes): {log_path}\n--- head ---\n{head}"
    )
    if tail:
        text += f"\n--- tail ---\n{tail}"
    body = {
        "job_id": record.job_id,
        "status": record.status,
        "exit_code": record.exit_code,
        "command": record.command,
        "log_path": str(log_path),
        "head": head,
        "tail": tail,
        "size": size,
        "text": text,
    }
    return MessageDraft(to=record.owner, type="task_notification", body=body)
