"""``WorkflowContext`` with a fake step runner: stable keys, recorded results reused, schema
validation with one retry, the step cap, parallel and pipeline order, one level of nesting."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from actors.workflows.context import (
    RunBudget,
    StepOutcome,
    StepSpec,
    WorkflowContext,
    step_key,
)
from actors.workflows.loader import Workflow, WorkflowError

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@dataclass
class FakeRunner:
    """Answers each prompt from ``answers`` (a list is consumed per call)."""

    answers: dict[str, Any]
    calls: list[tuple[str, int, str | None]] = field(default_factory=list)

    async def run(self, spec: StepSpec, *, attempt: int, note: str | None) -> StepOutcome:
        self.calls.append((spec.prompt, attempt, note))
        await asyncio.sleep(0)
        answer = self.answers[spec.prompt]
        if isinstance(answer, list):
            answer = answer.pop(0)
        return StepOutcome(answer, f"task_{len(self.calls)}")


@dataclass
class FakeJournal:
    steps: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

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
        self.steps[key] = result
        self.lines.append(f"done {name}")

    def cached(self, key: str, *, name: str, phase: str | None) -> None:
        self.lines.append(f"cached {name}")

    def phase(self, title: str) -> None:
        self.lines.append(f"phase {title}")

    def log(self, text: str) -> None:
        self.lines.append(f"log {text}")


def _ctx(
    runner: FakeRunner,
    journal: FakeJournal,
    recorded: dict[str, Any] | None = None,
    *,
    args: Any = None,
    max_steps: int = 50,
    load: Any = None,
) -> WorkflowContext:
    return WorkflowContext(
        run_id="wf_1",
        args=args,
        runner=runner,
        journal=journal,
        recorded=recorded or {},
        budget=RunBudget(max_steps),
        load=load,
        scope="t",
    )


def test_a_recorded_step_is_answered_without_the_runner() -> None:
    runner, journal = FakeRunner({"a": "A", "b": "B"}), FakeJournal()

    async def script(ctx: WorkflowContext) -> list[Any]:
        return [await ctx.agent("a"), await ctx.agent("b")]

    assert asyncio.run(script(_ctx(runner, journal))) == ["A", "B"]
    assert len(journal.steps) == 2
    # Resumed with only the first step recorded: only the second runs again.
    first = {k: v for k, v in journal.steps.items() if v == "A"}
    again = FakeRunner({"a": "never", "b": "B2"})
    journal2 = FakeJournal()
    ctx = _ctx(again, journal2, first)
    assert asyncio.run(script(ctx)) == ["A", "B2"]
    assert [c[0] for c in again.calls] == ["b"]
    assert ctx.cached == 1
    assert journal2.lines == ["cached a", "done b"]  # progress: recorded, for watch/console


def test_keys_depend_on_content_and_args_not_on_completion_order() -> None:
    base = {"scope": "t", "label": None, "prompt": "p", "schema": None, "tools": "read-only"}
    key = step_key(**base, args={"x": 1}, occurrence=0)  # type: ignore[arg-type]
    assert key == step_key(**base, args={"x": 1}, occurrence=0)  # type: ignore[arg-type]
    assert key != step_key(**base, args={"x": 2}, occurrence=0)  # type: ignore[arg-type]
    assert key != step_key(**base, args={"x": 1}, occurrence=1)  # type: ignore[arg-type]
    assert key != step_key(**{**base, "tools": "all"}, args={"x": 1}, occurrence=0)  # type: ignore[arg-type]


def test_parallel_keeps_input_order_and_pipeline_runs_every_stage() -> None:
    runner = FakeRunner({f"p{i}": f"r{i}" for i in range(4)} | {"x": "X"})

    async def script(ctx: WorkflowContext) -> Any:
        both = await ctx.parallel([ctx.agent(f"p{i}") for i in range(4)])

        async def twice(v: str) -> str:
            return v * 2

        async def upper(v: str) -> str:
            return v.upper()

        piped = await ctx.pipeline(["a", "b"], twice, upper)
        return both, piped

    both, piped = asyncio.run(script(_ctx(runner, FakeJournal())))
    assert both == ["r0", "r1", "r2", "r3"]
    assert piped == ["AA", "BB"]


def test_schema_result_is_validated_with_one_retry_then_fails() -> None:
    good = FakeRunner({"q": ["not json", json.dumps({"n": 2})]})
    assert asyncio.run(_ctx(good, FakeJournal()).agent("q", schema=SCHEMA)) == {"n": 2}
    assert good.calls[1][1] == 1 and "not JSON" in (good.calls[1][2] or "")
    bad = FakeRunner({"q": [json.dumps({"n": "x"}), json.dumps({"m": 1})]})
    with pytest.raises(WorkflowError, match=r"after one retry: .*schema"):
        asyncio.run(_ctx(bad, FakeJournal()).agent("q", schema=SCHEMA))


def test_an_invalid_schema_fails_before_any_step_runs() -> None:
    runner = FakeRunner({"q": "{}"})
    with pytest.raises(WorkflowError, match="not valid JSON Schema"):
        asyncio.run(_ctx(runner, FakeJournal()).agent("q", schema={"type": "nonsense"}))
    assert runner.calls == []


def test_the_step_cap_stops_an_unbounded_loop() -> None:
    runner, journal = FakeRunner({"again": "x"}), FakeJournal()

    async def forever(ctx: WorkflowContext) -> None:
        while True:
            await ctx.agent("again")

    with pytest.raises(WorkflowError, match=r"more than 5 agent\(\) calls.*max_workflow_steps"):
        asyncio.run(forever(_ctx(runner, journal, max_steps=5)))
    assert len(runner.calls) == 5


def test_bad_tool_sets_are_refused() -> None:
    with pytest.raises(WorkflowError, match="tools='write'"):
        asyncio.run(_ctx(FakeRunner({}), FakeJournal()).agent("q", tools="write"))


def test_nesting_goes_one_level_deep() -> None:
    async def child_run(ctx: WorkflowContext, args: Any) -> Any:
        if args == "deeper":
            return await ctx.workflow("child", "again")
        return await ctx.agent(f"child {args}")

    child = Workflow("child", "", (), Path("child.py"), "h", child_run)
    runner = FakeRunner({"child x": "C"})
    ctx = _ctx(runner, FakeJournal(), load=lambda name: child)
    assert asyncio.run(ctx.workflow("child", "x")) == "C"
    with pytest.raises(WorkflowError, match="one level"):
        asyncio.run(ctx.workflow("child", "deeper"))


def test_phase_and_log_are_recorded() -> None:
    journal = FakeJournal()
    ctx = _ctx(FakeRunner({}), journal)
    ctx.phase("audit")
    ctx.log("3 findings")
    assert journal.lines == ["phase audit", "log 3 findings"]
