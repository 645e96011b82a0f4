"""Crash-point enumeration (issue 8 item 2): a team run SIGKILLed at each named point, resumed
to completion, then the nothing-lost oracle and the board (every task completed exactly once).

The points are ``crash_point(name)`` calls in the product code, armed with
``TEAMCTL_CRASH_AT=<name>:<nth>`` (the nth passage in the process). Each case first checks that
the process died there (SIGKILL, and the state that point leaves behind), then resumes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from actors.factory import open_team
from harness.agent import Agent, AgentConfig
from harness.model.scripted import ScriptedModel
from harness.ports import Message, TextBlock, ToolResultBlock, ToolUseBlock
from harness.tools.base import Tool, ToolContext, ToolOutput
from harness.transcript import OUTCOME_UNKNOWN, Transcript, load_transcript
from mailboxes.events import MemberSpawned, draft
from teamctl_base.crashpoints import CrashPlan, parse_crash_at
from tests.actors.runtime.runtime_support import (
    Gate,
    runtime,
    stop_actors,
    stuck_tool,
    team_repo,
    tools_with,
)
from tests.support.crash_team import (
    REMINDER,
    after_crash,
    events,
    final_violations,
    run_to_completion,
    running,
    seed_team,
)
from tests.support.fakes import AllowAll

__all__ = ["stop_actors"]


def _last_roles(root: Path) -> dict[str, tuple[str, bool]]:
    """Per agent: the role of its last transcript message and whether it asks for tools."""
    out: dict[str, tuple[str, bool]] = {}
    for path in (root / ".team" / "transcripts").glob("*.jsonl"):
        messages = load_transcript(path).messages
        if messages:
            last = messages[-1]
            asks = any(isinstance(b, ToolUseBlock) for b in last.content)
            out[path.stem] = (last.role, asks)
    return out


def _projection_behind(root: Path) -> bool:
    """The journal has events the projections do not show yet (their mark is behind)."""
    text = (root / ".team" / "projections.lock").read_text().split()
    return int(text[0] if text else 0) < events(root)[-1].seq


def _tmp_left(root: Path) -> bool:
    return any(os.listdir(box / "tmp") for box in (root / ".team" / "mailboxes").iterdir())


def _reminders(root: Path) -> int:
    lead = root / ".team" / "mailboxes" / "lead"
    return sum(
        REMINDER in (lead / sub / name).read_text()
        for sub in ("new", "cur")
        for name in os.listdir(lead / sub)
    )


EVIDENCE: dict[str, Callable[[Path], bool]] = {
    "board.before_projection": _projection_behind,
    "maildir.before_rename": _tmp_left,
    "model.before_transcript": lambda root: any(
        role == "user" for role, _ in _last_roles(root).values()
    ),
    "tools.before_run": lambda root: any(
        role == "assistant" and asks for role, asks in _last_roles(root).values()
    ),
    "tools.before_results": lambda root: any(
        role == "assistant" and asks for role, asks in _last_roles(root).values()
    ),
    "worktree.after_git": lambda root: (
        (root / ".worktrees" / "wt1").is_dir()
        and not any(e.type == "worktree.created" for e in events(root))
    ),
    "cron.before_delivery": lambda root: (
        any(e.type == "cron.fired" for e in events(root)) and _reminders(root) == 0
    ),
}

# Passages per run (measured): board ~26 (usage records ride on other commits), model ~17, Maildir/tool batches ~6, worktree/cron 1.
CI_CASES = [
    "board.before_projection:1",
    "board.before_projection:12",
    "board.before_projection:25",
    "maildir.before_rename:1",
    "maildir.before_rename:4",
    "model.before_transcript:1",
    "model.before_transcript:8",
    "tools.before_run:1",
    "tools.before_run:4",
    "tools.before_results:1",
    "tools.before_results:4",
    "worktree.after_git:1",
    "cron.before_delivery:1",
]
DEEP_CASES = [
    *(f"board.before_projection:{n}" for n in range(2, 26, 3)),
    *(f"maildir.before_rename:{n}" for n in (2, 3, 5)),
    *(f"model.before_transcript:{n}" for n in range(2, 9, 2)),  # the workload makes 8 calls
    *(f"tools.before_run:{n}" for n in (2, 3, 5)),
    *(f"tools.before_results:{n}" for n in (2, 3, 5)),
]


def _crash_then_resume(tmp_path: Path, spec: str) -> None:
    root, script = seed_team(tmp_path)
    with running(root, script, crash_at=spec) as proc:
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, f"{spec} was not reached:\n{err[-2000:]}"
    point = spec.split(":")[0]
    assert EVIDENCE[point](root), f"{spec}: the state does not show a crash at that point"
    assert after_crash(root, [proc.pid]) == []
    run_to_completion(root, script)
    violations = final_violations(root, [proc.pid])
    assert violations == [], "\n".join(violations)


@pytest.mark.parametrize("spec", CI_CASES)
def test_sigkill_at_each_crash_point_then_resume_loses_nothing(tmp_path: Path, spec: str) -> None:
    _crash_then_resume(tmp_path, spec)


@pytest.mark.deep
@pytest.mark.parametrize("spec", DEEP_CASES)
def test_sigkill_at_more_passages_of_each_point(tmp_path: Path, spec: str) -> None:
    _crash_then_resume(tmp_path, spec)


def test_every_named_point_has_a_case() -> None:
    assert {spec.split(":")[0] for spec in CI_CASES} == set(EVIDENCE)


# -- the helper itself ---------------------------------------------------------------------------


def test_crash_at_parses_a_name_and_an_optional_count() -> None:
    assert parse_crash_at("") is None
    assert parse_crash_at("  ") is None
    assert parse_crash_at("maildir.before_rename") == ("maildir.before_rename", 1)
    assert parse_crash_at("board.before_projection:7") == ("board.before_projection", 7)
    for bad in (":3", "x:0", "x:-1", "x:y"):
        with pytest.raises(ValueError):
            parse_crash_at(bad)


def test_a_plan_fires_on_the_nth_passage_of_its_point_only() -> None:
    plan = CrashPlan(("a", 3))
    assert [plan.reached(n) for n in ("a", "b", "a", "b", "a", "a")] == [
        False,
        False,
        False,
        False,
        True,
        False,
    ]
    idle = CrashPlan(None)
    assert not any(idle.reached(n) for n in ("a", "b", ""))


_PROBE = """
import importlib, sys
crash_point = importlib.import_module(sys.argv[1]).crash_point
for i in range(1, 6):
    print(i, flush=True)
    crash_point("p")
