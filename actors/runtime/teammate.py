"""``Teammate``: an agent actor that works one task at a time
(docs/ARCHITECTURE.md, "Actors and threads").

States (each change journaled as ``member.status_changed``): ``starting → working → idle →
(working …) → stopping → stopped``, plus ``waiting_plan_approval``, ``waiting_permission`` and
``crashed`` (recorded by the Supervisor).

When it gets a task (claimed by itself, or assigned: the board shows it as the holder), its next
input states the task id, subject, description, the outcomes of its dependencies and its working
directory. A turn that ends runs the ``TeammateIdle`` hook (exit 2 = keep working with the hook's
feedback, at most ``MAX_IDLE_HOOK_ROUNDS`` times in a row), then sends an ``idle_notification`` to the lead carrying the final text and task
id, and the task's ``summary`` when it completed it; it is sent once the teammate has looked for
its next task (claimed and started it, or found none), so the lead reading it sees who is still
at work (``actors.runtime.lead``). It is delivered on a thread beside what the teammate does
next (the new turn's first model call, or its status turning ``idle``), and the lead counts the
teammate at work until it is in the lead's inbox (``TeammateHost.notice_begins``): the status
change to ``idle`` is what wakes a lead holding status notices, and it finds this one among them.
A turn may end with the ``complete_task`` (or
``release_task``, ``submit_plan``) call itself, without a closing model call (terminal tools,
``harness.loop``): the final text is then what the model wrote next to that call. While IDLE it wakes on its inbox and on the board changing, and claims the lowest-id ready task
its role may take (``Board.claim_next``'s rule, atomic across processes; teammates of this
process claiming at once share a commit: ``TeammateHost.claim_next``). When the host runs with
``team.worktree_per_task`` (``host.worktree_per_task``), it first has a worktree bound to that
task (``host.ensure_task_worktree``, while the task is still pending and unowned), then claims
that very task; if another teammate was faster it tries the next one.

A turn that ends while it still holds its unfinished task (not in the plan protocol) is
followed by a reminder naming the task (``complete_task``, or ``release_task`` with what blocks
it), at most ``task_reminders`` times per claim; ending one more turn still holding it releases
the task (``task.released``, reason ``abandoned``), which this teammate then no longer claims, and
the ``idle_notification`` says so (its ``task_status`` is always the task's real status).

Stall detection (docs/RELIABILITY.md, "A stalled teammate"): a timer per turn checks every
``stall_timeout_s`` that a step finished since the last check; if none did (a hung model call or
tool), and the same tool call (name and input) ``max_repeated_tool_calls`` times in a row (the turn
is then interrupted), the member becomes ``stalled`` and the lead gets an ``error`` message naming
it, its task and why. A step that finishes after all, or its next turn, makes it ``working`` again.

Without a task, or while its task needs a plan that is not approved for the current claim, its
tools run read-only (plan mode): it may read and message, not write files or run commands.

A ``shutdown_request`` in its inbox is answered by the actor itself between two steps: it releases
an unfinished task, journals ``shutdown.acknowledged``, answers ``shutdown_response`` and stops.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from actors.board.board import acting_as
from actors.board.rules import claimable
from actors.errors import TeamError
from actors.protocols import answer_shutdown
from actors.runtime.agent_actor import AgentActor, AgentHost
from actors.runtime.process import run_beside
from actors.services import TeamChannel
from harness.ports import ToolUseBlock
from mailboxes.errors import MailboxesError
from mailboxes.events import MemberStatusChanged

if TYPE_CHECKING:
    from actors.board.state import Task
    from actors.runtime.process import Timer
    from harness.agent import Agent
    from harness.hooks import HookRunner
    from harness.loop import StepResult
    from mailboxes.events import Payload
    from mailboxes.messages import Envelope

log = logging.getLogger(__name__)

__all__ = ["Teammate", "TeammateHost", "task_brief"]

MAX_IDLE_HOOK_ROUNDS = 3
"""A TeammateIdle hook may send the teammate back to work this many times in a row."""

_APPROVED = re.compile(r'\napprove: true\n(?:feedback: .*\n)?request_id: "([^"]+)"')
"""The fields of an approving ``plan_approval_response`` in the model's input."""

NOTICE_SEND_WAIT_S = 30.0
"""The longest a teammate waits for its previous notice to be delivered before the next one."""

