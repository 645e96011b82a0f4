"""Team hook events: ``TaskCreated``, ``TaskCompleted`` and ``TeammateIdle``
(docs/ARCHITECTURE.md, "Add a hook event").

They run through the harness ``HookRunner`` like every other hook: exit 2 (or a ``block``
decision) refuses, with the hook's stderr as the reason. ``TaskCreated`` runs before the task is
journaled (a refusal leaves no trace); ``TaskCompleted`` before the completion is journaled (the
refusal's reason goes back to the teammate as feedback); ``TeammateIdle`` when a teammate ends a
turn (a refusal keeps it working, with the feedback as its next input). Every payload names the
agent (``agent_name``, and ``teammate_name`` for teammates).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.hooks import HookOutcome, HookRunner

if TYPE_CHECKING:
    from actors.board.state import Task
    from actors.settings import Settings

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


def _run(runner: HookRunner | None, event: Any, data: dict[str, Any]) -> str | None:
    """Run ``event``'s hooks; the refusal reason, or ``None`` to proceed."""
    if runner is None or not runner.has_hooks(event):
        return None
    outcome: HookOutcome = runner.run(event, data)
    for error in outcome.errors:
        log.warning("%s hook: %s", event, error)
    if outcome.blocked:
        return outcome.reason or f"refused by a {event} hook"
    return None


def _base(agent: str, cwd: Path | None) -> dict[str, Any]:
    return {"agent_name": agent, "cwd": str(cwd or os.getcwd())}


def run_task_created_hook(
    runner: HookRunner | None,
    agent: str,
    *,
    subject: str,
    description: str,
    blocked_by: Sequence[str] = (),
    role: str | None = None,
    cwd: Path | None = None,
) -> str | None:
    """``TaskCreated`` before the task is journaled: the refusal reason, or ``None``."""
    data = _base(agent, cwd) | {
        "task_subject": subject,
        "task_description": description,
        "blocked_by": list(blocked_by),
        "role": role,
    }
    return _run(runner, "TaskCreated", data)


def run_task_completed_hook(
    runner: HookRunner | None,
    agent: str,
    task: Task,
    summary: str,
    *,
    cwd: Path | None = None,
) -> str | None:
    """``TaskCompleted`` before the completion is journaled: feedback, or ``None``."""
    data = _base(agent, cwd) | {
        "teammate_name": agent,
        "task_id": task.id,
        "task_subject": task.subject,
        "task_description": task.description,
        "summary": summary,
    }
    return _run(runner, "TaskCompleted", data)


def run_teammate_idle_hook(
    hook_runner: HookRunner | None,
    agent: str,
    task: Task | None,
    final_text: str,
    *,
    cwd: Path | None = None,
) -> str | None:
    """``TeammateIdle`` when ``agent`` ends a turn: feedback to keep it working, or ``None``."""
    data = _base(agent, cwd) | {
        "teammate_name": agent,
        "task_id": task.id if task else None,
        "task_subject": task.subject if task else None,
        "last_message": final_text,
    }
    return _run(hook_runner, "TeammateIdle", data)