"""


@pytest.mark.parametrize("module", ["teamctl_base.crashpoints"])
@pytest.mark.parametrize(("value", "last", "code"), [("p:3", 3, -9), ("p", 1, -9), ("q", 5, 0)])
def test_the_process_is_killed_at_the_selected_passage(
    module: str, value: str, last: int, code: int
) -> None:
    env = {**os.environ, "TEAMCTL_CRASH_AT": value}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, module], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == code, out.stderr
    assert out.stdout.split()[-1] == str(last)


# -- the fixes, one by one -----------------------------------------------------------------------


def test_mail_is_acked_once_the_answer_is_persisted_before_its_tools_run(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    """A crash while the tools run must not show the model that mail again (it would redo
    the work: the crash-point suite saw the backlog created twice)."""
    root = team_repo(tmp_path)
    gate = Gate()
    script = {
        "agents": {
            "lead": {
                "rules": [
                    {"match": "go", "once": True, "tool_uses": [{"name": "stuck", "input": {}}]},
                    {"match": "(?s).", "text": "done", "priority": -1},
                ]
            }
        }
    }
    rt = runtime(root, ScriptedModel(script), tools=tools_with(stuck_tool(gate)))
    stop_actors.append(rt)
    rt.start()
    rt.services.send("user", "lead", "message", {"text": "go"})
    try:
        assert gate.entered.wait(30)
        assert rt.mailbox.counts("lead") == (0, 1)  # in cur/ while the tool still runs
    finally:
        gate.release.set()
    assert rt.wait_idle(timeout=30)


def test_a_hosted_member_gets_its_inbox_back(tmp_path: Path, stop_actors: list[Any]) -> None:
    """A crash between journaling ``member.spawned`` and creating the inbox left a member that
    crashed at every restart (``UnknownRecipient``)."""
    root = team_repo(tmp_path)
    with open_team(root) as team:
        body = MemberSpawned(name="w1", role="general", prompt="Work.")
        team.board.execute(lambda _state: [draft(body.TYPE, "lead", body)])
    assert not (root / ".team" / "mailboxes" / "w1").exists()
    script = {"agents": {"*": {"rules": [{"match": "(?s).", "text": "ok"}]}}}
    rt = runtime(root, ScriptedModel(script))
    stop_actors.append(rt)
    rt.start()
    rt.services.send("lead", "w1", "message", {"text": "hello"})
    assert rt.wait_idle(timeout=30)
    assert rt.board.refresh().members["w1"].status != "crashed"
    assert rt.mailbox.counts("w1") == (0, 1)


class _EmptyInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Counter(Tool[_EmptyInput]):
    """Read-only for permissions (like the team tools) but it writes: not concurrency-safe."""

    name: ClassVar[str] = "count"
    description: ClassVar[str] = "Counts its runs."
    input_model: ClassVar[type[BaseModel]] = _EmptyInput

    def __init__(self) -> None:
        self.runs = 0

    def is_read_only(self, args: _EmptyInput) -> bool:
        return True

    def run(self, args: _EmptyInput, ctx: ToolContext) -> ToolOutput:
        self.runs += 1
        return ToolOutput(f"run {self.runs}")


def test_resume_does_not_rerun_a_call_that_only_counts_as_read_only(tmp_path: Path) -> None:
    """A team tool (read-only for permissions, writing the journal) cut short by a crash was
    re-run on resume: the crash-point suite saw tasks created twice."""
    t = Transcript.for_agent(tmp_path / ".team" / "transcripts", "lead")
    t.message(Message(role="user", content=(TextBlock(text="go"),)))
    calls = (
        ToolUseBlock(id="c", name="count", input={}),
        ToolUseBlock(id="r", name="read_file", input={"path": "f.txt"}),
    )
    t.message(Message(role="assistant", content=calls))
    t.close()
    (tmp_path / "f.txt").write_text("text of f\n")
    counter = _Counter()
    agent = Agent(
        AgentConfig(name="lead", model="m"),
        root=tmp_path,
        model=ScriptedModel({"agents": {"lead": {"rules": []}}}),
        policy=AllowAll(),
        transcript_dir=tmp_path / ".team" / "transcripts",
        extra_tools=[counter],
        resume=True,
    )
    counted, read = agent.messages[-1].content
    assert counter.runs == 0
    assert isinstance(counted, ToolResultBlock) and counted.content == OUTCOME_UNKNOWN
    assert isinstance(read, ToolResultBlock) and "text of f" in read.content  # re-run
