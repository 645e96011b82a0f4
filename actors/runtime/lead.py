"""``Lead``: the agent actor that runs the team (docs/ARCHITECTURE.md, "Actors and threads").

It wakes on its inbox (teammate messages, idle notifications, plan and permission requests,
``cron_fired``, ``task_notification``, errors) and on user input. Its tools are the team tools;
the live team state (members, tasks, pending approvals) is part of its system prompt on every
call (the runtime passes ``team_state_text`` as the agent's state provider), so compaction can
never make it forget its team. After it spawns teammates it ends its turn; their results come
back as mail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.runtime.agent_actor import AgentActor

if TYPE_CHECKING:
    from actors.board.state import TeamState
    from harness.loop import StepResult

__all__ = ["Lead", "team_state_text"]


class Lead(AgentActor):
    """The lead: working while it has a turn, idle otherwise."""

    status = ""

    def _set(self, status: str) -> None:
        if status != self.status:
            self.status = status
            self.host.set_status(self.name, status)

    def on_turn_start(self) -> None:
        self._set("working")

    def on_turn_end(self, result: StepResult) -> str | None:
        return None

    def on_idle(self) -> None:
        self._set("idle")


def team_state_text(state: TeamState, *, lead: str = "lead", limit: int = 60) -> str:
    """Members, tasks and pending plan approvals as the lead sees them in its prompt."""
    lines = ["Members:"]
    holders = {owner: tid for owner, tid in state.holdings.items()}
    members = [m for m in state.members.values() if m.name != lead]
    if not members:
        lines.append("- (no teammates yet)")
    for m in members:
        task = holders.get(m.name)
        extra = f", on {task}" if task else ""
        kind = " (human)" if m.kind == "human" else ""
        lines.append(f"- {m.name}{kind}: {m.status}{extra}, role {m.role or 'general'}")
    tasks = [t for t in state.tasks.values() if t.status != "deleted"]
    lines.append(f"Tasks ({len(tasks)}):")
    if not tasks:
        lines.append("- (none)")
    for t in tasks[-limit:]:
        owner = f", owner {t.owner}" if t.owner else ""
        deps = f", blocked by {', '.join(t.blocked_by)}" if t.blocked_by else ""
        ready = ", ready" if state.is_ready(t) else ""
        lines.append(f"- {t.id} [{t.status}{owner}{deps}{ready}] {t.subject}")
    pending = list(state.plan_requests.values())
    if pending:
        lines.append("Plans awaiting review:")
        for req in pending:
            lines.append(f"- {req.request_id}: {req.teammate} on {req.task_id} ({req.status})")
    return "\n".join(lines)
