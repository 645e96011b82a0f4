"""``FileTranscripts``: the ``TranscriptStore`` of the file backend (docs/ARCHITECTURE.md,
"Backends and seams"): agents' transcripts are ``<transcripts>/<agent>.jsonl`` and background
jobs' output ``<jobs>/<job_id>.log`` under ``.team/``, as the hosting process writes them
(``harness/transcript.py``, ``actors/jobs/actor.py``). Reading only: names are checked, so no
name reaches outside its folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

from mailboxes.names import check_agent_name

__all__ = ["FileTranscripts", "check_job_id"]

_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_job_id(job_id: str) -> str:
    """``job_id`` if it is a plain file name stem (letters, digits, ``.``, ``_``, ``-``), else
    ``ValueError``."""
    if not _JOB_ID.match(job_id):
        raise ValueError(f"bad job id {job_id!r}")
    return job_id


class FileTranscripts:
    """Transcripts in ``transcripts`` and job logs in ``jobs`` (folders that may not exist)."""

    def __init__(self, transcripts: Path, jobs: Path) -> None:
        self.transcripts = Path(transcripts)
        self.jobs = Path(jobs)

    def agents(self) -> list[str]:
        try:
            names = os.listdir(self.transcripts)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            stem, dot, ext = name.rpartition(".")
            if dot and ext == "jsonl":
                try:
                    found.append(check_agent_name(stem))
                except ValueError:
                    continue
        return sorted(found)

    def transcript(self, agent: str) -> bytes | None:
        try:
            return (self.transcripts / f"{check_agent_name(agent)}.jsonl").read_bytes()
        except FileNotFoundError:
            return None

    def job_output(self, job_id: str, *, tail: int) -> tuple[bytes, int] | None:
        try:
            with (self.jobs / f"{check_job_id(job_id)}.log").open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(0, size - tail))
                return log.read(tail), size
        except FileNotFoundError:
            return None

    def close(self) -> None:
        """Nothing to release (the ``TranscriptStore`` port's ``close``)."""
