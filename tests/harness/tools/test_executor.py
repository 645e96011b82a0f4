"""The tool pipeline: order, pairing, parallelism, failures, policy and plan mode, spill."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from harness.ports import ToolUseBlock
from harness.tools.base import (
    PermissionRequest,
    PolicyVerdict,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)
from harness.tools.executor import ToolExecutor
from harness.tools.registry import DuplicateToolError, ToolRegistry

# --- fakes -------------------------------------------------------------------------------------


@dataclass
class Recorder:
    events: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, event: str) -> None:
        with self.lock:
            self.events.append(event)


class RecordingPolicy:
    """Allows everything; records what it saw."""

    def __init__(self, rec: Recorder | None = None, extra: str | None = None) -> None:
        self.rec = rec or Recorder()
        self.extra = extra
        self.requests: list[PermissionRequest] = []
        self.after_calls: list[tuple[ToolUseBlock, ToolOutput]] = []

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        self.rec.add(f"before:{call.id}")
        self.requests.append(request)
        return PolicyVerdict("allow")

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        self.rec.add(f"after:{call.id}")
        self.after_calls.append((call, output))
        return self.extra


class DenyByName(RecordingPolicy):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        super().before(call, request, ctx)
        if call.name == self.name:
            return PolicyVerdict("deny", reason=f"{self.name} is not allowed here")
        return PolicyVerdict("allow")


class Rewrite(RecordingPolicy):
    def __init__(self, new_input: dict[str, Any], context: str | None = None) -> None:
        super().__init__()
        self.new_input = new_input
        self.context = context

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        super().before(call, request, ctx)
        return PolicyVerdict("allow", updated_input=self.new_input, additional_context=self.context)


class Raising(RecordingPolicy):
    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        if self.where == "before":
            raise RuntimeError("hook crashed")
        return super().before(call, request, ctx)

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        if self.where == "after":
            raise RuntimeError("post hook crashed")
        return super().after(call, output, ctx)


class TextIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""
    n: int = 0


class Echo(Tool[TextIn]):
    """Writes nothing; echoes its text. Read-only and concurrency-safe when ``parallel``."""

    name = "echo"
    description = "echo"
    input_model = TextIn

    def __init__(self, rec: Recorder, name: str = "echo", parallel: bool = True) -> None:
        self.rec = rec
        self.name = name  # type: ignore[misc]
        self.parallel = parallel
        self.seen: list[TextIn] = []

    def is_read_only(self, args: TextIn) -> bool:
        return self.parallel

    def is_concurrency_safe(self, args: TextIn) -> bool:
        return self.parallel

    def run(self, args: TextIn, ctx: ToolContext) -> ToolOutput:
        self.rec.add(f"run:{self.name}:{args.text}")
        self.seen.append(args)
        return ToolOutput(args.text)


class BarrierTool(Tool[TextIn]):
    """Passes only if another call reaches the barrier at the same time."""

    description = "barrier"
    input_model = TextIn

    def __init__(self, name: str, barrier: threading.Barrier, safe: bool = True) -> None:
        self.name = name  # type: ignore[misc]
        self.barrier = barrier
        self.safe = safe

    def is_read_only(self, args: TextIn) -> bool:
        return True

    def is_concurrency_safe(self, args: TextIn) -> bool:
        return self.safe

    def run(self, args: TextIn, ctx: ToolContext) -> ToolOutput:
        self.barrier.wait()
        return ToolOutput(f"{self.name} passed")


class Boom(Tool[TextIn]):
    name = "boom"
    description = "raises what its text names"
    input_model = TextIn

    def is_read_only(self, args: TextIn) -> bool:
        return True

    def is_concurrency_safe(self, args: TextIn) -> bool:
        return True

    def run(self, args: TextIn, ctx: ToolContext) -> ToolOutput:
        errors: dict[str, BaseException] = {
            "value": ValueError("bad value"),
            "tool": ToolError("clean message"),
            "exit": SystemExit(3),
            "interrupt": KeyboardInterrupt(),
        }
        raise errors[args.text]


def ctx_for(tmp_path: Path, **kw: Any) -> ToolContext:
    return ToolContext(agent="a", root=tmp_path, cwd=tmp_path, outputs_dir=tmp_path / "out", **kw)


def use(id: str, name: str, **input: Any) -> ToolUseBlock:
    return ToolUseBlock(id=id, name=name, input=input)


# --- registry ----------------------------------------------------------------------------------


def test_registry_sorted_specs_and_no_duplicates() -> None:
    rec = Recorder()
    reg = ToolRegistry([Echo(rec, "zeta"), Echo(rec, "alpha"), Echo(rec, "mid")])
    assert reg.names() == ["alpha", "mid", "zeta"]
    assert [s.name for s in reg.specs()] == ["alpha", "mid", "zeta"]
    assert reg.specs()[0].input_schema["properties"]["text"]["type"] == "string"
    assert "mid" in reg and reg.get("nope") is None and len(reg) == 3
    with pytest.raises(DuplicateToolError):
        reg.add(Echo(rec, "mid"))


# --- pipeline ----------------------------------------------------------------------------------


def test_pipeline_order_and_context(tmp_path: Path) -> None:
    rec = Recorder()
    policy = RecordingPolicy(rec, extra="post-hook says hi")
    ex = ToolExecutor(ToolRegistry([Echo(rec, parallel=False)]), policy)
    [result] = ex.run_batch([use("t1", "echo", text="out")], ctx_for(tmp_path))
    assert rec.events == ["before:t1", "run:echo:out", "after:t1"]
    assert result.tool_use_id == "t1" and not result.is_error
    assert result.content == "out\n\npost-hook says hi"
    assert policy.after_calls[0][1] == ToolOutput("out")


def test_results_pair_with_calls_in_request_order(tmp_path: Path) -> None:
    rec = Recorder()
    reg = ToolRegistry([Echo(rec), Echo(rec, "writer", parallel=False), Boom()])
    ex = ToolExecutor(reg, DenyByName("writer"))
    calls = [
        use("a", "echo", text="1"),
        use("b", "missing"),
        use("c", "echo", n="not a number"),
        use("d", "writer", text="w"),
        use("e", "boom", text="value"),
        use("f", "echo", text="2"),
    ]
    results = ex.run_batch(calls, ctx_for(tmp_path))
    assert [r.tool_use_id for r in results] == ["a", "b", "c", "d", "e", "f"]
    assert [r.is_error for r in results] == [False, True, True, True, True, False]
    assert [r.content for r in (results[0], results[5])] == ["1", "2"]


def test_unknown_tool_names_the_available_ones(tmp_path: Path) -> None:
    rec = Recorder()
    ex = ToolExecutor(ToolRegistry([Echo(rec), Echo(rec, "other")]), RecordingPolicy())
    [r] = ex.run_batch([use("x", "ech")], ctx_for(tmp_path))
    assert r.is_error
    assert "Unknown tool 'ech'" in r.content and "echo, other" in r.content


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({"n": "many"}, "n: Input should be a valid integer"),
        ({"text": 5}, "text: Input should be a valid string"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
    ],
)
def test_schema_violation_is_a_readable_error(
    tmp_path: Path, bad: dict[str, Any], words: str
) -> None:
    rec = Recorder()
    policy = RecordingPolicy(rec)
    ex = ToolExecutor(ToolRegistry([Echo(rec)]), policy)
    [r] = ex.run_batch([use("x", "echo", **bad)], ctx_for(tmp_path))
    assert r.is_error
    assert "Invalid input for tool 'echo'" in r.content and words in r.content
    assert rec.events == []  # neither the policy nor the tool saw it


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("value", "Tool boom failed: ValueError: bad value"),
        ("tool", "clean message"),
        ("exit", "Tool boom failed: SystemExit: 3"),
        ("interrupt", "Tool boom failed: KeyboardInterrupt"),
    ],
)
def test_a_raising_tool_becomes_an_error_result(tmp_path: Path, kind: str, expected: str) -> None:
    ex = ToolExecutor(ToolRegistry([Boom()]), RecordingPolicy())
    # twice in one batch: the pair runs on the thread pool; alone, on the calling thread
    for calls in ([use("1", "boom", text=kind)], [use("1", "boom", text=kind)] * 2):
        results = ex.run_batch(calls, ctx_for(tmp_path))
        assert [r.content for r in results] == [expected] * len(calls)
        assert all(r.is_error for r in results)


def test_failing_tool_still_reaches_post_hook(tmp_path: Path) -> None:
    policy = RecordingPolicy()
    ex = ToolExecutor(ToolRegistry([Boom()]), policy)
    ex.run_batch([use("1", "boom", text="value")], ctx_for(tmp_path))
    [(_, output)] = policy.after_calls
    assert output.is_error


# --- parallelism -------------------------------------------------------------------------------


def test_read_only_concurrency_safe_calls_run_in_parallel(tmp_path: Path) -> None:
    barrier = threading.Barrier(2, timeout=10)
    reg = ToolRegistry([BarrierTool("left", barrier), BarrierTool("right", barrier)])
    ex = ToolExecutor(reg, RecordingPolicy())
    results = ex.run_batch([use("1", "left"), use("2", "right")], ctx_for(tmp_path))
    assert [(r.tool_use_id, r.content, r.is_error) for r in results] == [
        ("1", "left passed", False),
        ("2", "right passed", False),
    ]


def test_unsafe_calls_run_alone(tmp_path: Path) -> None:
    barrier = threading.Barrier(2, timeout=0.3)
    reg = ToolRegistry([BarrierTool("left", barrier, safe=False), BarrierTool("right", barrier)])
    ex = ToolExecutor(reg, RecordingPolicy())
    results = ex.run_batch([use("1", "left"), use("2", "right")], ctx_for(tmp_path))
    assert all(r.is_error and "BrokenBarrierError" in r.content for r in results)


class WaitFor(Tool[TextIn]):
    """``wait`` blocks until ``release`` has run: the first call finishes last."""

    description = "ordering"
    input_model = TextIn

    def __init__(self, name: str, event: threading.Event) -> None:
        self.name = name  # type: ignore[misc]
        self.event = event

    def is_read_only(self, args: TextIn) -> bool:
        return True

    def is_concurrency_safe(self, args: TextIn) -> bool:
        return True

    def run(self, args: TextIn, ctx: ToolContext) -> ToolOutput:
        if self.name == "wait":
            if not self.event.wait(10):
                raise ToolError("never released")
        else:
            self.event.set()
        return ToolOutput(self.name)


def test_parallel_results_keep_request_order(tmp_path: Path) -> None:
    event = threading.Event()
    reg = ToolRegistry([WaitFor("wait", event), WaitFor("release", event)])
    ex = ToolExecutor(reg, RecordingPolicy())
    results = ex.run_batch([use("1", "wait"), use("2", "release")], ctx_for(tmp_path))
    assert [(r.tool_use_id, r.content) for r in results] == [("1", "wait"), ("2", "release")]


def test_a_writing_call_splits_the_parallel_groups(tmp_path: Path) -> None:
    rec = Recorder()
    reg = ToolRegistry([Echo(rec, "r"), Echo(rec, "w", parallel=False)])
    ex = ToolExecutor(reg, RecordingPolicy(rec), max_workers=4)
    calls = [use("1", "r", text="a"), use("2", "r", text="b"), use("3", "w"), use("4", "r")]
    ex.run_batch(calls, ctx_for(tmp_path))
    ev = rec.events
    first_group = [ev.index("after:1"), ev.index("after:2")]
    assert max(first_group) < ev.index("before:3") < ev.index("after:3") < ev.index("before:4")


# --- policy and plan mode ----------------------------------------------------------------------


def test_policy_deny_returns_the_reason_and_skips_the_tool(tmp_path: Path) -> None:
    rec = Recorder()
    ex = ToolExecutor(ToolRegistry([Echo(rec)]), DenyByName("echo"))
    [r] = ex.run_batch([use("1", "echo", text="x")], ctx_for(tmp_path))
    assert r.is_error and r.content == "Permission denied for echo: echo is not allowed here"
    assert rec.events == []


def test_policy_updated_input_is_validated_and_used(tmp_path: Path) -> None:
    rec = Recorder()
    tool = Echo(rec)
    policy = Rewrite({"text": "rewritten"}, context="hook note")
    ex = ToolExecutor(ToolRegistry([tool]), policy)
    [r] = ex.run_batch([use("1", "echo", text="original")], ctx_for(tmp_path))
    assert r.content == "rewritten\n\nhook note" and not r.is_error
    assert tool.seen == [TextIn(text="rewritten")]
    assert policy.after_calls[0][0].input == {"text": "rewritten"}


def test_policy_updated_input_that_is_invalid_is_refused(tmp_path: Path) -> None:
    rec = Recorder()
    tool = Echo(rec)
    ex = ToolExecutor(ToolRegistry([tool]), Rewrite({"n": "NaN"}))
    [r] = ex.run_batch([use("1", "echo", text="original")], ctx_for(tmp_path))
    assert r.is_error and "rewrote the input into an invalid one" in r.content
    assert tool.seen == []


def test_a_crashing_policy_fails_closed(tmp_path: Path) -> None:
    rec = Recorder()
    tool = Echo(rec)
    ex = ToolExecutor(ToolRegistry([tool]), Raising("before"))
    [r] = ex.run_batch([use("1", "echo", text="x")], ctx_for(tmp_path))
    assert r.is_error and "Permission check failed" in r.content and "hook crashed" in r.content
    assert tool.seen == []


def test_a_crashing_post_hook_keeps_the_result(tmp_path: Path) -> None:
    ex = ToolExecutor(ToolRegistry([Echo(Recorder())]), Raising("after"))
    [r] = ex.run_batch([use("1", "echo", text="kept")], ctx_for(tmp_path))
    assert not r.is_error
    assert r.content.startswith("kept") and "post hook crashed" in r.content


def test_plan_mode_refuses_non_read_only_tools(tmp_path: Path) -> None:
    rec = Recorder()
    reg = ToolRegistry([Echo(rec, "reader"), Echo(rec, "writer", parallel=False)])
    policy = RecordingPolicy(rec)
    ex = ToolExecutor(reg, policy)
    ctx = ctx_for(tmp_path, read_only=True)
    results = ex.run_batch([use("1", "writer", text="w"), use("2", "reader", text="r")], ctx)
    assert results[0].is_error and "not available in plan mode" in results[0].content
    assert not results[1].is_error and results[1].content == "r"
    assert rec.events == ["before:2", "run:reader:r", "after:2"]


# --- output cap --------------------------------------------------------------------------------


def test_oversize_output_is_spilled_with_head_and_tail(tmp_path: Path) -> None:
    text = "HEAD" + "x" * 100_000 + "TAIL"
    ex = ToolExecutor(ToolRegistry([Echo(Recorder())]), RecordingPolicy(), max_output_chars=1000)
    [r] = ex.run_batch([use("1", "echo", text=text)], ctx_for(tmp_path))
    spilled = tmp_path / "out" / hashlib.sha256(text.encode()).hexdigest()
    assert spilled.read_text() == text
    [notice] = [line for line in r.content.splitlines() if "omitted" in line]
    assert len(r.content) == 1000 + len(notice) + 2  # head + tail fill the cap, plus the notice
    assert r.content.startswith("HEAD") and r.content.endswith("TAIL")
    assert f"full output saved to {spilled}" in notice


def test_oversize_output_without_outputs_dir_is_truncated(tmp_path: Path) -> None:
    ex = ToolExecutor(ToolRegistry([Echo(Recorder())]), RecordingPolicy(), max_output_chars=100)
    ctx = ToolContext(agent="a", root=tmp_path, cwd=tmp_path)
    [r] = ex.run_batch([use("1", "echo", text="y" * 5000)], ctx)
    assert len(r.content) < 200 and "full output not saved" in r.content