MAX_CLAIM_ATTEMPTS = 8
"""With ``worktree_per_task``: candidates tried in one go before waiting for the next change."""

ABANDONED = "abandoned"
"""The ``task.released`` reason of a task its teammate kept ending turns without finishing."""
STALLED = "stalled"
"""The member status of a teammate whose turn makes no progress or repeats one tool call."""


class TeammateHost(AgentHost, TeamChannel, Protocol):
    """What a teammate needs from its host on top of ``AgentHost``: the board it claims from and
    mail to the lead (``TeamChannel``), worktrees, and stopping when it is done."""

    def member_done(self, name: str, reason: str) -> None:
        """The teammate stopped on its own (shutdown accepted, idle timeout): stop its actor,
        release its claim, free its lease."""
        ...

    def worktree(self, name: str, *, claimed: bool) -> Path | None:
        """Lock (``claimed``) or unlock the worktree ``name``; its path, or None when this host
        manages no worktrees."""
        ...

    @property
    def worktree_per_task(self) -> bool:
        """Every task gets its own worktree, made before it is claimed
        (``ensure_task_worktree``)."""
        ...

    def ensure_task_worktree(self, task_id: str) -> bool:
        """Bind a worktree to the pending, unowned task ``task_id``; True when it has one now,
        False when none could be made (the task is then worked in the checkout)."""
        ...

    def abandoned(self, name: str, task_id: str) -> None:
        """``name`` released ``task_id`` as abandoned and will not claim it again (the team is
        idle even while that task waits for another taker)."""
        ...

    def claim_next(
        self,
        name: str,
        *,
        role: str | None,
        exclude: Collection[str] = (),
        also: Sequence[Payload] = (),
    ) -> Task | None:
        """``Board.claim_next`` for ``name`` (not a task of ``exclude``; with ``also`` in the
        claim's commit), made in one commit with the other writes of this process that meet it,
        or of the host's (``actors.runtime.commits``): the claimed task, or None."""
        ...

    def notice_begins(self, name: str) -> None:
        """``name`` starts delivering a notice to the lead on a thread of its own: until
        ``notice_ends`` the lead counts it at work (``actors.runtime.lead.team_at_work``)."""
        ...

    def notice_ends(self, name: str) -> None:
        """The notice ``notice_begins`` announced is in the lead's inbox (or failed); the lead
        looks at the notices it holds again."""
        ...


def claim_tag(task: Task) -> str:
    """How a brief names the claim (a resumed teammate looks for it in its transcript)."""
    return f"task {task.id} (claim {task.epoch})"


def reminder(task: Task, n: int, of: int) -> str:
    """The input that reminds a teammate of the task it ended its turn holding."""
    return (
        f"You ended your turn but still hold {claim_tag(task)}: {task.subject}. "
        f'Finish it and call complete_task with task_id "{task.id}" and a summary, or, if you '
        "cannot, call release_task with the reason (what blocks you). "
        f"Reminder {n} of {of}: if you end your turn still holding it, it is released to the board."
    )


def task_brief(
    task: Task, tasks: dict[str, Task] | Any, cwd: Path, root: Path | None = None
) -> str:
    """The input that hands ``task`` to a teammate. The working directory is named only when it
    is not ``root`` (a worktree), which the system prompt already names. What every brief would
    repeat stays out (the teammate's system prompt says to call complete_task when done; a
    dependency's status is named only when it is not completed): the brief stays in the
    conversation, sent again with every later request."""
    lines = [f"You now hold {claim_tag(task)}: {task.subject}"]
    if task.description:
        lines.append(f"Description: {task.description}")
    if task.blocked_by:
        lines.append("Dependencies:")
        for dep_id in task.blocked_by:
            dep = tasks.get(dep_id)
            outcome = (dep.summary or "(no summary)") if dep is not None else "(unknown)"
            status = dep.status if dep is not None else "unknown"
            note = "" if status == "completed" else f" ({status})"
            lines.append(f"- {dep_id}{note}: {outcome}")
    if cwd != root:
        lines.append(f"Working directory: {cwd}")
    if task.plan.required and not task.plan.approved:
        lines.append(
            "This task requires an approved plan: investigate read-only, then call submit_plan; "
            "you may change files only once the plan is approved."
        )
    return "\n".join(lines)


