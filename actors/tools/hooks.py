"""Team hook events: ``TaskCreated``, ``TaskCompleted`` and ``TeammateIdle``
(docs/ARCHITECTURE.md, "Add a hook event" and "Hooks").

They run through the harness ``HookRunner`` like every other hook, with the common fields of the
agent that fires them (``session_id``, ``transcript_path``, ``cwd``: the ``HookSession`` of the
tool context) and the fields of Claude Code's hooks reference (``task_id``, ``task_subject``,
``task_description``, ``teammate_name``). Exit 2 (or a ``decision: "block"``) refuses, with the
hook's stderr (the reason) as the message. ``TaskCreated`` runs before the task is journaled (a
refusal leaves no trace; ``continue: false`` is ignored, as in Claude Code; the task has no id
yet, so ``task_id`` is absent); ``TaskCompleted`` before the completion is journaled (the
refusal's reason goes back to the teammate as feedback; ``continue: false`` also ends its turn);
``TeammateIdle`` when a teammate ends a turn (a refusal keeps it working, with the feedback as its
next input). Every payload also names the agent (``agent_name``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.hooks import HookOutcome, HookRunner, HookSession, session_for

if TYPE_CHECKING:
    from actors.board.state import Task
    from actors.settings import Settings
    from harness.tools.base import ToolContext

__all__ = [
    "hook_runner_for",
    "run_task_completed_hook",
    "run_task_created_hook",
    "run_teammate_idle_hook",
]

log = logging.getLogger(__name__)


def hook_runner_for(settings: Settings, *, session_id: str = "") -> HookRunner:
    """A ``HookRunner`` over the ``hooks`` section of the team settings."""
    from harness.settings import HookSettings

    raw = settings.to_json().get("hooks") or {}
    return HookRunner(settings=HookSettings.parse(raw), session_id=session_id)


def _run(
    runner: HookRunner | None,
    event: Any,
    data: dict[str, Any],
    ctx: ToolContext | None,
    *,
    stops: bool = False,
) -> str | None:
    """Run ``event``'s hooks; the refusal reason, or ``None`` to proceed. With ``stops``, a
    ``continue: false`` refuses too and ends the agent's turn."""
    if runner is None or not runner.has_hooks(event):
        return None
    session = session_for(ctx) if ctx is not None else None
    outcome: HookOutcome = runner.run(event, data, session=session)
    if stops and outcome.stop:
        why = outcome.stop_reason or f"a {event} hook stopped you"
        if session is not None and session.stop is not None:
            session.stop(f"A {event} hook stopped the agent: {why}")
        return why
    if outcome.blocked:
        return outcome.reason or f"refused by a {event} hook"
    return None


def _base(agent: str, cwd: Path | None, ctx: ToolContext | None) -> dict[str, Any]:
    where = cwd or (ctx.cwd if ctx is not None else None)
    return {"agent_name": agent, "cwd": str(where or os.getcwd())}


def run_task_created_hook(
    runner: HookRunner | None,
    agent: str,
    *,
    subject: str,
    description: str,
    blocked_by: Sequence[str] = (),
    role: str | None = None,
    cwd: Path | None = None,
    ctx: ToolContext | None = None,
) -> str | None:
    """``TaskCreated`` before the task is journaled: the refusal reason, or ``None``."""
    data = _base(agent, cwd, ctx) | {
        "teammate_name": agent,
        "task_subject": subject,
        "task_description": description,
        "blocked_by": list(blocked_by),
        "role": role,
    }
    return _run(runner, "TaskCreated", data, ctx)


def run_task_completed_hook(
    runner: HookRunner | None,
    agent: str,
    task: Task,
    summary: str,
    *,
    cwd: Path | None = None,
    ctx: ToolContext | None = None,
) -> str | None:
    """``TaskCompleted`` before the completion is journaled: feedback, or ``None``."""
    data = _base(agent, cwd, ctx) | {
        "teammate_name": agent,
        "task_id": task.id,
        "task_subject": task.subject,
        "task_description": task.description,
        "summary": summary,
    }
    return _run(runner, "TaskCompleted", data, ctx, stops=True)


def run_teammate_idle_hook(
    hook_runner: HookRunner | None,
    agent: str,
    task: Task | None,
    final_text: str,
    *,
    cwd: Path | None = None,
    session: HookSession | None = None,
) -> str | None:
    """``TeammateIdle`` when ``agent`` ends a turn: feedback to keep it working, or ``None``
    (a ``continue: false`` lets it go idle: its turn has already ended)."""
    if hook_runner is None or not hook_runner.has_hooks("TeammateIdle"):
        return None
    data = _base(agent, cwd, None) | {
        "teammate_name": agent,
        "task_id": task.id if task else None,
        "task_subject": task.subject if task else None,
        "last_assistant_message": final_text,
        "last_message": final_text,  # the name this payload had before
    }
    outcome = hook_runner.run("TeammateIdle", data, session=session)
    if outcome.stop:
        log.warning("a TeammateIdle hook stopped %s: %s", agent, outcome.stop_reason)
        return None
    if outcome.blocked:
        return outcome.reason or "A TeammateIdle hook asks you to keep working."
    return None
