"""``TeamRuntime``: the process that runs a team (docs/ARCHITECTURE.md, "Actors and threads").

It opens the team, takes ``.team/runtime.lock`` (a second runtime on the repository refuses; ``join``
mode hosts one teammate next to it instead: see below), holds each hosted member's liveness lease
(``.team/members/<agent>.lock``) for the member's lifetime, reaps claims of dead owners on start and
whenever the journal changes, runs ONE ``Watcher`` over the inboxes and the journal and routes
its hints to the actors, starts the Supervisor, the cron Scheduler, the background Jobs and the
MCP servers, and offers ``TeamServices`` to the team tools. ``stop`` pauses the team: actors and
MCP servers stopped, jobs killed, every member recorded ``paused`` with its claim, transcript and
unread mail kept, leases freed; the next start brings them back (docs/RELIABILITY.md, "Stop and
resume"). Only the shutdown protocol, ``teamctl stop --force`` or ``fresh`` retires a member.

It only wires its parts together, each owning one concern:

- ``roster``: who is hosted here and what each member is doing (``actors.runtime.roster``);
- ``hosting``: starting and stopping the members' incarnations, the ``AgentHost`` of their
  actors (``actors.runtime.hosting``);
- ``services``: the ``TeamServices`` the team tools call (``actors.runtime.services``);
- ``supervision``: crashes, restarts and the disk-full pause (``actors.runtime.supervision``);
- ``worktrees``: the Worktrees actor and the worktree locks of claims
  (``actors.runtime.services``);
- ``background``: the Scheduler, Jobs and MCP servers (``actors.runtime.background``);
- ``changes``: the watcher and what each change means (``actors.runtime.changes``);
- ``usage``: every model call's usage journaled, and the caps on it (``actors.runtime.usage``);
- ``commits``: the members' usage records, status changes and claims, sharing a journal commit
  when they meet (``actors.runtime.commits``).

Usage::

    with TeamRuntime(repo_root, model=ScriptedModel(script)) as rt:   # start(); stop() on exit
        rt.submit("Refactor the parser")      # user input for the lead
        rt.wait_idle(timeout=60)              # every member idle, no mail, no ready work, no job

``join=NAME`` (``teamctl join``) hosts only the teammate NAME, created when the team has no such
member (or only a stopped one), adopted when no live process hosts it: with its own Worktrees
actor (git writes serialised with every other process's by ``.team/worktrees.lock``), its own
Jobs actor (taking over only NAME's jobs) and no Scheduler (the team runtime's fires NAME's cron
jobs into its inbox). Stopping pauses NAME like any member; joining again continues it.

Starting on a repository whose team exists continues it: every member that has not stopped comes
back with its transcript, its claim (if still current) and its unread mail, and a ``resumed``
event names them; every workflow run in flight when the team stopped is resumed
(``actors.workflows.engine.ResumedRuns``; not with ``resume_workflows=False``, as ``teamctl
workflow`` runs its own). ``fresh=True`` instead retires every teammate no live process hosts (recorded
stopped, its claim released) and starts the lead on a new conversation.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from actors.board.board import acting_as
from actors.board.rules import alive, check_new_member
from actors.errors import TeamError, UnknownMember
from actors.factory import Team, open_team, tidy_mailboxes
from actors.runtime.background import Background
from actors.runtime.changes import Changes
from actors.runtime.commit_service import CommitClient, ServiceHandOff, service_address
from actors.runtime.commits import SharedCommits
from actors.runtime.goal import TeamGoal
from actors.runtime.hosting import RUNTIME, MemberHosting
from actors.runtime.members import (
    MemberBuilder,
    ModelSource,
    ToolsFactory,
    anthropic_models,
    default_tools,
    hooks_for,
    plans_to_host,
)
from actors.runtime.permission_requests import JournalDecisions
from actors.runtime.process import (
    EventSink,
    OnEvent,
    RuntimeBusy,
    Timer,
    hold_lease,
    take_runtime_lock,
    thread_timer,
)
from actors.runtime.roster import Roster
from actors.runtime.services import RuntimeServices, TaskWorktrees
from actors.runtime.stop import retire_all
from actors.runtime.supervision import Supervision
from actors.runtime.usage import CapHit, UsageMeter
from actors.settings import Settings, load_settings
from actors.worktrees.remote import BranchSharing
from mailboxes.errors import MailboxesError
from mailboxes.events import MemberSpawned
from teamctl_base.clock import SystemClock

if TYPE_CHECKING:
    from collections.abc import Callable

    from actors.board.board import Board
    from actors.board.state import TeamState
    from actors.jobs.scheduler import TimerFactory
    from actors.runtime.permission_requests import HumanDesk
    from actors.workflows.engine import ResumedRuns
    from harness.goal import Goal
    from harness.hooks import HookRunner
    from harness.tools.base import Approver
    from mailboxes.fsutil import Fsync
    from mailboxes.ports import Clock as ClockPort
    from mailboxes.ports import Mailbox

__all__ = ["RuntimeBusy", "TeamRuntime"]

log = logging.getLogger(__name__)


class TeamRuntime:
    """One team's runtime in this process. Thread-safe; ``start`` once, ``stop`` once."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        model: ModelSource | None = None,
        tools: ToolsFactory | None = None,
        settings: Settings | None = None,
        hook_runner: HookRunner | None = None,
        on_event: OnEvent | None = None,
        permission_mode: str | None = None,
        lead: str = "lead",
        join: str | None = None,
        join_role: str | None = None,
        fresh: bool = False,
        scheduler: bool = True,
        jobs: bool = True,
        worktrees: bool = True,
        rescan_s: float = 2.0,
        shutdown_timeout_s: float = 60.0,
        max_restarts: int = 3,
        fsync_transcripts: bool = True,
        idle_timer: Timer | None = thread_timer,
        lead_approver: Approver | None = None,
        human: HumanDesk | None = None,
        clock: ClockPort | None = None,
        cron_clock: ClockPort | None = None,
        cron_timer: TimerFactory | None = None,
        disk_timer: Timer = thread_timer,
        disk_grace_s: float | None = None,
        fsync: Fsync | None = None,
        goal: Goal | None = None,
        resume_workflows: bool = True,
    ) -> None:
        self.team: Team = open_team(root, actor="runtime", fsync=fsync)
        try:
            self.settings = settings or load_settings(self.team.repo.settings_path)
        except BaseException:
            self.team.close()
            raise
        team, settings = self.team, self.settings
        self._lead = lead
        self._join = join
        self._join_role = join_role
        self._fresh = fresh
        self._goal = goal
        self._resume_workflows = resume_workflows and join is None and not fresh
        self.workflows: ResumedRuns | None = None
        """The workflow runs in flight when the team last stopped, resumed here (docs/
        ARCHITECTURE.md, "Workflows")."""
        self._events = events_sink = EventSink(on_event)
        self._want_scheduler = scheduler and join is None
        self._want_jobs = jobs
        self._want_worktrees = worktrees
        self._shutdown_timeout_s = shutdown_timeout_s
        self._stack = ExitStack()
        events = events_sink
        self.roster = Roster(lead)

        def cap_reached(hit: CapHit) -> None:
            events.emit(hit.as_event())
            self.roster.notify()  # a headless run waiting for the team ends at once

        # One ``SharedCommits`` for the usage records, status changes and claims of every member
        # hosted here: the ones that meet share a journal commit.
        # A usage record rides on its agent's next write (``SharedCommits.defer``).
        self.commits = SharedCommits(team.board, timer=thread_timer)
        self.commit_service: ServiceHandOff | None = None
        """The host's commit service, when this runtime holds it (``_share_commits``): served by
        a process of its own once another process of the host connects."""
        self.usage = UsageMeter(team.board, settings.team, on_hit=cap_reached, commits=self.commits)
        self.decisions = JournalDecisions(team.journal, None)
        self.worktrees = TaskWorktrees(
            team.repo.root,
            team.board,
            settings,
            lock_path=team.repo.team_dir / "worktrees.lock",
            sharing=BranchSharing.for_team(team.repo.settings_path, settings),
        )
        self.background = Background(
            team,
            settings,
            clock=clock or SystemClock(),
            cron_clock=cron_clock,
            cron_timer=cron_timer,
        )
        self.goal = TeamGoal(team.board, lead=lead, jobs_running=self._jobs_running)
        """The lead's goal (docs/ARCHITECTURE.md, "Goals"): its records and its status."""
        self.goal_pursued: Goal | None = None
        """The goal this run pursues from its start (given, or carried on from the journal)."""
        self.hosting = MemberHosting(
            team,
            settings,
            roster=self.roster,
            events=events,
            worktrees=self.worktrees,
            background=self.background,
            lead=lead,
            idle_timer=idle_timer,
            usage=self.usage,
            commits=self.commits,
        )
        self.services = RuntimeServices(
            team,
            settings,
            members=self.hosting,
            roster=self.roster,
            worktrees=self.worktrees,
            background=self.background,
            lead=lead,
            idle_timer=idle_timer,
            shutdown_timeout_s=shutdown_timeout_s,
            commits=self.commits,
        )
        self.supervision = Supervision(
            self.hosting,
            self.roster,
            board=team.board,
            mailbox=team.mailbox,
            events=events,
            lead=lead,
            policy=settings.team.restart,
            max_restarts=max_restarts,
            team_dir=team.repo.team_dir,
            fsync=fsync,
            disk_timer=disk_timer,
            disk_grace_s=disk_grace_s,
        )
        builder = MemberBuilder(
            root=team.repo.root,
            settings=settings,
            model=model or anthropic_models(settings.models.fallback, on_wait=events.emit),
            tools=tools or default_tools,
            services=self.services,
            background=self.background,
            decisions=self.decisions,
            hook_runner=hook_runner if hook_runner is not None else hooks_for(settings),
            permission_mode=permission_mode,
            lead=lead,
            lead_approver=lead_approver,
            fsync_transcripts=fsync_transcripts,
            usage=self.usage,
            desk=human,  # how a person answers asks (``teamctl run``)
            goal=self.goal,
            # JetStream: each transcript line is also copied to the team's stream.
            transcript_sink=getattr(team.transcripts, "sink", None),
        )
        self.hosting.connect(builder, self.supervision)
        self.changes = Changes(
            team,
            self.hosting,
            self.roster,
            events=events,
            decisions=self.decisions,
            rescan_s=rescan_s,
        )

    @property
    def repo_root(self) -> Path:
        return self.team.repo.root

    @property
    def board(self) -> Board:
        return self.team.board

    @property
    def mailbox(self) -> Mailbox:
        return self.team.mailbox

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> TeamRuntime:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> TeamRuntime:
        """Lock, reap, start the service actors and every member to bring back."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        team = self.team
        if self._join is None:
            self._stack.callback(take_runtime_lock(team.repo.team_dir / "runtime.lock"))
        state = team.board.refresh()
        if state.name is None:
            raise TeamError("no team here: run `teamctl init` first")
        if self._join is None and team.liveness.is_alive(self._lead):
            # The lead's lease is held: a runtime of another checkout (on a backend that other
            # hosts join, docs/SCALE-OUT.md) runs this team. Refused before anything is recorded.
            raise RuntimeBusy(
                f"another teamctl runtime runs team {state.name} (it holds the {self._lead}'s "
                "lease, perhaps on another host); stop it first, or host one teammate here with "
                "`teamctl join NAME`"
            )
        if self._fresh:
            state = retire_all(team, lead=self._lead)
        self.supervision.start()
        leases: dict[str, ExitStack] = {}
        if self._join is not None:
            leases[self._join] = self._enroll(self._join, state)
            state = team.board.refresh()
        plans = plans_to_host(
            state,
            self.settings,
            lead=self._lead,
            join=self._join,
            hosted_elsewhere=team.liveness.is_alive,
        )
        for plan in plans:
            if plan.name not in leases:
                leases[plan.name] = hold_lease(team.liveness, plan.name)
        self._share_commits()
        team.board.reap_dead_owners()
        if self._join is None:  # orphaned tmp/ files, cur/ retention (docs/RELIABILITY.md)
            tidy_mailboxes(team, self.settings)
        if self._want_jobs:
            hosted = set(leases)
            self.background.start_jobs(
                adopt=lambda owner: owner in hosted or not alive(team.liveness, owner)
            )
        if self._want_worktrees:
            self.worktrees.start(reconcile=self._join is None)
        self.background.open_mcp()
        team.mailbox.ensure_inbox(self._lead)
        self.changes.start(seen_seq=state.seq)
        if self._join is None:  # before the lead is built: its judge is restored from these
            self.goal.load(team.journal)
            self.goal_pursued = self.goal.start(self._goal, fresh=self._fresh)
        back = [_resumed(state, p.name, self._unread(p.name)) for p in plans]
        back = [entry for entry in back if entry is not None]
        for plan in plans:
            self.hosting.resume(plan, leases[plan.name], state, fresh=self._fresh)
        if back:
            self._events.emit({"type": "resumed", "members": back})
        if self._want_scheduler:
            self.background.start_scheduler()
        if self._resume_workflows:
            self._resume_runs()

    def _resume_runs(self) -> None:
        """Resume the workflow runs started and not finished (their process died)."""
        from actors.workflows.engine import ResumedRuns
        from actors.workflows.record import fold_runs

        runs = fold_runs(self.team.journal.read_from(1))
        if any(r.status == "running" for r in runs.values()):
            self.workflows = ResumedRuns(self.services, on_done=self.roster.notify)
            self.workflows.start(runs)

    def _enroll(self, name: str, state: TeamState) -> ExitStack:
        """``join`` mode: take ``name``'s lease, then make it a teammate if the team has none
        of that name (or only a stopped one); an existing one is adopted as it is. Returns the
        lease; raises when ``name`` may not join (the lead, a person, a live host, a bad name,
        a role that differs, the team full)."""
        member = state.members.get(name)
        if name == self._lead or (
            member is not None and (member.kind != "agent" or member.role == "lead")
        ):
            raise UnknownMember(name)
        if member is None:
            check_new_member(state, name, lead=self._lead)  # again under the journal lock
        lease = hold_lease(self.team.liveness, name)
        try:
            if member is None or member.status == "stopped":
                alive_agents = [
                    m for m in state.members.values() if m.kind == "agent" and m.status != "stopped"
                ]
                limit = self.settings.team.max_teammates
                if len(alive_agents) - 1 >= limit:
                    raise TeamError(f"the team already has {limit} teammates")
                body = MemberSpawned(
                    name=name,
                    role=self._join_role or "general",
                    model=self.settings.models.teammate,
                )
                with acting_as("cli"):
                    self.team.board.add_member(body, lead=self._lead)
            elif self._join_role is not None and member.role != self._join_role:
                raise TeamError(
                    f"{name} is on the team with role {member.role!r}, not {self._join_role!r}"
                )
            self.team.mailbox.ensure_inbox(name)
        except BaseException:
            lease.close()
            raise
        return lease

    def _unread(self, name: str) -> int:
        try:
            return self.mailbox.unread(name)
        except MailboxesError:  # no inbox yet: nothing unread
            return 0

    def _jobs_running(self, owner: str) -> int:
        jobs = self.background.jobs
        if jobs is None:
            return 0
        return sum(1 for j in jobs.list() if j.owner == owner and j.status == "running")

    def set_goal(self, goal: Goal) -> None:
        """Arm the lead's goal through its actor (``/goal TEXT``); an idle lead starts on it."""
        from actors.runtime.goal import goal_prompt
        from actors.runtime.lead import SetGoal

        self.hosting.tell(self._lead, SetGoal(goal, goal_prompt(goal)))

    def clear_goal(self) -> None:
        """Clear the lead's goal through its actor (``/goal clear``)."""
        from actors.runtime.lead import ClearGoal

        self.hosting.tell(self._lead, ClearGoal())

    def submit(self, text: str) -> None:
        """User input for the lead (starts a turn, or joins the running one)."""
        self.hosting.submit(text)

    def force_stop(self, name: str) -> bool:
        """``teamctl stop --force``: stop a hosted member now (False if not hosted here)."""
        return self.hosting.stop_member(name, "forced", timeout_s=1.0)

    def failures(self) -> dict[str, str]:
        """The members that failed for good in this run (``name -> error``): no restart left,
        or one that cannot help (a rejected API key)."""
        return self.supervision.failed_for_good()

    def out_of_space(self) -> str | None:
        """Why this run gives up on a full disk (degraded for ``disk_grace_s``; a headless run
        then stops, pausing the team), or None."""
        return self.supervision.out_of_space()

    def cap_reached(self) -> CapHit | None:
        """The first cap of the ``team`` settings an agent reached in this run (it then starts
        no model call; a headless run stops, the team paused), or None."""
        return self.usage.reached()

    def _share_commits(self) -> None:
        """Hold the host's commit service (handed to a process of its own when another process
        connects), or use the one another process of this team holds
        (``actors.runtime.commit_service``; file backend, ``team.commit_service``)."""
        journal = self.team.journal_path
        if not self.settings.team.commit_service or journal is None:
            return
        try:
            address = service_address(journal)
        except OSError as exc:
            log.warning("no commit service for this team: %s", exc)
            return
        service = ServiceHandOff.for_team(address, self.team.repo.root, fallback=self.commits.serve)
        if service.start():
            self.commit_service = service
            self._stack.callback(service.stop)
        else:
            self.commits.remote = CommitClient(address)
            self._stack.callback(self.commits.remote.close)

    def stop(self, reason: str = "runtime_exit") -> None:
        """Stop everything this runtime started (idempotent). Every member still hosted is
        paused with ``reason`` (resumable: claim, transcript and mail kept), not retired."""
        if not self.roster.begin_stop():
            return
        if self.workflows is not None:  # first: they create tasks and spawn workers
            self.workflows.stop()
        self.supervision.close()
        self.changes.stop()
        names = self.roster.live_names()  # teammates first: their last notes reach the lead
        self.decisions.refuse_all(RUNTIME, "the team is stopping")
        self.hosting.interrupt(names)  # all first, so that they wind down in parallel
        self.background.kill_jobs()
        with contextlib.suppress(Exception):  # one journal commit for all (docs/RELIABILITY.md)
            self.hosting.pause_members(names, reason, timeout_s=self._shutdown_timeout_s)
        self.hosting.finish_stops(timeout_s=self._shutdown_timeout_s)
        with contextlib.suppress(Exception):  # usage records no write carried yet
            self.commits.flush()
        with contextlib.suppress(Exception):
            self.worktrees.stop()
        self.background.stop()
        self.background.close_mcp()  # after the members: no MCP call is running any more
        self.supervision.stop()
        self._stack.close()
        self.team.close()
        self.roster.notify()

    # -- idleness ------------------------------------------------------------------------------

    def is_idle(self) -> bool:
        """Every hosted member idle (no turn, no unread mail, nothing being restarted), no ready
        task a hosted teammate could take, no running job and no pending one-shot cron."""
        # The checks below are not one atomic read: a claim or a finished task between them
        # could look idle. So the same flags and the journal seq are read again at the end, and
        # any change means "not idle yet" (the waiter is notified of it and checks again).
        if self.roster.at_rest() is None:  # a member at work: no board read (no lock) needed
            return False
        before = self._idle_marker()
        return self._idle_checks() and self._idle_marker() == before

    def _idle_marker(self) -> tuple[object, ...]:
        return (self.board.refresh().seq, self.roster.flags())

    def _idle_checks(self) -> bool:
        if self.workflows is not None and self.workflows.busy():
            return False  # a resumed workflow run still going: more steps may come
        if self.supervision.busy() or self.supervision.paused():
            return False
        at_rest = self.roster.at_rest()
        if at_rest is None:
            return False
        names, _roles = at_rest
        for name in names:
            if self.mailbox.unread(name):
                return False
        state = self.board.refresh()
        for task in state.ready():  # one its teammate gave up on waits for another taker
            if self.roster.could_take(task.id, task.role):
                return False
        if self._joined_elsewhere_busy(state):
            return False
        return not self.background.busy()

    def _joined_elsewhere_busy(self, state: TeamState) -> bool:
        """A teammate that another live process hosts (``teamctl join``, perhaps on another host,
        docs/SCALE-OUT.md) holds a task or could take a ready one: the team still works."""
        ready = state.ready()
        held = {t.owner for t in state.tasks.values() if t.status == "in_progress" and t.owner}
        if not ready and not held:
            return False
        for m in state.members.values():
            if m.kind != "agent" or m.status == "stopped" or not self.roster.gone(m.name):
                continue
            wanted = m.name in held or any(t.role in (None, m.role) for t in ready)
            if wanted and alive(self.team.liveness, m.name):
                return True
        return False

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until ``is_idle`` (True) or the timeout (False)."""
        return self.wait_until(self.is_idle, timeout)

    def wait_until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until ``predicate()`` holds, re-checked on every status change or watcher hint."""
        return self.roster.wait_until(predicate, timeout)


def _resumed(state: TeamState, name: str, unread: int) -> dict[str, object] | None:
    """How a member brought back is named in the ``resumed`` event (None: a new member)."""
    member = state.members.get(name)
    if member is None:
        return None
    held = state.holding(name)
    return {
        "name": name,
        "was": member.status,
        "task_id": held.id if held is not None else None,
        "unread": unread,
    }
