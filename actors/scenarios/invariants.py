"""Named invariants of a scenario run, each ``(facts) -> problems`` (empty: it holds)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from actors.scenarios.facts import Facts

__all__ = ["INVARIANTS", "WRITE_TOOLS"]

WRITE_TOOLS = frozenset({"write_file", "edit_file"})
"""Tools that change files (a plan-gated teammate must not succeed with one before approval)."""
_APPROVED = re.compile(r"Your plan for \S+ was approved")


def single_claim_per_epoch(facts: Facts) -> list[str]:
    """No (task, epoch) claimed twice; no task completed twice."""
    problems = []
    claims: set[tuple[Any, Any]] = set()
    done: set[Any] = set()
    for e in facts.events:
        key = (e.data.get("task_id"), e.data.get("epoch"))
        if e.type == "task.claimed":
            if key in claims:
                problems.append(f"{key[0]} claimed twice in epoch {key[1]} (seq {e.seq})")
            claims.add(key)
        elif e.type == "task.completed":
            if key[0] in done:
                problems.append(f"{key[0]} completed twice (seq {e.seq})")
            done.add(key[0])
    return problems


def claims_respect_dependencies(facts: Facts) -> list[str]:
    """Every claim comes after the completion of each task it is blocked by."""
    completed: dict[Any, int] = {}
    problems = []
    for e in facts.events:
        if e.type == "task.completed":
            completed.setdefault(e.data.get("task_id"), e.seq)
        elif e.type == "task.claimed":
            task = facts.state.tasks.get(str(e.data.get("task_id")))
            for dep in task.blocked_by if task else ():
                if dep not in completed:
                    problems.append(f"{task.id if task else '?'} claimed before {dep} completed")
    return problems


def _gated(facts: Facts) -> set[str]:
    members = {n for n, m in facts.state.members.items() if m.plan_required}
    for e in facts.events:
        if e.type in ("plan.requested", "plan.submitted"):
            members.add(str(e.data.get("owner") or e.data.get("teammate") or e.actor))
    for task in facts.state.tasks.values():
        if task.plan.required and task.owner:
            members.add(task.owner)
    return members


def no_write_before_plan_approval(facts: Facts) -> list[str]:
    """A plan-gated teammate (spawned with plan_required, or holding a task that needs a plan)
    changes no file before its approval arrives (transcript order), and every plan-gated task
    that was completed had an approved plan journaled before."""
    from harness.ports import TextBlock, ToolResultBlock, ToolUseBlock

    problems = []
    for agent in sorted(_gated(facts)):
        approved = False
        writes: dict[str, str] = {}
        for message in facts.transcripts.get(agent, []):
            for block in message.content:
                if isinstance(block, ToolUseBlock) and block.name in WRITE_TOOLS and not approved:
                    writes[block.id] = block.name
                elif isinstance(block, ToolResultBlock) and block.tool_use_id in writes:
                    if not block.is_error:
                        path = block.content.split("\n", 1)[0]
                        problems.append(f"{agent} wrote before approval: {path}")
                elif isinstance(block, TextBlock) and message.role == "user":
                    approved = approved or _APPROVED.search(block.text) is not None
    approvals: dict[Any, int] = {}
    for e in facts.events:
        if e.type == "plan.reviewed" and e.data.get("approve"):
            approvals.setdefault(e.data.get("task_id"), e.seq)
        elif e.type == "task.completed":
            task = facts.state.tasks.get(str(e.data.get("task_id")))
            gated = task is not None and (task.plan.required or task.owner in _gated(facts))
            if gated and e.data.get("task_id") not in approvals:
                problems.append(f"{e.data.get('task_id')} completed without an approved plan")
    return problems


def nothing_lost(facts: Facts) -> list[str]:
    """The nothing-lost oracle after the run (see ``actors.scenarios.facts``)."""
    return facts.lost


INVARIANTS: dict[str, Callable[[Facts], list[str]]] = {
    "single_claim_per_epoch": single_claim_per_epoch,
    "claims_respect_dependencies": claims_respect_dependencies,
    "no_write_before_plan_approval": no_write_before_plan_approval,
    "nothing_lost": nothing_lost,
}
