"""Runtime overhead per step of one agent: everything except the model.

A real ``Agent`` (registry, executor, ``HarnessPolicy`` with default rules and a PreToolUse hook,
system prompt with skills/memory/team-state sections, compaction checks, transcript with fsync per
line) runs steps against a zero-latency scripted model whose every reply calls a no-op read-only
tool. Per step we time ``step()`` and subtract the time spent inside ``model.complete``, so the
figure covers context assembly, the pairing check, the tool pipeline, hooks and the transcript
write. Prints one JSON object; exits 1 when a figure misses its target.

    python -m benchmarks.bench_loop [--steps 300] [--quick]
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from benchmarks.common import at_most, finish, parser, scratch, shown
from harness.agent import Agent, AgentConfig
from harness.hooks import HookResult, HookRunner
from harness.model.scripted import ScriptedModel
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ModelRequest, ModelResponse
from harness.tools.base import Tool, ToolContext, ToolOutput

TARGET_MS = 5.0


class NoopInput(BaseModel):
    n: int = 0


class NoopTool(Tool[NoopInput]):
    name = "noop"
    description = "Does nothing."
    input_model = NoopInput

    def is_read_only(self, args: NoopInput) -> bool:
        return True

    def is_concurrency_safe(self, args: NoopInput) -> bool:
        return True

    def run(self, args: NoopInput, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(f"ok {args.n}")


class TimedModel:
    """Wraps a model and accumulates the time spent inside it."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.spent = 0.0

    def complete(self, request: ModelRequest) -> ModelResponse:
        t0 = time.perf_counter()
        try:
            return self.inner.complete(request)
        finally:
            self.spent += time.perf_counter() - t0


def run(steps: int, root: Path) -> list[float]:
    script = {
        "agents": {
            "bench": {
                "rules": [
                    {
                        "match": "(?s).*",
                        "text": "working",
                        "tool_uses": [{"name": "noop", "input": {"n": 1}}],
                    }
                ]
            }
        }
    }
    model = TimedModel(ScriptedModel(script))
    hooks = HookRunner(session_id="bench")

    def pre_tool(event: Any, payload: Any) -> HookResult | None:
        return None

    hooks.register("PreToolUse", pre_tool)
    policy = HarnessPolicy(Permissions(allow=["noop"]), hooks, None, "default")
    (root / ".team" / "skills" / "demo").mkdir(parents=True)
    (root / ".team" / "skills" / "demo" / "SKILL.md").write_text(
        "---\nname: demo\ndescription: A demo skill.\n---\nbody\n"
    )
    agent = Agent(
        AgentConfig(name="bench", model="bench-model"),
        root=root,
        model=model,
        policy=policy,
        transcript_dir=root / ".team" / "transcripts",
        extra_tools=[NoopTool()],
        hook_runner=hooks,
        state_provider=lambda: "alice: working on #3\nbob: idle",
        session_id="bench",
    )
    agent.begin_turn("start the benchmark")
    out: list[float] = []
    for _ in range(steps):
        before = model.spent
        t0 = time.perf_counter()
        result = agent.step()
        total = time.perf_counter() - t0
        out.append((total - (model.spent - before)) * 1000.0)
        assert result.transition == "tool_use", result
    agent.close()
    return out


def main(argv: list[str] | None = None) -> None:
    cmd = parser(__doc__)
    cmd.add_argument("--steps", type=int, default=300)
    args = cmd.parse_args(argv)
    if args.quick:
        args.steps = 60
    with scratch("loop") as tmp:
        samples = run(args.steps, tmp)
    late = statistics.median(samples[-50:])  # chronological: the longest histories
    samples.sort()
    p50 = statistics.median(samples)
    p90 = samples[int(len(samples) * 0.9) - 1]
    p99 = samples[int(len(samples) * 0.99) - 1]
    figures = [
        at_most("step_overhead_p50", p50, "ms", TARGET_MS),
        shown("step_overhead_p90", p90, "ms"),
        shown("step_overhead_p99", p99, "ms"),
        at_most("step_overhead_p50_last_50_steps", late, "ms", TARGET_MS),
    ]
    finish("loop", figures, quick=args.quick, steps=args.steps)


if __name__ == "__main__":
    main()