class Teammate(AgentActor):
    """A teammate actor; ``role`` filters the tasks it claims."""

    host: TeammateHost

    def __init__(
        self,
        agent: Agent,
        host: TeammateHost,
        *,
        role: str | None = None,
        lead: str = "lead",
        hook_runner: HookRunner | None = None,
        idle_timeout_s: float | None = None,
        idle_timer: Timer | None = None,
        generation: int = 0,
        batch_max: int = 50,
        resumed: bool = False,
        task_reminders: int | None = None,
        stall_timeout_s: float | None = None,
        max_repeated_tool_calls: int | None = None,
    ) -> None:
        super().__init__(agent, host, generation=generation, batch_max=batch_max, resumed=resumed)
        self.role = role
        self.lead = lead
        self.hook_runner = hook_runner
        self.idle_timeout_s = idle_timeout_s
        self.idle_timer = idle_timer  # also the stall watchdog's timer
        self.task_reminders = task_reminders
        self.stall_timeout_s = stall_timeout_s
        self.max_repeated_tool_calls = max_repeated_tool_calls
        self._reminded = 0  # reminders given for the current claim
        self._abandoned: set[str] = set()
        self._approvals_read: set[str] = set()  # plan requests whose approval reached the model
        # The watchdog's state: read and written by the actor and the timer thread.
        self._watch_lock = threading.Lock()
        self._steps_done = 0
        self._watched_turn = 0  # the turn the armed timer is for; 0: none
        self._cancel_watch: Callable[[], None] | None = None
        self._stall: str | None = None  # why it is stalled
        self._last_call: tuple[str, str] | None = None
        self._repeats = 0
        self.task_id: str | None = None
        self.epoch: int | None = None
        self.status = "starting"
        self._hook_rounds = 0
        self._notice: dict[str, Any] | None = None  # the idle notification not sent yet
        self._sending: threading.Event | None = None  # set once a notice sent beside is out
        self._cancel_idle: Callable[[], None] | None = None
        self._stopping = False
        self.worktree_name: str | None = None
        self._policy = agent.policy  # outside a worktree; confined to one while in it
        self._sync_mode(None)  # no task yet: read and message only

    # -- lifecycle -----------------------------------------------------------------------------

    def on_start(self) -> None:
        try:
            self.host.board.refresh()
            held = self.host.board.state.holding(self.name)
            if held is not None and self.resumed and self._was_briefed(held):
                self._approvals_read.update(self._approvals_in_transcript())
                self._adopt(held)  # a resumed claim: continue it, reminded of what it holds
                brief = task_brief(
                    held, self.host.board.state.tasks, self.agent.cwd, self.agent.root
                )
                note = f"You were restarted and still hold this task.\n{brief}"
                # Opened here, not told to ourselves: the member is busy before the host's
                # start wake, so a headless resume cannot find the team idle in between.
                self.start_turn(note)
        except Exception as exc:  # reported, never raised in a hook
            self.fail(f"{type(exc).__name__}: {exc}")

    def on_stop(self) -> None:
        self._disarm_idle()
        self._disarm_watch()
        self._notice_sent()
        super().on_stop()

    def _was_briefed(self, task: Task) -> bool:
        tag = claim_tag(task)
        return any(
            tag in getattr(block, "text", "")
            for message in self.agent.messages
            if message.role == "user"
            for block in message.content
        )

    def _approvals_in_transcript(self) -> set[str]:
        """Plan requests whose approval (a ``plan_approval_response``, as ``format_envelope``
        writes it) is in the conversation of a resumed teammate."""
        texts = (
            getattr(block, "text", "")
            for message in self.agent.messages
            if message.role == "user"
            for block in message.content
        )
        return {rid for text in texts for rid in _APPROVED.findall(text)}

    def _set(self, status: str, reason: str = "") -> None:
        if status != self.status:
            self.status = status
            self.host.set_status(self.name, status, reason)

    # -- tasks ---------------------------------------------------------------------------------

    def _adopt(self, task: Task) -> None:
        if self.worktree_name is not None and self.worktree_name != task.worktree:
            self._leave_worktree()
        if (task.id, task.epoch) != (self.task_id, self.epoch):
            self._reminded = 0
        self.task_id, self.epoch = task.id, task.epoch
        if task.worktree and self.worktree_name != task.worktree:
            path = self.host.worktree(task.worktree, claimed=True)
            if path is not None:  # confined to it: root and cwd, plus the deny-only checks
                from actors.runtime.policy_journal import confine_journaled

                self.worktree_name = task.worktree
                confined = confine_journaled(self._policy, path, self.agent.root)
                self.agent.relocate(path, path, confined)
        self._limit_tools(task)
        self._sync_mode(task)

    def _limit_tools(self, task: Task | None) -> None:
        """A workflow step's tool set around the current policy (``actors.workflows.tools``)."""
        from actors.workflows.tools import StepTools

        current = self.agent.executor.policy
        policy = StepTools.around(current, task)
        if policy is not current:
            self.agent.relocate(self.agent.tool_context.root, self.agent.cwd, policy)

    def _leave_worktree(self) -> None:
        name, self.worktree_name = self.worktree_name, None
        if name is not None:
            self.agent.relocate(self.agent.root, self.agent.root, self._policy)
            self.host.worktree(name, claimed=False)

    def _drop_task(self) -> None:
        self.task_id = self.epoch = None
        self._leave_worktree()
        self._limit_tools(None)
        self._sync_mode(None)

    def _sync_mode(self, task: Task | None) -> None:
        self.agent.set_read_only(task is None or not task.plan.approved)

    def _held(self) -> Task | None:
        return self.host.board.state.holding(self.name)

    def _seek_work(self, *, refresh: bool = True) -> bool:
        """Pick up an assignment or claim the next ready task; True when a turn started.
        ``refresh`` False: the board as it is (a ``BoardChanged`` is sent after the board was
        read, so it shows that change already; the claim itself is decided on the journal)."""
        board = self.host.board
        state = board.refresh() if refresh else board.state
        held = state.holding(self.name)
        ready = [t for t in state.ready(self.role, any_role=False) if self._may_claim(t)]
        if held is None and ready:
            # Busy before the claim commits: the runtime never sees a claimed task whose owner
            # still looks idle (is_idle reads the flags again after the board).
            self.host.set_busy(self.name, True)
            with acting_as(self.name):
                held = self._claim_next()
            if held is None and not self.in_turn:
                self.host.set_busy(self.name, False)
        if held is None:
            if self.task_id is not None:
                self._drop_task()
            return False
        if held.id == self.task_id and held.epoch == self.epoch:
            return False  # already ours and briefed; it wakes on mail
        self._adopt(held)
        self.host.emit({"type": "claimed", "agent": self.name, "task_id": held.id})
        return self.start_turn(task_brief(held, board.state.tasks, self.agent.cwd, self.agent.root))

    def _claim_next(self) -> Task | None:
        board = self.host.board
        if not self.host.worktree_per_task:
            # Its status turns ``working`` in the claim's commit (one fsync, not two, between
            # the board change and its model call); the turn's ``_set`` then journals nothing.
            # Teammates woken by the same change claim in shared commits (``claim_next``).
            working = MemberStatusChanged(name=self.name, status="working")
            also = () if self.status == "working" else (working,)
            return self.host.claim_next(
                self.name, role=self.role, exclude=self._abandoned, also=also
            )
        for _ in range(MAX_CLAIM_ATTEMPTS):  # each round, a faster teammate may take the task
            ready = [
                t for t in board.refresh().ready(self.role, any_role=False) if self._may_claim(t)
            ]
            if not ready:
                return None
            # If none could be made, the task is still worked (in the root).
            self.host.ensure_task_worktree(ready[0].id)
            result = board.claim(ready[0].id, self.name)
            if result.ok:
                return result.task
        return None

    def _may_claim(self, task: Task) -> bool:
        return task.id not in self._abandoned and claimable(task)

    def _abandon(self, task: Task) -> Task | None:
        """Release ``task`` (kept unfinished past the reminders); the task as released, or None
        when the claim had changed meanwhile."""
        try:
            with acting_as(self.name):
                released = self.host.board.release(task.id, self.name, task.epoch, ABANDONED)
        except TeamError as exc:  # nothing to give back
            log.info("%s: could not release %s: %s", self.name, task.id, exc)
            return None
        self._abandoned.add(task.id)
        self.host.abandoned(self.name, task.id)
        return released

    def _unfinished(self, held: Task | None, result: StepResult) -> Task | None:
        """The task this turn ended holding unfinished, unless it is in the plan protocol (a plan
        required and not approved yet: the reviewer answers) or the turn was interrupted (a stop,
        or a stall the lead was told of)."""
        if held is None or held.id != self.task_id or result.transition == "interrupted":
            return None
        if held.status != "in_progress" or not self._plan_settled(held):
            return None
        return held

    def _plan_settled(self, task: Task) -> bool:
        """No plan is needed, or its approval has reached this teammate: the review is journaled
        before its message is sent (docs/ARCHITECTURE.md, "Protocols"), so a turn can end with
        the board showing the plan approved before the teammate was told; that turn is still
        waiting for the reviewer, not holding its task unfinished."""
        plan = task.plan
        if not plan.required:
            return True
        if not plan.approved:
            return False
        return plan.request_id is None or plan.request_id in self._approvals_read

    # -- AgentActor hooks ----------------------------------------------------------------------

    def on_turn_start(self) -> None:
        self._disarm_idle()
        held = self._held()
        if held is not None and held.id == self.task_id:
            self._sync_mode(held)
        with self._watch_lock:
            self._stall = None
        self._last_call, self._repeats = None, 0
        self._set("working")
        self._notify(beside=True)  # the previous turn's, now that this one has started
        self._arm_watch()

    def continues_history(self) -> bool:
        with self._watch_lock:  # a stalled turn was stopped: only new input opens the next
            return self._stall is None

    def on_step_end(self, result: StepResult) -> None:
        with self._watch_lock:
            self._steps_done += 1
            progressed = result.response is not None and self._stall is not None
            if progressed:
                self._stall = None
        if progressed:  # the hung call or tool returned after all: watched again
            self._set("working", "progressing again")
            if not result.done:
                self._arm_watch()
        if result.response is None or self.max_repeated_tool_calls is None:
            return
        for block in result.response.content:
            if not isinstance(block, ToolUseBlock):
                continue
            call = (block.name, json.dumps(block.input, sort_keys=True, default=str))
            self._repeats = self._repeats + 1 if call == self._last_call else 1
            self._last_call = call
        if self._repeats >= self.max_repeated_tool_calls and not result.done:
            name = self._last_call[0] if self._last_call else "?"
            why = f"called {name} with the same input {self._repeats} times in a row"
            with self._watch_lock:
                self._stall = why
            self.agent.interrupt()  # the turn ends at the next step, without a model call
            self._stalled(why)

    def on_turn_end(self, result: StepResult) -> str | None:
        self._disarm_watch()
        if self._stopping:
            return None
        with self._watch_lock:
            stalled = self._stall is not None
        if stalled:  # the lead was told; it decides (message it, or request its shutdown)
            return None
        if result.transition == "completed" and self._hook_rounds < MAX_IDLE_HOOK_ROUNDS:
            feedback = self._idle_hook(result.text)
            if feedback:
                self._hook_rounds += 1
                return feedback
        self._hook_rounds = 0
        task_id = self.task_id
        held = self._held()
        released: Task | None = None
        unfinished = self._unfinished(held, result)
        if unfinished is not None and self.task_reminders is not None:
            if self._reminded < self.task_reminders:
                self._reminded += 1
                return reminder(unfinished, self._reminded, self.task_reminders)
            released = self._abandon(unfinished)
            held = self.host.board.refresh().holding(self.name)
        status = held.status if held is not None else None
        summary: str | None = None
        if released is not None:  # as released: another teammate may have claimed it since
            status = released.status
        elif task_id is not None and held is None:
            done = self.host.board.state.tasks.get(task_id)
            status = done.status if done is not None else None
            summary = done.summary if done is not None and status == "completed" else None
        body: dict[str, Any] = {
            "text": result.text,
            "task_id": task_id,
            "task_status": status,
            "transition": result.transition,
        }
        if summary:  # the result, so the lead never has to ask for it
            body["summary"] = summary
        if released is not None:
            body["released"] = ABANDONED
            body["note"] = (
                f"{self.name} ended {self._reminded + 1} turns without completing {task_id}; "
                f"it was released and is {status} again (another teammate may claim it)."
            )
        elif held is not None and held.status == "in_progress":
            body["note"] = f"{self.name} still holds {held.id}, in progress (not completed)."
        # Sent once it has looked for its next task (``_notify``): the lead reading it then sees
        # this teammate at work again if there was more to do, and is not woken for nothing.
        # A completed workflow step is not news for the lead: its workflow run takes the result.
        if not (status == "completed" and _workflow_step(self.host.board.state, task_id)):
            self._notice = body
        if held is None and task_id is not None:
            self._drop_task()
        return None

    def _notify(self, *, beside: bool = False) -> None:
        """Send the idle notification of the turn that ended, if not sent yet. ``beside``: on a
        thread of its own, so that the delivery (two fsyncs) does not hold up what the actor does
        meanwhile (the model call a new turn opens with, or the status change to idle); the lead
        counts this teammate at work until it is delivered (``host.notice_begins``), and any
        later notice waits for it first (``_notice_sent``), so the lead still gets each notice
        before it sees this teammate idle."""
        self._notice_sent()
        body, self._notice = self._notice, None
        if body is None:
            return
        if not beside:
            self._send_notice(body)
            return
        host, name = self.host, self.name

        def send() -> None:
            try:
                self._send_notice(body)
            except Exception:  # the board has the result; the lead reads it there
                log.warning("%s could not notify %s", self.name, self.lead, exc_info=True)
            finally:
                host.notice_ends(name)

        host.notice_begins(name)
        try:
            self._sending = run_beside(send, "notify")
        except BaseException:
            host.notice_ends(name)
            raise

    def _send_notice(self, body: dict[str, Any]) -> None:
        try:
            self.host.send(self.name, self.lead, "idle_notification", body)
        except (TeamError, MailboxesError) as exc:  # the lead being gone must not crash us
            log.warning("%s could not notify %s: %s", self.name, self.lead, exc)

    def _notice_sent(self) -> None:
        """Wait (bounded) for a notice still being sent beside what the actor does."""
        sending, self._sending = self._sending, None
        if sending is not None:
            sending.wait(NOTICE_SEND_WAIT_S)

    def on_idle(self) -> None:
        if self._stopping or self.dead:
            self._notify()
            return
        # The board as this process last read or wrote it (no refresh): it holds this teammate's
        # own writes, and the watcher reads the journal before every ``BoardChanged`` (one that
        # came during the turn was dropped, but its read is in this state); a refresh here would
        # queue on the board's lock behind the other teammates' appends and their fdatasyncs.
        if self._seek_work(refresh=False):  # its turn has started: notified there
            return
        with self._watch_lock:
            if self._stall is not None:  # stays stalled until its next turn
                self._notify()
                return
        held = self._held()
        waiting = held is not None and held.plan.status == "submitted"
        # The notice and the status change at once (the delivery's fsyncs beside the journal's):
        # until the notice is in its inbox the lead counts this teammate at work
        # (``notice_begins``), so the status change cannot wake it with every notice but this
        # one (``actors.runtime.lead``). Delivered before this member stops being busy: the
        # team is never idle with a notice on its way.
        self._notify(beside=True)
        self._set("waiting_plan_approval" if waiting else "idle")
        self._notice_sent()
        self._arm_idle()

    def on_board_changed(self) -> None:
        if self._stopping:
            return
        if not self._seek_work(refresh=False):
            held = self._held()
            if held is not None and held.id == self.task_id:
                self._sync_mode(held)

    def take_mail(self, batch: list[Envelope]) -> list[Envelope]:
        self._approvals_read.update(
            str(e.body.get("request_id"))
            for e in batch
            if e.type == "plan_approval_response" and e.body.get("approve") is True
        )
        shutdown = next((e for e in batch if e.type == "shutdown_request"), None)
        if shutdown is None:
            return batch
        self._accept_shutdown(shutdown)
        return []

    # -- protocols -----------------------------------------------------------------------------

    def _idle_hook(self, text: str) -> str | None:
        from actors.tools.hooks import run_teammate_idle_hook

        return run_teammate_idle_hook(
            self.hook_runner,
            self.name,
            self._held(),
            text,
            cwd=self.agent.cwd,
            session=self.agent.hook_session(),
        )

    def _accept_shutdown(self, request: Envelope) -> None:
        self._stopping = True
        self._set("stopping", "shutdown requested")
        if self.in_turn:
            self.agent.interrupt()
        board = self.host.board
        held = board.refresh().holding(self.name)
        if held is not None:
            with acting_as(self.name):
                board.release(held.id, self.name, held.epoch, "shutdown")
        request_id = str(request.body.get("request_id") or request.id)
        try:
            answer_shutdown(self.host, self.name, request_id, requested_by=request.sender)
        except MailboxesError:  # the asker has no inbox (e.g. `teamctl stop`): nobody to answer
            log.info("%s: no inbox to answer the shutdown request of %s", self.name, request.sender)
        self.ack([request.id])
        self.dead = True  # no more turns; the host stops the actor
        self.host.set_busy(self.name, False)
        self.host.member_done(self.name, "shutdown")

    # -- stall detection -----------------------------------------------------------------------

    def _arm_watch(self) -> None:
        if self.stall_timeout_s is None or self.idle_timer is None:
            return
        with self._watch_lock:
            self._arm_watch_locked(self.turn)

    def _arm_watch_locked(self, turn: int) -> None:
        cancel, self._cancel_watch = self._cancel_watch, None
        if cancel is not None:
            cancel()
        if self.stall_timeout_s is None or self.idle_timer is None:
            return
        steps = self._steps_done
        self._watched_turn = turn
        self._cancel_watch = self.idle_timer(
            self.stall_timeout_s, lambda: self._check_progress(turn, steps)
        )

    def _disarm_watch(self) -> None:
        with self._watch_lock:
            self._watched_turn = 0
            cancel, self._cancel_watch = self._cancel_watch, None
        if cancel is not None:
            cancel()

    def _check_progress(self, turn: int, steps: int) -> None:
        """The watchdog fired (on the timer's thread): stalled when no step finished since it
        was armed, else armed again for the next period."""
        try:
            with self._watch_lock:
                if self._watched_turn != turn or self.dead or self._stopping:
                    return
                if self._steps_done != steps or self._waiting_for_a_person():
                    self._arm_watch_locked(turn)
                    return
                if self._stall is not None:
                    return
                timeout = self.stall_timeout_s
                self._stall = why = f"no progress for {timeout:g} s (a model call or tool hangs)"
                self._cancel_watch = None  # fired; armed again once a step finishes
            self._stalled(why)
        except Exception:  # a timer thread must not die with an exception
            log.exception("%s: stall check failed", self.name)

    def _waiting_for_a_person(self) -> bool:
        if self.parked:  # held back before a model call (degraded, a cap reached): no hang
            return True
        member = self.host.board.state.members.get(self.name)
        return member is not None and member.status == "waiting_permission"

    def _stalled(self, why: str) -> None:
        """Record the stall and tell the lead (from the actor's or the timer's thread)."""
        self.status = STALLED
        self.host.set_status(self.name, STALLED, why)
        held = self.host.board.state.holding(self.name)
        task = f"{held.id} ({held.status})" if held is not None else "no task"
        text = (
            f"{self.name} is stalled: {why}; it holds {task}. Send it a message to continue, "
            "or stop it with request_shutdown (a person: `teamctl stop "
            f"{self.name} --force`)."
        )
        body = {
            "text": text,
            "member": self.name,
            "task_id": held.id if held is not None else None,
            "task_status": held.status if held is not None else None,
            "reason": why,
        }
        with contextlib.suppress(TeamError, MailboxesError):  # the lead being gone is no crash
            self.host.send(self.name, self.lead, "error", body)

    # -- idle timeout --------------------------------------------------------------------------

    def _arm_idle(self) -> None:
        if self.idle_timeout_s is None or self.idle_timer is None or self._cancel_idle:
            return
        ref = self.actor_ref

        def expire() -> None:
            ref.tell(_IdleExpired())

        self._cancel_idle = self.idle_timer(self.idle_timeout_s, expire)

    def _disarm_idle(self) -> None:
        cancel, self._cancel_idle = self._cancel_idle, None
        if cancel is not None:
            cancel()

    def on_other(self, message: Any) -> Any:
        if isinstance(message, _IdleExpired):
            self._cancel_idle = None
            if not self.in_turn and self.status == "idle" and self._held() is None:
                self._stopping = True
                self.dead = True
                self.host.member_done(self.name, "idle_timeout")
            return None
        return super().on_other(message)


def _workflow_step(state: Any, task_id: str | None) -> bool:
    """``task_id`` is a step of a workflow run (docs/ARCHITECTURE.md, "Workflows")."""
    task = state.tasks.get(task_id) if task_id is not None else None
    return task is not None and "workflow" in task.metadata


class _IdleExpired:
    """Internal: the idle timer fired (only acted on if still idle)."""
