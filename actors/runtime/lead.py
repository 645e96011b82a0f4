"""``Lead``: the agent actor that runs the team (docs/ARCHITECTURE.md, "Actors and threads").

It wakes on its inbox (teammate messages, idle notifications, plan and permission requests,
``cron_fired``, ``task_notification``, errors) and on user input. Its tools are the team tools.
The live team state (members, tasks, pending approvals; ``team_state_text``, the agent's state
provider) reaches it as a reminder at the tail of its conversation: appended to the message that
opens a turn, or to the next tool results mid-turn, whenever the text changed since the last
reminder, so its system prompt and the conversation so far stay a stable, cached prefix
(docs/ARCHITECTURE.md, "Context and the prompt cache"). A summary compaction is followed by a
reminder with the whole state, so compaction can never make it forget its team. After it spawns
teammates it ends its turn; their results come back as mail.

It is woken when it has something to decide (docs/ARCHITECTURE.md, "Fewer model calls"):

- a *status notice* is an ``idle_notification`` of a teammate whose turn completed with its task
  completed (``is_status_notice``). Status notices are held, unread, while the lead has a turn,
  while ``notify_window_s`` runs from the first of them (a timer; 0 by default: no fixed delay)
  and while a teammate is at work (``team_at_work``: an agent teammate ``working`` or
  ``starting`` on a task in progress, or hosted in this process with a turn going — every such
  turn ends with a notice — or one whose notice is still being delivered beside its status
  change to ``idle``). Held notices are looked at again on the next mail and whenever the board
  changes (the lead hears ``BoardChanged`` like the teammates, and at once when a teammate's
  status changes in this process or its notice has arrived), so a completion
  that leaves other tasks running wakes nobody, and the change that leaves nobody at work wakes
  the lead at once with all of them;
- any other mail (a message or question, an error, a failed or abandoned task, a plan or
  permission request, a job result, a shutdown answer, a cron prompt) is delivered at once,
  together with every notice held until then;
- whatever is delivered comes as ONE input: the status notices as one compact block, one line per
  task (``format_status``), then the other messages as ``format_envelope`` writes them.

A held notice stays in the inbox (unacked), so the team is not idle while one waits and a crash
loses nothing; the watcher's rescan tick also wakes the lead again while it has unread mail (a
safety net, not the path).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from actors.runtime.agent_actor import AgentActor, AgentHost, format_envelope
from actors.services import TeamChannel

if TYPE_CHECKING:
    from actors.board.state import TeamState
    from actors.runtime.process import Timer
    from harness.agent import Agent
    from harness.goal import Goal
    from harness.loop import StepResult
    from mailboxes.messages import Envelope

__all__ = [
    "ClearGoal",
    "Lead",
    "LeadHost",
    "SetGoal",
    "format_status",
    "is_status_notice",
    "team_at_work",
    "team_state_text",
]

AT_WORK = frozenset({"working", "starting"})
"""Member statuses of a teammate that will report again by itself."""
SUMMARY_LIMIT = 200
"""Characters of a task's result shown on its status line."""


class LeadHost(AgentHost, TeamChannel, Protocol):
    """What the lead needs from its host: ``AgentHost`` plus the board it reads (``TeamChannel``),
    and which members this process hosts."""

    def hosts(self, name: str) -> bool:
        """``name`` has a live actor in this process (its turns end with a notice)."""
        ...

    def notice_on_its_way(self, name: str) -> bool:
        """A notice of ``name``'s to the lead is being delivered right now, beside its status
        change (``actors.runtime.teammate``): the lead counts it at work until it has arrived."""
        ...


def is_status_notice(env: Envelope) -> bool:
    """An ``idle_notification`` that asks for no decision: the teammate's turn completed and
    the task it held (if any) is completed, not released or left unfinished. One without a task
    answers mail (maybe the lead's question), so it is not a status notice."""
    if env.type != "idle_notification":
        return False
    body = env.body
    return (
        body.get("task_id") is not None
        and body.get("task_status") == "completed"
        and body.get("transition", "completed") == "completed"
        and "released" not in body
    )


def team_at_work(
    state: TeamState,
    *,
    lead: str = "lead",
    hosted: Callable[[str], bool] | None = None,
    reporting: Callable[[str], bool] | None = None,
) -> bool:
    """Some agent teammate will report by itself: it holds a task in progress and is working on
    it, or it is hosted here (``hosted(name)``: an actor in this process) and ``working`` or
    ``starting`` — e.g. between completing its task and claiming the next one, when its notice
    is not sent yet — or its notice is on its way (``reporting(name)``, whatever its status). A
    teammate hosted elsewhere counts only with a task in progress: its process may have died (the
    claims of dead owners are reaped, their statuses are not)."""
    if hosted is not None or reporting is not None:
        for m in state.members.values():
            if m.name == lead or m.kind != "agent":
                continue
            if reporting is not None and reporting(m.name):
                return True
            if hosted is not None and m.status in AT_WORK and hosted(m.name):
                return True
    for task in state.tasks.values():
        if task.status != "in_progress" or task.human or task.owner in (None, lead):
            continue
        member = state.members.get(task.owner or "")
        if member is not None and member.kind == "agent" and member.status in AT_WORK:
            return True
    return False


