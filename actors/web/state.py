"""The JSON documents of the dashboard's read routes, built from the team's journal and files.

``Dashboard`` wraps the live view's ``LiveSource`` (``actors/live/load.py``: incremental folds,
no locks a runtime waits for) and adds what a browser needs beyond ``teamctl watch --json``:
task details, the text of pending approvals, transcripts and job output. Everything here only
reads; the routes that change things (``actors/web/app.py``) open the team for each request, as
the CLI does. Agent-written text is returned as JSON strings, never as markup.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from actors.jobs.table import JobTable, fold_jobs
from actors.live.load import LiveSource
from harness.transcript import TranscriptError, fold_transcript

if TYPE_CHECKING:
    from actors.board.state import Task, TeamState
    from actors.worktrees.git import Git
    from mailboxes.events import Event

JOB_OUTPUT_BYTES = 256 * 1024
"""The tail of a job's log one request returns."""
TRANSCRIPT_MESSAGES = 500
"""The latest messages of a transcript one request returns."""
TASK_HISTORY = 500
"""The latest journal events about one task that ``GET /api/tasks/{id}`` returns."""
TASK_VERIFICATIONS = 20
"""The latest ``task.verified`` runs of one task it returns."""
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class NotFound(LookupError):
    """An id the team does not know (the route answers 404)."""


def event_json(event: Event) -> dict[str, Any]:
    """One journal event as the API shows it."""
    return {
        "seq": event.seq,
        "ts": event.ts,
        "type": event.type,
        "actor": event.actor,
        "data": event.data,
    }


def _task_extra(state: TeamState, task: Task) -> dict[str, Any]:
    usage = state.task_usage.get(task.id)
    plan = task.plan
    return {
        "description": task.description,
        "summary": task.summary,
        "verify": task.verify,
        "verified": task.verified,
        "created_by": task.created_by,
        "plan_detail": {
            "required": plan.required,
            "status": plan.status,
            "request_id": plan.request_id,
            "epoch": plan.epoch,
            "plan": plan.plan,
            "feedback": plan.feedback,
            "reviewer": plan.reviewer,
        },
        "tokens": 0 if usage is None else usage.input_tokens + usage.output_tokens,
        "cost_usd": 0.0 if usage is None else usage.cost_usd,
    }


class JournalIndex:
    """What the detail routes need from the journal, folded incrementally as the server follows
    it: each task's latest events and verify runs, the jobs, the input of open permission
    requests. A request then reads only the events appended since the last one, never the whole
    journal (the page asks again on every event while a task's detail is open)."""

    def __init__(self) -> None:
        self.seq = 0
        self.history: dict[str, deque[dict[str, Any]]] = {}
        self.events_about: dict[str, int] = {}
        self.verifications: dict[str, deque[dict[str, Any]]] = {}
        self.jobs: JobTable = MappingProxyType({})
        self.permissions: dict[str, tuple[dict[str, Any], str]] = {}

    def fold(self, events: Iterable[Event]) -> None:
        batch = list(events)
        if not batch:
            return
        self.jobs = fold_jobs(self.jobs, batch)
        for event in batch:
            data = event.data
            task_id = data.get("task_id")
            if isinstance(task_id, str):
                row = event_json(event)
                self.history.setdefault(task_id, deque(maxlen=TASK_HISTORY)).append(row)
                self.events_about[task_id] = self.events_about.get(task_id, 0) + 1
                if event.type == "task.verified":
                    runs = self.verifications.setdefault(task_id, deque(maxlen=TASK_VERIFICATIONS))
                    runs.append(data)
            if event.type == "permission.requested":
                raw = data.get("input")
                self.permissions[str(data.get("request_id"))] = (
                    dict(raw) if isinstance(raw, dict) else {},
                    str(data.get("reason") or ""),
                )
            elif event.type == "permission.decided":
                self.permissions.pop(str(data.get("request_id")), None)
        self.seq = batch[-1].seq


