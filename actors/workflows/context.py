"""What a workflow script sees: ``WorkflowContext`` (docs/ARCHITECTURE.md, "Workflows").

``agent()`` is the only call that does work on the team; everything else composes it. Each
``agent()`` call has a stable content key (``step_key``): the hash of the step kind, the nested
workflow it runs in, its label, prompt, schema and tool set, the run's args and how many calls
with that same content came before it in this run. A resumed run that asks for a key already
recorded gets the recorded result back, without a task or a model call; the key never depends on
the order in which steps completed.

The context does not know the team: a ``StepRunner`` carries a step out (the engine's puts it on
the board as a task) and a ``StepJournal`` records it, so the context is tested with fakes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from actors.workflows.loader import Workflow, WorkflowError

ToolSet = Literal["none", "read-only", "all"] | tuple[str, ...]
TOOL_SETS = ("none", "read-only", "all")


@dataclass(frozen=True)
class StepSpec:
    """One ``agent()`` step as the runner gets it."""

    key: str
    prompt: str
    label: str | None = None
    phase: str | None = None
    schema: Mapping[str, Any] | None = None
    tools: ToolSet = "read-only"
    worktree: bool = False
    role: str | None = None
    workflow: str = ""
    """The workflow the step belongs to (a nested one's name inside its parent)."""


@dataclass(frozen=True)
class StepOutcome:
    """What a worker answered for a step: its final text (the ``complete_task`` summary)."""

    text: str
    task_id: str | None = None


class StepRunner(Protocol):
    """Carries out steps. ``run`` may be awaited for several steps at once."""

    async def run(self, spec: StepSpec, *, attempt: int, note: str | None) -> StepOutcome:
        """Do ``spec`` (``attempt`` 0, or 1 for the retry of a schema step, with ``note`` the
        validation error) and return the worker's answer; raises ``WorkflowError`` on failure."""
        ...


class StepJournal(Protocol):
    """Records a run's progress (the engine's writes ``workflow.*`` events)."""

    def step(
        self,
        key: str,
        result: Any,
        *,
        label: str | None,
        phase: str | None,
        task_id: str | None,
        name: str = "",
    ) -> None: ...

    def cached(self, key: str, *, name: str, phase: str | None) -> None:
        """A step answered from its recorded result."""
        ...

    def phase(self, title: str) -> None: ...

    def log(self, text: str) -> None: ...


Progress = Callable[[str], None]
"""A line of progress for a person (phase changes, steps started, done or cached, log lines)."""


def step_key(
    *,
    scope: str,
    label: str | None,
    prompt: str,
    schema: Mapping[str, Any] | None,
    tools: ToolSet,
    args: Any,
    occurrence: int,
    kind: str = "agent",
) -> str:
    """The stable key of a step (see the module docstring): 24 hex digits of a SHA-256."""
    content = {
        "kind": kind,
        "scope": scope,
        "label": label,
        "prompt": prompt,
        "schema": schema,
        "tools": list(tools) if isinstance(tools, tuple) else tools,
        "args": args,
        "n": occurrence,
    }
    blob = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def check_schema(schema: Mapping[str, Any]) -> None:
    """``WorkflowError`` unless ``schema`` is a valid JSON Schema (before any model call)."""
    import jsonschema  # type: ignore[import-untyped]

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise WorkflowError(f"a step's schema is not valid JSON Schema: {exc.message}") from None


def parse_result(text: str, schema: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The JSON value in ``text`` validated against ``schema``, or ``(None, why not)``."""
    import jsonschema

    raw = text.strip()
    if raw.startswith("```"):  # a fenced block: take what is inside
        raw = raw.strip("`")
        raw = raw[raw.find("\n") + 1 :] if "\n" in raw else raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"the result is not JSON ({exc.msg} at char {exc.pos})"
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return None, f"the result does not match the schema at {where}: {exc.message}"
    return value, None


@dataclass
class RunBudget:
    """Shared by a run and its nested workflow: the step cap and the content counters."""

    max_steps: int
    calls: int = 0
    seen: dict[str, int] = field(default_factory=dict)


class WorkflowContext:
    """The ``ctx`` of ``run(ctx, args)``."""

    def __init__(
        self,
        *,
        run_id: str,
        args: Any,
        runner: StepRunner,
        journal: StepJournal,
        recorded: Mapping[str, Any],
        budget: RunBudget,
        load: Callable[[str], Workflow] | None = None,
        progress: Progress | None = None,
        scope: str = "",
        depth: int = 0,
    ) -> None:
        self.run_id = run_id
        self.args = args
        self._runner = runner
        self._journal = journal
        self._recorded = recorded
        self._budget = budget
        self._load = load
        self._progress = progress or (lambda _line: None)
        self._scope = scope
        self._depth = depth
        self._phase: str | None = None
        self.cached = 0
        """Steps answered from the journal in this run (a resume)."""

    # -- steps --------------------------------------------------------------------------------

    async def agent(
        self,
        prompt: str,
        *,
        schema: Mapping[str, Any] | None = None,
        label: str | None = None,
        tools: str | Sequence[str] = "read-only",
        worktree: bool = False,
        role: str | None = None,
    ) -> Any:
        """Have a teammate do ``prompt``; its final text, or with ``schema`` the JSON value it
        returned, validated (one retry with the validation error, then ``WorkflowError``)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise WorkflowError("agent() needs a prompt")
        toolset = _toolset(tools)
        if schema is not None:
            check_schema(schema)
        budget = self._budget
        budget.calls += 1
        if budget.calls > budget.max_steps:
            raise WorkflowError(
                f"the run made more than {budget.max_steps} agent() calls "
                "(team.max_workflow_steps): stopped as a runaway loop"
            )
        base = step_key(
            scope=self._scope,
            label=label,
            prompt=prompt,
            schema=schema,
            tools=toolset,
            args=self.args,
            occurrence=0,
        )
        n = budget.seen.get(base, 0)
        budget.seen[base] = n + 1
        key = (
            base
            if n == 0
            else step_key(
                scope=self._scope,
                label=label,
                prompt=prompt,
                schema=schema,
                tools=toolset,
                args=self.args,
                occurrence=n,
            )
        )
        name = label or _first_line(prompt)
        if key in self._recorded:
            self.cached += 1
            self._journal.cached(key, name=name, phase=self._phase)
            self._progress(f"step {name}: cached")
            return self._recorded[key]
        spec = StepSpec(
            key=key,
            prompt=prompt,
            label=label,
            phase=self._phase,
            schema=schema,
            tools=toolset,
            worktree=worktree,
            role=role,
            workflow=self._scope,
        )
        self._progress(f"step {name}: started")
        outcome = await self._runner.run(spec, attempt=0, note=None)
        result: Any = outcome.text
        if schema is not None:
            result, why = parse_result(outcome.text, schema)
            if why is not None:
                self._progress(f"step {name}: {why}; retrying once")
                outcome = await self._runner.run(spec, attempt=1, note=why)
                result, why = parse_result(outcome.text, schema)
                if why is not None:
                    raise WorkflowError(f"step {name!r} failed after one retry: {why}")
        self._journal.step(
            key, result, label=label, phase=self._phase, task_id=outcome.task_id, name=name
        )
        self._progress(f"step {name}: done")
        return result

    async def parallel(self, awaitables: Iterable[Awaitable[Any]]) -> list[Any]:
        """Wait for all (a barrier); the results in input order."""
        return list(await asyncio.gather(*awaitables))

    async def pipeline(
        self, items: Iterable[Any], *stages: Callable[[Any], Awaitable[Any]]
    ) -> list[Any]:
        """Each item through every stage in turn, items independently (no barrier between
        stages); the last stage's results in input order."""

        async def through(item: Any) -> Any:
            value = item
            for stage in stages:
                value = await stage(value)
            return value

        return list(await asyncio.gather(*(through(item) for item in items)))

    def phase(self, title: str) -> None:
        """Start the phase ``title`` (recorded; later steps carry it)."""
        self._phase = str(title)
        self._journal.phase(self._phase)
        self._progress(f"phase: {self._phase}")

    def log(self, text: str) -> None:
        """A progress line (recorded)."""
        self._journal.log(str(text))
        self._progress(f"log: {text}")

    async def workflow(self, name: str, args: Any = None) -> Any:
        """Run workflow ``name`` with ``args`` inside this run (one level of nesting)."""
        if self._depth >= 1:
            raise WorkflowError(f"workflow {name!r}: workflows nest one level only")
        if self._load is None:
            raise WorkflowError("nested workflows are not available here")
        child = self._load(name)
        ctx = WorkflowContext(
            run_id=self.run_id,
            args=args,
            runner=self._runner,
            journal=self._journal,
            recorded=self._recorded,
            budget=self._budget,
            load=self._load,
            progress=self._progress,
            scope=f"{self._scope}/{child.name}",
            depth=self._depth + 1,
        )
        ctx._phase = self._phase
        self._progress(f"workflow {child.name}: started")
        try:
            return await child.run(ctx, args)
        finally:
            self.cached += ctx.cached


def _toolset(tools: str | Sequence[str]) -> ToolSet:
    if isinstance(tools, str):
        if tools not in TOOL_SETS:
            raise WorkflowError(
                f"tools={tools!r}: use 'none', 'read-only', 'all' or a list of tool names"
            )
        return tools  # type: ignore[return-value]
    names = tuple(str(t) for t in tools)
    if not names:
        raise WorkflowError("tools=[]: name at least one tool, or use 'none'")
    return names


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:60] + ("…" if len(line) > 60 else "")
