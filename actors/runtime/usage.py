"""Model usage in the journal, and the caps on it (docs/ARCHITECTURE.md, "Usage and caps").

``UsageMeter`` is the runtime's part that owns both:

- ``client(agent, inner)`` wraps an agent's model client so that every call's billed usage
  (``ModelResponse.billed_usage``: input, output, cache read and cache write tokens, exactly as
  the client returned them) is journaled as ``usage.recorded`` with its model and its cost
  (``harness.model.pricing``), charged to the task the agent holds, decided under the journal
  lock. Every model call of the agent goes through it: its turns, compaction summaries, skills
  and subagents.
- ``check(agent, turn)`` says which cap of the ``team`` settings the agent's next model call
  would go past (``CapHit``), if any; the agent's actor then starts no model call
  (``AgentHost.over_cap``). A call already started finishes, and so does the tool batch of
  its step: a cap can be overshot by that step's calls.

What is counted: the event is appended right after the call returned and before its answer
reaches the transcript (the records of agents whose calls return together may share one commit,
``actors.runtime.commits``; each call still waits until its record is durable). A crash between
the two loses that call's usage (at most one call per agent and crash), and the call is made
again after the restart (its answer never reached the transcript), which is counted. A crash after the append counts the call and its repeat: both
were billed. Each stored event is folded once (``actors.board.fold``), so the totals of a replay
are the totals of the run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors.runtime.commits import Deferred, SharedCommits
from harness.loop import total_tokens
from harness.model.pricing import cost_usd
from mailboxes.events import UsageRecorded, draft

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import TeamState
    from actors.runtime.commits import Batch
    from actors.settings import TeamSettings
    from harness.ports import ModelClient, ModelRequest, ModelResponse
    from mailboxes.events import EventDraft

__all__ = ["SETTINGS_FILE", "CapHit", "MeteredModel", "UsageMeter", "find_cap"]

log = logging.getLogger(__name__)

SETTINGS_FILE = ".team/settings.json"
"""Where a person raises a cap (named in every cap message)."""


@dataclass(frozen=True)
class CapHit:
    """A cap reached: the setting (``team.<name>``), its limit, what was spent against it, and
    the agent whose next model call it stopped (with the task, for ``max_turns_per_task``)."""

    setting: str
    limit: float
    spent: float
    agent: str
    task_id: str | None = None

    @property
    def reason(self) -> str:
        """What was reached, in words (agent names as they are: escape before printing)."""
        name = self.setting.removeprefix("team.")
        if name == "max_cost_usd":
            return f"the team has spent ${self.spent:.4f} of its {self.setting} ${self.limit:g}"
        if name == "max_tokens":
            return (
                f"the team has used {self.spent:,.0f} tokens of its {self.setting} {self.limit:g}"
            )
        if name == "max_turns_per_task":
            return (
                f"{self.agent} made {self.spent:.0f} model calls on {self.task_id} "
                f"({self.setting} {self.limit:g})"
            )
        return (
            f"{self.agent} spent {self.spent:,.0f} tokens in one turn "
            f"({self.setting} {self.limit:g})"
        )

    @property
    def hint(self) -> str:
        """How to go on."""
        return f"raise {self.setting} in {SETTINGS_FILE} and run `teamctl resume`"

    def line(self) -> str:
        """The one line a person reads: what was reached and how to raise it."""
        return f"cap reached: {self.reason}; {self.hint}"

    def as_event(self) -> dict[str, Any]:
        """The ``cap_reached`` output event (stream-json, the console)."""
        return {
            "type": "cap_reached",
            "agent": self.agent,
            "setting": self.setting,
            "limit": self.limit,
            "spent": self.spent,
            "task_id": self.task_id,
            "reason": self.reason,
            "hint": self.hint,
            "message": self.line(),
        }


def find_cap(
    state: TeamState, caps: TeamSettings, agent: str, turn_tokens: int = 0
) -> CapHit | None:
    """The first cap ``agent``'s next model call would go past (pure): the team budgets
    (``max_cost_usd``, ``max_tokens``), the calls on the task it holds (``max_turns_per_task``),
    then ``turn_tokens``, the tokens of its current turn (``max_tokens_per_turn``)."""
    used = state.usage
    if caps.max_cost_usd is not None and used.cost_usd >= caps.max_cost_usd:
        return CapHit("team.max_cost_usd", caps.max_cost_usd, used.cost_usd, agent)
    if caps.max_tokens is not None and used.tokens >= caps.max_tokens:
        return CapHit("team.max_tokens", caps.max_tokens, used.tokens, agent)
    held = state.holdings.get(agent)
    if caps.max_turns_per_task is not None and held is not None:
        task = state.task_usage.get(held)
        calls = 0 if task is None else task.calls
        if calls >= caps.max_turns_per_task:
            return CapHit("team.max_turns_per_task", caps.max_turns_per_task, calls, agent, held)
    if caps.max_tokens_per_turn is not None and turn_tokens >= caps.max_tokens_per_turn:
        return CapHit("team.max_tokens_per_turn", caps.max_tokens_per_turn, turn_tokens, agent)
    return None


class MeteredModel:
    """``inner`` with every call's usage journaled as ``agent``'s (``UsageMeter.record``)."""

    def __init__(self, inner: ModelClient, agent: str, meter: UsageMeter) -> None:
        self._inner = inner
        self._agent = agent
        self._meter = meter

    def complete(self, request: ModelRequest) -> ModelResponse:
        self._meter.settle(self._agent)  # the previous call's record is durable first
        response = self._inner.complete(request)
        self._meter.record(self._agent, response)
        return response


class UsageMeter:
    """Journals the usage of the runtime's model calls and checks the caps (thread-safe).

    ``on_hit`` is told of each cap reached, once per agent and setting."""

    def __init__(
        self,
        board: Board,
        caps: TeamSettings,
        *,
        on_hit: Callable[[CapHit], None] | None = None,
        commits: SharedCommits | None = None,
    ) -> None:
        self._board = board
        # Teammates finishing together share commits for their records (``SharedCommits``).
        self._commits = commits if commits is not None else SharedCommits(board)
        self._caps = caps
        self._on_hit = on_hit
        self._lock = threading.Lock()
        self._spent: dict[str, int] = {}
        """Tokens recorded per agent in this process (for the per-turn cap)."""
        self._turns: dict[str, tuple[object, int]] = {}
        """Per agent: its current turn and ``_spent`` when the turn's first check ran."""
        self._hits: dict[tuple[str, str], CapHit] = {}
        self._pending: dict[str, Deferred] = {}
        """Per agent: its last call's record, until settled."""

    def client(self, agent: str, inner: ModelClient) -> ModelClient:
        """``agent``'s model client: ``inner``, metered."""
        return MeteredModel(inner, agent, self)

    def record(self, agent: str, response: ModelResponse) -> None:
        """Journal ``response``'s billed usage as ``agent``'s call, charged to the task it
        holds (decided under the journal lock; the task it held as the call returned when its
        own write gave it up first). Deferred: the record goes out with the agent's next write
        (or another thread's, or within ``DEFER_S``) and is durable before its next model call
        (``settle``)."""
        usage = response.billed_usage
        cost = cost_usd(response.model, usage)
        # The task it held as the call returned, as this process knows the board: charged when
        # the agent's own write released or completed it before the record's commit.
        held = self._board.state.holdings.get(agent)

        def decision(state: TeamState, _batch: Batch) -> list[EventDraft]:
            body = UsageRecorded(
                agent=agent,
                model=response.model,
                task_id=state.holdings.get(agent) or held,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                cost_usd=cost,
            )
            return [draft(body.TYPE, agent, body)]

        pending = self._commits.defer(decision)
        with self._lock:
            self._spent[agent] = self._spent.get(agent, 0) + total_tokens(usage)
            self._pending[agent] = pending

    def settle(self, agent: str) -> None:
        """Wait until ``agent``'s last record is durable (at once when it is; raises what its
        commit raised). Called before each of its model calls and cap checks."""
        with self._lock:
            pending = self._pending.pop(agent, None)
        if pending is not None:
            self._commits.settle(pending)

    def check(self, agent: str, turn: object) -> CapHit | None:
        """The cap ``agent``'s next model call would go past, or None. ``turn`` names the
        agent's current turn (a new value starts counting its tokens afresh)."""
        self.settle(agent)  # its last call counts
        with self._lock:
            spent = self._spent.get(agent, 0)
            started = self._turns.get(agent)
            if started is None or started[0] != turn:
                started = self._turns[agent] = (turn, spent)
        caps = self._caps
        board_caps = (caps.max_cost_usd, caps.max_tokens, caps.max_turns_per_task)
        # Without a cap that reads the journal, no refresh (it would wait for a commit in flight).
        state = self._board.state if board_caps == (None, None, None) else self._board.refresh()
        hit = find_cap(state, caps, agent, spent - started[1])
        if hit is None:
            return None
        with self._lock:
            first = (agent, hit.setting) not in self._hits
            self._hits.setdefault((agent, hit.setting), hit)
        if first:
            log.info("%s", hit.line())
            if self._on_hit is not None:
                self._on_hit(hit)
        return hit

    def reached(self) -> CapHit | None:
        """The first cap reached in this runtime, or None."""
        with self._lock:
            return next(iter(self._hits.values()), None)
