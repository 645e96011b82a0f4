"""A workflow run on the team (docs/ARCHITECTURE.md, "Workflows").

``WorkflowEngine.start(name, args)`` loads the file, journals ``workflow.started`` and runs
``run(ctx, args)`` on an asyncio loop in the calling thread; ``resume(run_id)`` runs the same
script again with the run's args, the recorded step results answering every unchanged step.

Each ``agent()`` step that has to run becomes a task on the board (``BoardSteps``): created
through ``Board.create`` under the op_id ``wf:<run>:<key>:task<attempt>`` (a resume finds the
task it created before the crash instead of adding one), with ``metadata["workflow"]`` naming
the run, workflow, phase, label, step key, schema and tool set. Idle teammates claim it like any
task; with no teammate on the team when the run starts, the run spawns workers (``wf-<n>``) up
to ``team.max_teammates``. The step's result is the completing teammate's ``complete_task``
summary (for a ``schema`` step, the JSON text of the result). The engine learns of completions
from the journal: a watcher of the team's journal (``TeamServices.watch``, on either backend:
docs/ARCHITECTURE.md, "Backends and seams") wakes the loop on any process's append, and the loop
reads the board again (the rescan tick covers a dropped hint).

The engine needs the team running (teammates hosted somewhere): ``teamctl workflow`` starts a
``TeamRuntime`` around it, the lead's ``workflow`` tool runs it inside the lead's runtime, and
``ResumedRuns`` lets a runtime that continues the team (``teamctl resume``, ``teamctl run``)
resume every run that was in flight when its process died. A run is driven by one engine per
process at a time: a second ``resume`` of a run already driven here waits for that drive's
outcome. A runtime stopping (``halt``) interrupts its runs without recording them finished: they
stay ``running``, for the next resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.board.board import acting_as
from actors.board.rules import AWAITS_WORKTREE
from actors.errors import DuplicateMember, TeamError
from actors.services import TeammateSpec
from actors.workflows.context import (
    Progress,
    RunBudget,
    StepOutcome,
    StepSpec,
    WorkflowContext,
    _first_line,
)
from actors.workflows.loader import Workflow, WorkflowError, find_workflow, load_workflow
from actors.workflows.record import Recorder, RunRecord, fold_runs
from teamctl_base.clock import new_id

if TYPE_CHECKING:
    from actors.board.state import Task
    from actors.services import TeamServices
    from mailboxes.ports import EventStore, Hint

WORKER_PREFIX = "wf-"
"""Names of the workers a run spawns when the team has no teammate."""
WORKER_PROMPT = (
    "You are a workflow worker. You claim workflow step tasks from the board; do what each "
    "task says with the tools it allows, then call complete_task with the task id and your "
    "answer as the summary (exactly the JSON asked for when the task gives a schema)."
)

Abort = Callable[[], str | None]
"""Why the run must stop now (a member failed for good, a cap reached), or None."""


class RunInterrupted(WorkflowError):
    """The process driving the run is stopping: the run stays ``running`` (resumable)."""


_driving: dict[str, threading.Event] = {}
"""Runs driven by an engine of this process (run id → set when that drive ends)."""
_outcomes: dict[str, RunOutcome] = {}
_driving_lock = threading.Lock()


@dataclass(frozen=True)
class RunOutcome:
    """How a run (or a resume) ended."""

    run_id: str
    status: str
    """``completed``, ``failed``, or ``interrupted`` (the process stopped; not recorded)."""
    result: Any = None
    error: str | None = None
    file_changed: bool = False
    cached: int = 0
    """Steps answered from the journal (a resume)."""
    spawned: tuple[str, ...] = ()
    """Workers this run spawned (the caller retires them)."""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "status": self.status,
            "result": self.result,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.file_changed:
            out["file_changed"] = True
        return out


def read_runs(source: Path | EventStore) -> dict[str, RunRecord]:
    """Every workflow run of a team's journal: ``source`` is the journal (an ``EventStore`` on
    any backend), or a repository whose team is opened read-only for the call."""
    if not isinstance(source, Path):
        return fold_runs(source.read_from(1))
    from actors.factory import open_team

    with open_team(source, read_only=True) as team:
        return fold_runs(team.journal.read_from(1))


def step_description(workflow: str, spec: StepSpec, note: str | None) -> str:
    """The task description a worker reads: the prompt, the tools it may use, how to answer."""
    lines = [spec.prompt.strip(), ""]
    if spec.tools == "none":
        lines.append("Tools: none: answer from the prompt alone; do not read or change anything.")
    elif spec.tools == "read-only":
        lines.append("Tools: read-only: you may read and search; you cannot change anything.")
    elif isinstance(spec.tools, tuple):
        lines.append(f"Tools: only {', '.join(spec.tools)} (and the task tools).")
    lines.append(
        "Answer: call complete_task with this task's id; its summary is the step's result, "
        f"returned to the workflow {workflow!r}."
    )
    if spec.schema is not None:
        schema = json.dumps(spec.schema, sort_keys=True)
        lines.append(
            "The summary must be exactly one JSON value (no prose, no code fence) valid against "
            f"this JSON Schema: {schema}"
        )
    if note:
        lines.append(f"Your previous answer was rejected: {note}. Answer again.")
    return "\n".join(lines)


class _Waker:
    """Wakes the run's loop when the journal changes (any process's append)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, services: TeamServices) -> None:
        self._loop = loop
        self._event = asyncio.Event()
        self._watcher = services.watch(self._hint, 1.0, inboxes=False)

    def start(self) -> None:
        self._watcher.start()

    def stop(self) -> None:
        self._watcher.stop()

    def _hint(self, _hints: frozenset[Hint]) -> None:
        # JournalAdvanced or a Tick: either way the board is read again.
        self._loop.call_soon_threadsafe(self.pulse)

    def pulse(self) -> None:
        old, self._event = self._event, asyncio.Event()
        old.set()

    async def wait(self) -> None:
        """Until the next hint (at most a second: the rescan tick's bound)."""
        event = self._event
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=1.0)


