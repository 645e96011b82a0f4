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
    WorkflowStepCompleted,
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
        self, key: str, result: Any, *, label: str | None, phase: str | None, task_id: str | None
    ) -> None:
        body = WorkflowStepCompleted(
            run_id=self.run_id, key=key, label=label, phase=phase, task_id=task_id, result=result
        )
        self._append(body, f"wf:{self.run_id}:{key}")

    def phase(self, title: str) -> None:
        self._append(WorkflowPhase(run_id=self.run_id, title=title))

    def log(self, text: str) -> None:
        self._append(WorkflowLog(run_id=self.run_id, text=text))

    def finished(self, status: str, *, result: Any = None, error: str | None = None) -> None:
        body = WorkflowFinished.model_validate(
            {"run_id": self.run_id, "status": status, "result": result, "error": error}
        )
        self._append(body)
