"""Checking a finished scenario run: every expectation becomes one ``Check``
(docs/ARCHITECTURE.md, "Scenarios"; docs/RELIABILITY.md, "How the evidence is produced").

Everything is read after the runtime stopped: the journal (events, order, claims), the task board
folded from it, the mailboxes (``new`` and ``cur``), the agents' transcripts, the files of the
repository (working tree or a branch) and commands run in it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.scenarios.facts import Facts, gather
from actors.scenarios.invariants import INVARIANTS
from actors.scenarios.model import (
    CommandExpect,
    EventExpect,
    EventMatch,
    FileExpect,
    MessageExpect,
    OrderExpect,
    Scenario,
    TaskExpect,
    WorkflowExpect,
)

__all__ = ["Check", "RunOutcome", "check_all"]


@dataclass(frozen=True)
class Check:
    """One checked expectation."""

    name: str
    ok: bool
    detail: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class RunOutcome:
    """What the run produced, for the checker."""

    root: Path
    idle: bool
    seconds: float
    events: list[dict[str, Any]] = field(default_factory=list)
    """Runtime events (``on_event``), in emission order."""
    unconsumed: dict[str, list[str]] = field(default_factory=dict)
    """Scripted steps never played, per agent."""
    script_errors: list[str] = field(default_factory=list)
    """Script mismatches reported by the fake Messages API."""
    workflow: dict[str, Any] | None = None
    """The workflow run's outcome (``run_id``, ``status``, ``result``, ``error``, ``cached``) of
    a ``workflow`` scenario."""


def _describe(match: EventMatch) -> str:
    parts = [match.type]
    if match.task:
        parts.append(f"task={match.task}")
    if match.actor:
        parts.append(f"actor={match.actor}")
    parts += [f"{k}={v}" for k, v in match.data.items()]
    return " ".join(parts)


# --- expectations --------------------------------------------------------------------------------


def _task(facts: Facts, want: TaskExpect) -> Check:
    name = f"task {want.id or want.subject!r}"
    tid = facts.task_id(want.id or want.subject or "")
    if tid is None:
        return Check(name, False, "no such task (or the subject names several)")
    task = facts.state.tasks[tid]
    wrong = []
    if want.status is not None and task.status != want.status:
        wrong.append(f"status {task.status} (expected {want.status})")
    if want.owner is not None and task.owner != want.owner:
        wrong.append(f"owner {task.owner} (expected {want.owner})")
    shown = f"{tid} {task.status}" + (f" by {task.owner}" if task.owner else "")
    return Check(name, not wrong, "; ".join(wrong) or shown)


def _file(facts: Facts, want: FileExpect) -> Check:
    name = f"file {want.path}" + (f" on {want.branch}" if want.branch else "")
    text = facts.read_file(want.path, want.branch)
    if want.absent:
        return Check(name + " absent", text is None, "exists" if text is not None else "")
    if text is None:
        return Check(name, False, "missing")
    wrong = [f"lacks {s!r}" for s in want.contains if s not in text]
    wrong += [f"still contains {s!r}" for s in want.lacks if s in text]
    if want.matches is not None and re.search(want.matches, text) is None:
        wrong.append(f"does not match /{want.matches}/")
    if want.equals is not None and text != want.equals:
        wrong.append(f"differs from the expected content ({len(text)} vs {len(want.equals)} chars)")
    return Check(name, not wrong, "; ".join(wrong) or f"{len(text)} chars")


def _event(facts: Facts, want: EventExpect) -> Check:
    name = f"event {_describe(want)}"
    found = facts.select(want)
    if isinstance(found, str):
        return Check(name, False, found)
    if want.count is not None:
        return Check(name, len(found) == want.count, f"{len(found)} (expected {want.count})")
    return Check(name, bool(found), f"{len(found)} found" if found else "never journaled")


def _message(facts: Facts, want: MessageExpect) -> Check:
    name = f"message to {want.to}" + (f" {want.type}" if want.type else "")
    name += f" from {want.sender}" if want.sender else ""
    name += f" containing {want.contains!r}" if want.contains else ""
    found = [
        m
        for m in facts.messages
        if m.to == want.to
        and (want.type is None or m.type == want.type)
        and (want.sender is None or m.sender == want.sender)
        and (want.contains is None or want.contains in m.text)
    ]
    if want.count is not None:
        return Check(name, len(found) == want.count, f"{len(found)} (expected {want.count})")
    return Check(name, bool(found), f"{len(found)} found" if found else "never delivered")


def _order(facts: Facts, want: OrderExpect) -> Check:
    name = f"order: {_describe(want.before)} before {_describe(want.after)}"
    first, then = facts.select(want.before), facts.select(want.after)
    if isinstance(first, str) or isinstance(then, str):
        return Check(name, False, first if isinstance(first, str) else str(then))
    if not first or not then:
        missing = "the first" if not first else "the second"
        return Check(name, False, f"{missing} never happened")
    last, earliest = max(e.seq for e in first), min(e.seq for e in then)
    return Check(name, last < earliest, f"seq {last} vs {earliest}")


def _command(facts: Facts, want: CommandExpect) -> Check:
    name = f"command {want.run!r}"
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    try:
        done = subprocess.run(
            want.run,
            shell=True,
            cwd=facts.root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=want.timeout_s,
        )
    except subprocess.TimeoutExpired:
        return Check(name, False, f"timed out after {want.timeout_s:g}s")
    output = (done.stdout + done.stderr).strip()
    lines = output.splitlines()
    tail = lines[-1] if lines else ""
    wrong = []
    if done.returncode != want.exit_code:
        wrong.append(f"exit {done.returncode} (expected {want.exit_code})")
    if want.output_contains is not None and want.output_contains not in output:
        wrong.append(f"output lacks {want.output_contains!r}")
    return Check(name, not wrong, "; ".join([*wrong, tail]) if wrong else tail)


def _workflow(outcome: RunOutcome, want: WorkflowExpect) -> list[Check]:
    got = outcome.workflow or {}
    status = got.get("status")
    checks = [
        Check(
            f"workflow {want.status}",
            status == want.status,
            f"run {got.get('run_id')} {status}"
            + (f": {got['error']}" if got.get("error") and status != want.status else ""),
        )
    ]
    if want.result is not None:
        result = got.get("result")
        same = result == want.result
        shown = json.dumps(result, ensure_ascii=False, sort_keys=True)
        checks.append(
            Check("workflow result", same, "as expected" if same else f"got {shown}"[:800])
        )
    if want.error_contains is not None:
        error = str(got.get("error") or "")
        checks.append(
            Check(
                f"workflow error containing {want.error_contains!r}",
                want.error_contains in error,
                error[:300],
            )
        )
    return checks


def _run_checks(scenario: Scenario, outcome: RunOutcome) -> list[Check]:
    checks = [
        Check(
            "team went idle",
            outcome.idle,
            f"in {outcome.seconds:.2f}s" if outcome.idle else f"not within {scenario.timeout_s:g}s",
        )
    ]
    errors = [f"{e.get('agent')}: {e.get('error')}" for e in outcome.events if e["type"] == "error"]
    errors += outcome.script_errors
    checks.append(Check("no agent errors", not errors, " | ".join(errors)[:800]))
    allowed = scenario.expect.tool_errors
    if allowed is not None:
        failed = [
            f"{e.get('agent')}: {str(e.get('content', ''))[:200]}"
            for e in outcome.events
            if e["type"] == "tool_result" and e.get("is_error")
        ]
        detail = f"{len(failed)} (expected {allowed})" + "".join(f" | {f}" for f in failed)
        checks.append(Check("failed tool calls", len(failed) == allowed, detail[:800]))
    left = [f"{a}: {s}" for a, steps in outcome.unconsumed.items() for s in steps]
    checks.append(Check("script fully played", not left, " | ".join(left)[:800]))
    return checks


def check_all(scenario: Scenario, outcome: RunOutcome) -> list[Check]:
    """Every check of ``scenario.expect`` against the run, in file order."""
    checks = _run_checks(scenario, outcome)
    facts = gather(outcome.root)
    want = scenario.expect
    if want.task_count is not None:
        n = len(facts.state.tasks)
        checks.append(
            Check("task count", n == want.task_count, f"{n} (expected {want.task_count})")
        )
    if want.all_tasks is not None:
        off = [
            f"{t.id} {t.status}" for t in facts.state.tasks.values() if t.status != want.all_tasks
        ]
        checks.append(Check(f"all tasks {want.all_tasks}", not off, ", ".join(off)))
    checks += [_task(facts, t) for t in want.tasks]
    checks += [_file(facts, f) for f in want.files]
    checks += [_event(facts, e) for e in want.events]
    checks += [_message(facts, m) for m in want.messages]
    checks += [_order(facts, o) for o in want.order]
    for name in want.invariants:
        problems = INVARIANTS[name](facts)
        checks.append(Check(f"invariant {name}", not problems, "; ".join(problems)[:800]))
    checks += [_command(facts, c) for c in want.commands]
    if want.workflow is not None:
        checks += _workflow(outcome, want.workflow)
    return checks