@dataclass
class BoardSteps:
    """Runs steps as tasks on the board (the engine's ``StepRunner``)."""

    services: TeamServices
    run_id: str
    workflow: str
    actor: str
    spawn_workers: bool
    waker: _Waker
    abort: Abort | None = None
    halt: threading.Event | None = None
    spawned: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def run(self, spec: StepSpec, *, attempt: int, note: str | None) -> StepOutcome:
        task = self.create_task(spec, attempt=attempt, note=note)
        with acting_as(self.actor):
            Recorder(self.services.board, self.run_id, self.actor).step_started(
                spec.key,
                name=spec.label or _first_line(spec.prompt),
                phase=spec.phase,
                task_id=task.id,
                attempt=attempt,
            )
        self._staff(spec.role)
        done = await self._finished(task.id)
        return StepOutcome(done.summary or "", done.id)

    def create_task(self, spec: StepSpec, *, attempt: int, note: str | None) -> Task:
        """The step's task on the board (the one made before a crash, found by its op_id).

        ``worktree=True`` (and this process runs worktrees): the task is created marked
        ``AWAITS_WORKTREE``, which no teammate claims (``actors.workflows.tools.claimable``),
        then bound to a worktree named after it; only then is it claimable, so the step never
        runs in the main checkout by a faster claim. When no worktree can be made the mark is
        dropped and the step runs in the checkout."""
        board = self.services.board
        name = spec.label or spec.prompt.strip().splitlines()[0]
        subject = f"[{self.workflow}] {name}"[:200]
        bind = spec.worktree and self.services.worktrees is not None
        meta: dict[str, Any] = {
            "workflow": {
                "run_id": self.run_id,
                "name": self.workflow,
                "scope": spec.workflow,
                "phase": spec.phase,
                "label": spec.label,
                "key": spec.key,
                "schema": dict(spec.schema) if spec.schema is not None else None,
                "tools": list(spec.tools) if isinstance(spec.tools, tuple) else spec.tools,
                "attempt": attempt,
            }
        }
        if bind:
            meta[AWAITS_WORKTREE] = True
        with acting_as(self.actor):
            task = board.create(
                subject,
                step_description(self.workflow, spec, note),
                metadata=meta,
                role=spec.role,
                op_id=f"wf:{self.run_id}:{spec.key}:task{attempt}",
            )
        if bind and task.metadata.get(AWAITS_WORKTREE) and task.worktree is None:
            task = self._bind_worktree(task)
        return task

    def _bind_worktree(self, task: Task) -> Task:
        """Bind a worktree to the step's unclaimable task; without one (none could be made),
        drop the mark so that the step runs in the checkout. The task as it is now."""
        import logging

        board, worktrees = self.services.board, self.services.worktrees
        assert worktrees is not None
        try:
            worktrees.create_for_task(task.id)
        except Exception as exc:  # TeamError, or the Worktrees actor not answering
            task = board.refresh().task(task.id)
            if task.worktree is None:
                logging.getLogger(__name__).warning(
                    "no worktree for the workflow step %s (it runs in the checkout): %s",
                    task.id,
                    exc,
                )
                with acting_as(self.actor):
                    task = board.update(task.id, metadata={AWAITS_WORKTREE: None})
        return board.refresh().task(task.id)

    def _staff(self, role: str | None) -> None:
        """With ``spawn_workers``: one more worker while open steps outnumber them."""
        if not self.spawn_workers:
            return
        with self._lock:
            state = self.services.board.refresh()
            open_steps = [
                t
                for t in state.tasks.values()
                if t.status in ("pending", "in_progress")
                and (t.metadata.get("workflow") or {}).get("run_id") == self.run_id
            ]
            live = [
                m for m in state.members.values() if m.kind == "agent" and m.status != "stopped"
            ]
            mine = [m for m in live if m.name in self.spawned]
            limit = self.services.settings.team.max_teammates
            if len(mine) >= len(open_steps) or len(live) - 1 >= limit:
                return
            n = 1
            while f"{WORKER_PREFIX}{n}" in state.members and (
                state.members[f"{WORKER_PREFIX}{n}"].status != "stopped"
            ):
                n += 1
            name = f"{WORKER_PREFIX}{n}"
            try:
                self.services.spawn_teammate(
                    TeammateSpec(name=name, role=role or "general", prompt=WORKER_PROMPT),
                    by=self.actor,
                )
            except DuplicateMember:
                return
            self.spawned.append(name)

    async def _finished(self, task_id: str) -> Task:
        board = self.services.board
        while True:
            task = board.refresh().task(task_id)
            if task.status == "completed":
                return task
            if task.status == "deleted":
                raise WorkflowError(f"the task {task_id} of a step was deleted")
            if self.halt is not None and self.halt.is_set():
                raise RunInterrupted("the team is stopping")
            why = self.abort() if self.abort is not None else None
            if why:
                raise WorkflowError(why)
            await self.waker.wait()


