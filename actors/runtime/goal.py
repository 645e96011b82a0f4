"""The lead's goal in a team run (docs/ARCHITECTURE.md, "Goals"; the README's "Goals").

``TeamGoal`` keeps the lead's ``goal.*`` records: loaded from the journal when the runtime starts,
each new one journaled (actor: the lead) as the lead's ``harness.goal.GoalJudge`` reports it. Every
incarnation of the lead (its first start, each restart) gets a judge restored from these records
(``arm``), so a crash, a ``teamctl resume`` or a restart goes on judging the same goal with the
same counters. The judge runs only in the lead's actor thread; everyone else (the CLI, the console's
``/goal``) reads ``status()``, a fold of the records, and changes the goal by telling the lead's
actor (``actors.runtime.lead.SetGoal`` / ``ClearGoal``).

Judging waits while work is pending (``pending_work``): the lead's background jobs still running,
tasks in progress held by a teammate at work, and ready tasks while some teammate is there to claim
them. A lead that ends its turn after handing out work is not judged then; the teammates' results
wake it, and the stop that follows is judged.

At start (``start``): ``fresh`` clears a goal still set; a new goal (``--goal``/``--goal-check``)
is recorded; otherwise a goal still ``active`` is restored as it is, and one that ended ``unmet``
(the cap of blocked stops) is armed again with its counters from zero — resuming a run means going
on. A goal that was met, judged impossible or failed on an evaluator error stays over.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.goal import Goal, GoalStatus
from mailboxes.events import GoalCleared, GoalEvaluated, GoalSet, Payload, draft

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import TeamState
    from harness.agent import Agent
    from mailboxes.ports import EventStore

__all__ = ["GOAL_EVENTS", "TeamGoal", "goal_prompt", "team_work_pending"]

GOAL_EVENTS: Mapping[str, type[Payload]] = {
    "goal.set": GoalSet,
    "goal.evaluated": GoalEvaluated,
    "goal.cleared": GoalCleared,
}
AT_WORK = frozenset({"starting", "working", "waiting_permission", "waiting_plan_approval"})
"""Statuses of a teammate that will report back by itself."""
AROUND = AT_WORK | {"idle"}
"""Statuses of a teammate that claims a ready task (an idle one claims at the board change)."""


def team_work_pending(state: TeamState, *, lead: str = "lead") -> int:
    """Work the team still does without the lead: tasks in progress held by an agent teammate
    at work, plus ready unclaimed tasks while an agent teammate is around to claim them."""

    def agent_teammate(name: str | None) -> bool:
        member = state.members.get(name or "")
        return member is not None and member.kind == "agent" and name != lead

    count = sum(
        1
        for task in state.tasks.values()
        if task.status == "in_progress"
        and not task.human
        and agent_teammate(task.owner)
        and state.members[task.owner or ""].status in AT_WORK
    )
    around = any(
        m.kind == "agent" and m.name != lead and m.status in AROUND for m in state.members.values()
    )
    if around:
        count += sum(1 for task in state.ready() if task.owner is None)
    return count


def goal_prompt(goal: Goal) -> str:
    """The lead's input when a goal starts a turn by itself (no prompt given)."""
    wants = []
    if goal.condition:
        wants.append(goal.condition)
    if goal.check:
        wants.append(f"`{goal.check}` exits 0")
    return "[goal] Keep working until this holds: " + " and ".join(wants)


class TeamGoal:
    """The lead's ``goal.*`` records and the judge of each of its incarnations. Thread-safe."""

    def __init__(
        self,
        board: Board,
        *,
        lead: str = "lead",
        jobs_running: Callable[[str], int] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._board = board
        self._lead = lead
        self._jobs_running = jobs_running
        self._clock = clock
        self._lock = threading.Lock()
        self._records: list[tuple[str, dict[str, Any]]] = []
        self.armed = False
        """A goal is being pursued in this run (given now, or carried on from the journal)."""

    # -- records ---------------------------------------------------------------------------

    def load(self, journal: EventStore) -> None:
        """The lead's goal records as the journal has them."""
        records = [
            (e.type, dict(e.data))
            for e in journal.read_from(1)
            if e.type in GOAL_EVENTS and e.actor == self._lead
        ]
        with self._lock:
            self._records = records

    def record(self, kind: str, fields: dict[str, Any]) -> None:
        """Journal one record (the judge's ``record`` callback; also the runtime's own)."""
        body = GOAL_EVENTS[kind].model_validate(fields)
        self._board.execute(lambda state: [draft(kind, self._lead, body)])
        with self._lock:
            self._records.append((kind, dict(fields)))

    def records(self) -> Sequence[tuple[str, dict[str, Any]]]:
        with self._lock:
            return list(self._records)

    def status(self) -> GoalStatus:
        """A fold of the records (a fresh object: safe to read in any thread)."""
        status = GoalStatus()
        for kind, fields in self.records():
            status.apply(kind, fields)
        return status

    # -- the run ---------------------------------------------------------------------------

    def start(self, goal: Goal | None, *, fresh: bool) -> Goal | None:
        """Decide the goal of a starting run (see the module docstring); returns the goal it
        pursues, or None."""
        current = self.status()
        if fresh and current.goal is not None:
            self.record("goal.cleared", {})
            current = self.status()
        if goal is not None:
            self.record("goal.set", {"goal": goal.model_dump(mode="json"), "at": self._clock()})
        elif current.goal is not None and current.state == "unmet":
            fields = {"goal": current.goal.model_dump(mode="json"), "at": self._clock()}
            self.record("goal.set", fields)
        status = self.status()
        self.armed = status.goal is not None and status.state == "active"
        return status.goal if self.armed else None

    def arm(self, agent: Agent) -> None:
        """Give an incarnation of the lead its judge, restored from the records."""
        judge = agent.goal_judge(record=self.record, pending_work=self.pending_work)
        judge.restore(self.records())

    def pending_work(self) -> int:
        """What defers judging the lead's stop (see the module docstring)."""
        jobs = self._jobs_running(self._lead) if self._jobs_running is not None else 0
        return jobs + team_work_pending(self._board.refresh(), lead=self._lead)