class Dashboard:
    """The read side of one ``teamctl web`` server: thread-safe, one open team."""

    def __init__(self, source: LiveSource, *, human: str) -> None:
        self.source = source
        self.team = source.team
        self.human = human
        self._lock = threading.Lock()
        self._git: Git | None = None
        self._index = JournalIndex()
        self._counts: dict[tuple[str, str], tuple[int | None, int | None]] = {}

    def _caught_up(self) -> JournalIndex:
        """The index with the events appended since the last call folded in (under the lock)."""
        self._index.fold(self.team.journal.read_from(self._index.seq + 1))
        return self._index

    @property
    def root(self) -> Path:
        return self.team.repo.root

    def state(self, csrf: str) -> dict[str, Any]:
        """``GET /api/state``."""
        with self._lock:
            snapshot = self.source.load()
            state = self.source.state
            permissions = dict(self._caught_up().permissions)
        out = snapshot.as_json()
        out["csrf"] = csrf
        out["human"] = self.human
        for row in out["tasks"]:
            task = state.tasks.get(row["id"])
            if task is not None:
                row.update(_task_extra(state, task))
        heads = self._heads() if out["worktrees"] else {}
        for row in out["worktrees"]:
            record = state.worktrees.get(row["name"])
            base = None if record is None else record.base
            row["base"] = base
            row["ahead"], row["behind"] = (
                (None, None) if base is None else self._ahead_behind(base, row["branch"], heads)
            )
        for row in out["approvals"]:
            if row["kind"] == "plan":
                req = state.plan_requests.get(row["request_id"])
                task = state.tasks.get(row["about"])
                row["task_id"] = row["about"]
                row["subject"] = None if task is None else task.subject
                row["plan"] = None if req is None else req.plan
                row["epoch"] = None if req is None else req.epoch
            else:
                tool_input, reason = permissions.get(row["request_id"], ({}, ""))
                row["tool"] = row["about"]
                row["input"] = tool_input
                row["reason"] = reason
        return out

    def task(self, task_id: str) -> dict[str, Any]:
        """``GET /api/tasks/{id}``: the task, the latest journal events about it
        (``TASK_HISTORY``; ``history_total`` counts them all), its latest verify runs. Only the
        events appended since the last request are read (``JournalIndex``)."""
        with self._lock:
            self.source.load()
            state = self.source.state
            task = state.tasks.get(task_id)
            if task is None:
                raise NotFound(task_id)
            index = self._caught_up()
            history = list(index.history.get(task_id, ()))
            total = index.events_about.get(task_id, 0)
            verifications = list(index.verifications.get(task_id, ()))
        row = task._asdict()
        row["plan"] = task.plan._asdict()
        row["metadata"] = dict(task.metadata)
        row.update(_task_extra(state, task))
        return {
            "task": row,
            "history": history,
            "history_total": total,
            "verifications": verifications,
        }

    def events_after(self, seq: int, limit: int = 1000) -> list[dict[str, Any]]:
        """Journal events after ``seq`` (at most ``limit``), oldest first."""
        out: list[dict[str, Any]] = []
        with self._lock:
            for event in self.team.journal.read_from(seq + 1):
                out.append(event_json(event))
                if len(out) >= limit:
                    break
        return out

    def last_seq(self) -> int:
        with self._lock:
            return self.team.journal.last_seq()

    def _member(self, agent: str) -> str:
        if agent not in self.members() or not _SAFE_ID.match(agent):
            raise NotFound(agent)
        return agent

    def transcript(self, agent: str) -> dict[str, Any]:
        """``GET /api/transcripts/{agent}``: a known member's transcript as messages."""
        name = self._member(agent)
        raw = self.team.transcripts.transcript(name)  # the TranscriptStore port
        try:
            text = b"" if raw is None else raw
            loaded = fold_transcript(text.decode("utf-8", errors="replace"), f"{name}.jsonl")
        except TranscriptError as exc:
            return {"agent": name, "messages": [], "error": str(exc)}
        tools: dict[str, str] = {}
        messages = []
        for message in loaded.messages:
            blocks = []
            for block in message.content:
                item = block.model_dump(mode="json")
                if item.get("type") == "tool_use":
                    tools[str(item["id"])] = str(item["name"])
                elif item.get("type") == "tool_result":
                    item["name"] = tools.get(str(item.get("tool_use_id")), "")
                elif item.get("type") == "thinking":
                    item.pop("signature", None)
                blocks.append(item)
            messages.append({"role": message.role, "blocks": blocks})
        return {
            "agent": name,
            "messages": messages[-TRANSCRIPT_MESSAGES:],
            "total": len(messages),
            "truncated": len(messages) > TRANSCRIPT_MESSAGES,
            "compactions": loaded.boundaries,
        }

    def job_output(self, job_id: str) -> dict[str, Any]:
        """``GET /api/jobs/{id}/output``: the tail of a known job's log."""
        with self._lock:
            record = self._caught_up().jobs.get(job_id)
        if record is None or not _SAFE_ID.match(job_id):
            raise NotFound(job_id)
        found = self.team.transcripts.job_output(job_id, tail=JOB_OUTPUT_BYTES)
        data, size = found if found is not None else (b"", 0)
        return {
            "job_id": job_id,
            "status": record.status,
            "output": data.decode("utf-8", errors="replace"),
            "truncated": size > JOB_OUTPUT_BYTES,
        }

    def _repo_git(self) -> Git:
        from actors.worktrees.git import Git

        with self._lock:
            if self._git is None:
                self._git = Git(self.root)
            return self._git

    def _heads(self) -> dict[str, str]:
        """Every local branch's commit, in one git call (``refs/heads/NAME`` → id)."""
        proc = self._repo_git().run(
            "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", check=False
        )
        pairs = (line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
        return {ref.removeprefix("refs/heads/"): oid for ref, oid in pairs}

    def _ahead_behind(
        self, base: str, branch: str, heads: dict[str, str]
    ) -> tuple[int | None, int | None]:
        """Commits on ``branch`` not on ``base``, and the other way round (None: git cannot
        tell, e.g. a branch that is gone). Read-only git, hardened (``actors/worktrees/git.py``).
        Counted once per pair of commits: the page reads the state on every event, and git
        runs again only when one of the two moved (``heads``: the branches' commits now)."""
        key = (heads.get(base, base), heads.get(branch, ""))
        if key[1] and key in self._counts:
            return self._counts[key]
        proc = self._repo_git().run(
            "rev-list", "--left-right", "--count", f"{base}...{branch}", "--", check=False
        )
        parts = proc.stdout.split()
        if proc.returncode != 0 or len(parts) != 2:
            return None, None
        counts = int(parts[1]), int(parts[0])
        if key[1]:
            self._counts[key] = counts
        return counts

    def members(self) -> frozenset[str]:
        """The names a message or a transcript may be asked for: the members and every agent
        with an inbox (the lead has one from ``teamctl init`` on)."""
        with self._lock:
            self.source.load()
            return frozenset(self.source.state.members) | frozenset(self.team.mailbox.agents())

    def close(self) -> None:
        if self._git is not None:
            self._git.close()
        self.source.close()