class WorkflowEngine:
    """Starts and resumes workflow runs on a running team (``services``)."""

    def __init__(
        self,
        services: TeamServices,
        *,
        actor: str = "cli",
        progress: Progress | None = None,
        abort: Abort | None = None,
        halt: threading.Event | None = None,
    ) -> None:
        self.services = services
        self.actor = actor
        self.progress = progress
        self.abort = abort
        self.halt = halt
        """Set when the process stops: the run is interrupted, left ``running``."""

    @property
    def root(self) -> Path:
        return self.services.repo_root

    def load(self, name: str) -> Workflow:
        return load_workflow(find_workflow(self.root, name))

    def start(self, name: str, args: Any = None) -> RunOutcome:
        """Run workflow ``name`` (a ``WorkflowError`` for a bad file, before anything runs)."""
        workflow = self.load(name)
        run_id = f"wf_{new_id()[:12]}"
        recorder = Recorder(self.services.board, run_id, self.actor)
        with acting_as(self.actor):
            recorder.started(workflow.name, args, str(workflow.path), workflow.sha256)
        return self._drive(workflow, run_id, args, recorded={}, recorder=recorder)

    def resume(self, run_id: str) -> RunOutcome:
        """Run ``run_id`` again: recorded steps answer from the journal, the rest run. A run an
        engine of this process drives already: its outcome, once that drive ends."""
        with _driving_lock:
            ongoing = _driving.get(run_id)
        if ongoing is not None:
            if self.progress is not None:
                self.progress(f"run {run_id} is already being resumed here: waiting for it")
            ongoing.wait()
            with _driving_lock:
                done = _outcomes.get(run_id)
            if done is not None and done.status != "interrupted":
                return RunOutcome(done.run_id, done.status, done.result, done.error)
        run = read_runs(self.services.journal).get(run_id)
        if run is None:
            raise WorkflowError(f"no workflow run {run_id!r} (`teamctl workflow runs` lists them)")
        if run.status == "completed":
            raise WorkflowError(f"workflow run {run_id} already completed: nothing to resume")
        path = Path(run.file)
        workflow = load_workflow(path) if path.is_file() else self.load(run.name)
        changed = workflow.sha256 != run.file_sha256
        recorder = Recorder(self.services.board, run_id, self.actor)
        with acting_as(self.actor):
            recorder.resumed(workflow.sha256, changed)
        if changed and self.progress is not None:
            self.progress(
                f"the workflow file {workflow.path} changed since the run started: "
                "changed steps run again"
            )
        outcome = self._drive(workflow, run_id, run.args, recorded=run.steps, recorder=recorder)
        return RunOutcome(
            outcome.run_id,
            outcome.status,
            outcome.result,
            outcome.error,
            changed,
            outcome.cached,
            outcome.spawned,
        )

    def _drive(
        self,
        workflow: Workflow,
        run_id: str,
        args: Any,
        *,
        recorded: Mapping[str, Any],
        recorder: Recorder,
    ) -> RunOutcome:
        done = threading.Event()
        with _driving_lock:
            if run_id in _driving:
                raise WorkflowError(f"workflow run {run_id} is already running in this process")
            _driving[run_id] = done
            _outcomes.pop(run_id, None)
        outcome: RunOutcome | None = None
        try:
            outcome = asyncio.run(self._main(workflow, run_id, args, recorded, recorder))
            return outcome
        finally:
            with _driving_lock:
                del _driving[run_id]
                if outcome is not None:
                    _outcomes[run_id] = outcome
            done.set()

    async def _main(
        self,
        workflow: Workflow,
        run_id: str,
        args: Any,
        recorded: Mapping[str, Any],
        recorder: Recorder,
    ) -> RunOutcome:
        state = self.services.board.refresh()
        teammates = [
            m
            for m in state.members.values()
            if m.kind == "agent" and m.status != "stopped" and m.role != "lead"
        ]
        waker = _Waker(asyncio.get_running_loop(), self.services)
        steps = BoardSteps(
            self.services,
            run_id,
            workflow.name,
            self.actor,
            spawn_workers=not teammates,
            waker=waker,
            abort=self.abort,
            halt=self.halt,
        )

        class Journal:
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
                with acting_as(recorder.actor):
                    recorder.step(key, result, label=label, phase=phase, task_id=task_id, name=name)

            def cached(self, key: str, *, name: str, phase: str | None) -> None:
                with acting_as(recorder.actor):
                    recorder.step_cached(key, name=name, phase=phase)

            def phase(self, title: str) -> None:
                with acting_as(recorder.actor):
                    recorder.phase(title)

            def log(self, text: str) -> None:
                with acting_as(recorder.actor):
                    recorder.log(text)

        ctx = WorkflowContext(
            run_id=run_id,
            args=args,
            runner=steps,
            journal=Journal(),
            recorded=recorded,
            budget=RunBudget(self.services.settings.team.max_workflow_steps),
            load=self.load,
            progress=self.progress,
            scope=workflow.name,
        )
        waker.start()
        why: str | None = None
        result: Any = None
        try:
            result = await workflow.run(ctx, args)
            json.dumps(result)  # the result is recorded in the journal
        except TeamError as exc:  # WorkflowError included: already one clear line
            why = str(exc)
        except Exception as exc:  # the script's own error: where it happened
            why = _with_line(workflow, exc, f"run() raised {type(exc).__name__}: {exc}")
        finally:
            waker.stop()
        if why is not None and self.halt is not None and self.halt.is_set():
            # The process is stopping (whatever failed on the way): left running, resumable.
            return RunOutcome(
                run_id, "interrupted", None, why, cached=ctx.cached, spawned=tuple(steps.spawned)
            )
        if why is not None:
            return self._fail(recorder, run_id, why, ctx.cached, steps.spawned)
        with acting_as(self.actor):
            recorder.finished("completed", result=result)
        return RunOutcome(
            run_id, "completed", result, cached=ctx.cached, spawned=tuple(steps.spawned)
        )

    def _fail(
        self, recorder: Recorder, run_id: str, why: str, cached: int, spawned: list[str]
    ) -> RunOutcome:
        with acting_as(self.actor):
            recorder.finished("failed", error=why)
        return RunOutcome(run_id, "failed", None, why, cached=cached, spawned=tuple(spawned))


