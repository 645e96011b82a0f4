"""The ``workflow.*`` journal events of a run, written through the board and folded back into
``RunRecord``s (docs/ARCHITECTURE.md, "Event catalogue", "Workflows").

Each write is one append through ``Board.execute`` (checked under the journal lock). A step's
``workflow.step_completed`` carries the op_id ``wf:<run>:<key>``, so recording the same step
twice (a resume racing a slow writer) stores it once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mailboxes.events import (
    Event,
    EventDraft,
    Payload,
    WorkflowFinished,
    WorkflowLog,
    WorkflowPhase,
    WorkflowResumed,
    WorkflowStarted,
    WorkflowStepCached,
    WorkflowStepCompleted,
    WorkflowStepStarted,
    draft,
)

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import TeamState


@dataclass
class RunRecord:
    """One workflow run as the journal tells it."""

    run_id: str
    name: str
    args: Any
    file: str
    file_sha256: str
    actor: str = ""
    """Who started the run (``cli``, or the agent whose ``workflow`` tool did)."""
    status: str = "running"
    """``running`` (started, not finished: in flight, or its process died), ``completed``,
    ``failed``."""
    steps: dict[str, Any] = field(default_factory=dict)
    """Step key → recorded result."""
    step_tasks: list[str] = field(default_factory=list)
    phase: str | None = None
    result: Any = None
    error: str | None = None
    started_at: float = 0.0
    finished_at: float | None = None


def fold_runs(events: Iterable[Event]) -> dict[str, RunRecord]:
    """Every workflow run in ``events``, by run id, in start order."""
    runs: dict[str, RunRecord] = {}
    for event in events:
        if not event.type.startswith("workflow."):
            continue
        data = event.data
        if event.type == WorkflowStarted.TYPE:
            runs[data["run_id"]] = RunRecord(
                run_id=data["run_id"],
                name=data["name"],
                args=data.get("args"),
                file=data["file"],
                file_sha256=data["file_sha256"],
                actor=event.actor,
                started_at=event.ts,
            )
            continue
        run = runs.get(str(data.get("run_id")))
        if run is None:
            continue
        if event.type == WorkflowStepCompleted.TYPE:
            run.steps[data["key"]] = data.get("result")
            if data.get("task_id"):
                run.step_tasks.append(data["task_id"])
        elif event.type == WorkflowPhase.TYPE:
            run.phase = data["title"]
        elif event.type == WorkflowResumed.TYPE:
            run.status, run.finished_at, run.error = "running", None, None
        elif event.type == WorkflowFinished.TYPE:
            run.status = data["status"]
            run.result, run.error = data.get("result"), data.get("error")
            run.finished_at = event.ts
    return runs


def step_tasks(state: TeamState, run_id: str) -> list[str]:
    """The ids of every task created for a step of ``run_id`` (retries included)."""
    return [
        t.id
        for t in state.tasks.values()
        if isinstance(t.metadata.get("workflow"), Mapping)
        and t.metadata["workflow"].get("run_id") == run_id
    ]


class Recorder:
    """Writes the events of one run through ``board`` (as ``actor``)."""

    def __init__(self, board: Board, run_id: str, actor: str = "workflow") -> None:
        self.board = board
        self.run_id = run_id
        self.actor = actor

    def _append(self, body: Payload, op_id: str | None = None) -> None:
        def decide(state: TeamState) -> Sequence[EventDraft]:
            if op_id is not None and op_id in state.ops:
                return ()
            return (draft(body.TYPE, self.actor, body, op_id),)

        self.board.execute(decide)

    def started(self, name: str, args: Any, file: str, sha256: str) -> None:
        body = WorkflowStarted(
            run_id=self.run_id, name=name, args=args, file=file, file_sha256=sha256
        )
        self._append(body, f"wf:{self.run_id}:started")

    def resumed(self, sha256: str, changed: bool) -> None:
        self._append(WorkflowResumed(run_id=self.run_id, file_sha256=sha256, file_changed=changed))

    def step(
        self,
        key: str,
        result: Any,
        *,
        label: str | None,
        phase: str | None,
        task_id: str | None,
        name: str = "",
    ) -> None:
        body = WorkflowStepCompleted(
            run_id=self.run_id,
            key=key,
            label=label,
            name=name,
            phase=phase,
            task_id=task_id,
            result=result,
        )
        self._append(body, f"wf:{self.run_id}:{key}")

    def step_started(
        self, key: str, *, name: str, phase: str | None, task_id: str | None, attempt: int
    ) -> None:
        body = WorkflowStepStarted(
            run_id=self.run_id, key=key, name=name, phase=phase, task_id=task_id, attempt=attempt
        )
        self._append(body)

    def step_cached(self, key: str, *, name: str, phase: str | None) -> None:
        self._append(WorkflowStepCached(run_id=self.run_id, key=key, name=name, phase=phase))

    def phase(self, title: str) -> None:
        self._append(WorkflowPhase(run_id=self.run_id, title=title))

    def log(self, text: str) -> None:
        self._append(WorkflowLog(run_id=self.run_id, text=text))

    def finished(self, status: str, *, result: Any = None, error: str | None = None) -> None:
        body = WorkflowFinished.model_validate(
            {"run_id": self.run_id, "status": status, "result": result, "error": error}
        )
        self._append(body)


def progress_line(event_type: str, data: Mapping[str, Any]) -> str | None:
    """A ``workflow.*`` event as one line of progress for a person (``teamctl watch``, the
    ``teamctl run`` console), or None for another event. Plain text, not escaped: the names,
    titles and log lines come from the script and its agents, so callers escape it
    (``teamctl_base.text.safe``)."""
    if not event_type.startswith("workflow."):
        return None
    run = f"workflow {data.get('run_id', '?')}"
    name = data.get("name") or data.get("label") or str(data.get("key", ""))[:8]
    kind = event_type.removeprefix("workflow.")
    if kind == "started":
        return f"{run} ({data.get('name')}) started"
    if kind == "resumed":
        changed = ": its file changed, changed steps run again" if data.get("file_changed") else ""
        return f"{run} resumed{changed}"
    if kind == "phase":
        return f"{run} phase: {data.get('title')}"
    if kind == "step_started":
        where = f" as {data['task_id']}" if data.get("task_id") else ""
        retry = " (retry)" if data.get("attempt") else ""
        return f"{run} step {name}: started{where}{retry}"
    if kind == "step_cached":
        return f"{run} step {name}: cached"
    if kind == "step_completed":
        return f"{run} step {name}: done"
    if kind == "log":
        return f"{run} log: {data.get('text')}"
    if kind == "finished":
        if data.get("status") == "completed":
            return f"{run} completed"
        return f"{run} failed: {data.get('error')}"
    return None