def _one_line(text: str, limit: int = SUMMARY_LIMIT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def format_status(notices: Sequence[Envelope], state: TeamState | None = None) -> str:
    """Status notices as one compact block: a header with the open tasks left, then one line per
    task: ``- <task id> <teammate>: <status> — <result summary>`` (scripts match on it)."""
    lines = []
    for env in notices:
        body = env.body
        result = str(body.get("summary") or body.get("text") or "").strip()
        status = body.get("task_status") or "idle"
        line = f"- {body.get('task_id') or '(no task)'} {env.sender}: {status}"
        lines.append(f"{line} — {_one_line(result)}" if result else line)
    header = f"[team status] {len(notices)} update{'s' if len(notices) != 1 else ''}"
    if state is not None:
        open_ids = [t.id for t in state.tasks.values() if t.status in ("pending", "in_progress")]
        header += f"; open tasks: {', '.join(open_ids) if open_ids else 'none'}"
    return "\n".join([header, *lines])


class Lead(AgentActor):
    """The lead: working while it has a turn, idle otherwise; woken by mail that needs it."""

    host: LeadHost
    status = ""

    def __init__(
        self,
        agent: Agent,
        host: LeadHost,
        *,
        notify_window_s: float = 0.0,
        timer: Timer | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(agent, host, **kwargs)
        self.notify_window_s = notify_window_s
        self.timer = timer
        self._cancel_window: Callable[[], None] | None = None
        self._window_closed = False
        self._holding = False  # status notices held: a board change looks at them again

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

    def on_stop(self) -> None:
        self._close_window()
        super().on_stop()

    # -- coalesced notifications -----------------------------------------------------------

    def take_mail(self, batch: list[Envelope]) -> list[Envelope]:
        self._holding = False
        if not all(is_status_notice(e) for e in batch) or len(batch) >= self.batch_max:
            self._close_window()
            return batch  # something to decide: everything at once, in one input
        if self.in_turn:
            return []  # held: the turn's end looks again
        if self._windowed() and not self._window_closed:
            self._open_window()
            return []
        self._window_closed = False
        board = self.host.board
        # The board as last read first (no lock): a teammate it shows at work is held for, and
        # the change that takes it off work comes with its own ``BoardChanged``; only when
        # nobody looks at work is the board read again before the notices go in.
        if self._at_work(board.state) or self._at_work(board.refresh()):
            # held: the teammate at work reports again (the last one wakes the lead), or its
            # status changes on the board (``on_board_changed``)
            self._holding = True
            return []
        return batch

    def on_board_changed(self) -> None:
        """Held status notices are looked at again: the change may leave nobody at work."""
        if not self._holding:
            return
        # The board as the change left it (whoever sends ``BoardChanged`` has read it first): a
        # teammate still at work keeps the notices held without reading the inbox again; the
        # change that leaves nobody at work comes with its own ``BoardChanged``.
        if self._at_work(self.host.board.state):
            return
        if not self.start_turn():
            self._settle()

    def _at_work(self, state: TeamState) -> bool:
        host = self.host
        return team_at_work(
            state, lead=self.name, hosted=host.hosts, reporting=host.notice_on_its_way
        )

    def render_mail(self, batch: Sequence[Envelope]) -> str:
        notices = [e for e in batch if is_status_notice(e)]
        others = [format_envelope(e) for e in batch if not is_status_notice(e)]
        if not notices:
            return "\n\n".join(others)
        status = format_status(notices, self.host.board.state)
        return "\n\n".join([status, *others])

    def _change_goal(self, message: SetGoal | ClearGoal) -> None:
        """Goals change in the actor's thread only, between two steps (the judge runs in it);
        the judge exists from the lead's build (``actors.runtime.goal.TeamGoal.arm``)."""
        judge = self.agent.goal
        if judge is None:
            return
        if isinstance(message, ClearGoal):
            judge.clear()
            return
        judge.set(message.goal)
        if not self.in_turn and not self.start_turn(message.prompt):
            self._settle()

    def _windowed(self) -> bool:
        return self.notify_window_s > 0 and self.timer is not None

    def _open_window(self) -> None:
        if self._cancel_window is not None or self.timer is None:
            return
        ref = self.actor_ref

        def close() -> None:
            ref.tell(_WindowClosed())

        self._cancel_window = self.timer(self.notify_window_s, close)

    def _close_window(self) -> None:
        cancel, self._cancel_window = self._cancel_window, None
        self._window_closed = False
        if cancel is not None:
            cancel()

    def on_other(self, message: Any) -> Any:
        if isinstance(message, SetGoal | ClearGoal):
            self._change_goal(message)
            return None
        if isinstance(message, _WindowClosed):
            self._cancel_window = None
            self._window_closed = True
            if not self.in_turn and not self.start_turn():
                self._settle()
            self._window_closed = False
            return None
        return super().on_other(message)


class _WindowClosed:
    """Internal: the notification window of the lead ran out (held notices are looked at)."""


class SetGoal:
    """Arm the lead's goal (the console's ``/goal TEXT``); an idle lead starts working on it."""

    def __init__(self, goal: Goal, prompt: str) -> None:
        self.goal, self.prompt = goal, prompt


class ClearGoal:
    """Clear the lead's goal (the console's ``/goal clear``)."""


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
    done = [t for t in tasks if t.status == "completed"]
    open_tasks = [t for t in tasks if t.status != "completed"]
    lines.append(f"Tasks ({len(tasks)}):")
    if not tasks:
        lines.append("- (none)")
    if done:
        # One line for finished work, so a long-lived board does not resend every subject with
        # each reminder (get_task / list_tasks have the details).
        shown = ", ".join(f"{t.id} ({t.owner})" if t.owner else t.id for t in done[-limit:])
        more = f"{len(done) - limit} earlier, " if len(done) > limit else ""
        lines.append(f"- completed ({len(done)}): {more}{shown}")
    for t in open_tasks[-limit:]:
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