def _with_line(workflow: Workflow, exc: BaseException, why: str) -> str:
    from actors.workflows.loader import where

    place = where(workflow.path, exc)
    return f"{place}: {why}"


class ResumedRuns:
    """The workflow runs a team runtime resumes on start (``teamctl resume``, ``teamctl run``):
    every run started and not finished, its process gone (one runtime per repository: none
    drives it now). Each is resumed by a ``WorkflowEngine`` on a thread of its own, as
    ``teamctl workflow resume RUN_ID`` would (recorded steps answer from the journal). A run
    started by an agent (the lead's ``workflow`` tool) sends it the outcome as a message, since
    its tool call died with the process. ``stop`` interrupts them, leaving them ``running``."""

    def __init__(
        self,
        services: TeamServices,
        *,
        on_done: Callable[[], None] | None = None,
        sender: str = "workflow",
    ) -> None:
        self.services = services
        self.on_done = on_done
        self.sender = sender
        self.halt = threading.Event()
        self.outcomes: dict[str, RunOutcome] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, runs: Mapping[str, RunRecord]) -> list[str]:
        """Resume every ``running`` run of ``runs``; their ids."""
        ids = [r.run_id for r in runs.values() if r.status == "running"]
        for run_id in ids:
            run = runs[run_id]
            thread = threading.Thread(
                target=self._resume,
                args=(run,),
                name=f"workflow-{run_id}",
                daemon=True,
            )
            with self._lock:
                self._threads.append(thread)
            thread.start()
        return ids

    def busy(self) -> bool:
        """A resumed run is still being driven."""
        with self._lock:
            return any(t.is_alive() for t in self._threads)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Interrupt the runs (left ``running``) and wait for their threads."""
        self.halt.set()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout_s)

    def _resume(self, run: RunRecord) -> None:
        import logging

        log = logging.getLogger(__name__)
        state = self.services.board.refresh()
        starter = state.members.get(run.actor)
        actor = run.actor or "cli"
        try:
            engine = WorkflowEngine(self.services, actor=actor, halt=self.halt)
            outcome = engine.resume(run.run_id)
        except Exception as exc:
            log.warning("workflow run %s not resumed: %s", run.run_id, exc)
            outcome = RunOutcome(run.run_id, "failed", None, str(exc))
        with self._lock:
            self.outcomes[run.run_id] = outcome
        try:
            if outcome.status != "interrupted" and starter is not None and starter.kind == "agent":
                text = (
                    f"The workflow run {run.run_id} ({run.name}) you started before the team "
                    f"stopped was resumed and ended: {json.dumps(outcome.as_json())}"
                )
                self.services.send(self.sender, run.actor, "message", {"text": text})
            for worker in outcome.spawned:
                with contextlib.suppress(TeamError):
                    self.services.request_shutdown(worker, by=actor)
        except Exception as exc:  # the team may be stopping: the journal has the outcome
            log.warning("workflow run %s: %s", run.run_id, exc)
        finally:
            if self.on_done is not None:
                self.on_done()
