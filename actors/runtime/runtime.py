"""``TeamRuntime``: the process that runs a team (DESIGN §7).

It opens the team, takes ``.team/runtime.lock`` (a second runtime on the repository refuses; ``join``
mode hosts one existing teammate next to it instead), holds each hosted member's liveness lease
(``.team/members/<agent>.lock``) for the member's lifetime, reaps claims of dead owners on start and
whenever the journal changes, runs ONE ``FileWatcher`` over the inboxes and the journal and routes
its hints to the actors, starts the Supervisor, the cron Scheduler, the background Jobs and the
MCP servers, and implements ``TeamServices`` for the team tools. ``stop`` ends everything: actors
and MCP servers stopped, jobs killed, claims released, ``member.stopped`` journaled, leases freed.

Usage::

    with TeamRuntime(repo_root, model=ScriptedModel(script)) as rt:   # start(); stop() on exit
        rt.submit("Refactor the parser")      # user input for the lead
        rt.wait_idle(timeout=60)              # every member idle, no mail, no ready work, no job

Starting on a repository whose team exists continues it: every member that has not stopped comes
back with its transcript, its claim (if still current) and its unread mail.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pykka

from actors.errors import TeamError, UnknownMember
from actors.factory import Team, open_team
from actors.messages import UserInput
from actors.runtime.members import MemberKind, MemberPlan, anthropic_models, default_tools
from actors.runtime.process import Clock, Ids, take_runtime_lock, thread_timer
from actors.runtime.services import RuntimeBusy, Services
from actors.runtime.stop import FORCE_PREFIX
from actors.runtime.supervisor import Supervisor
from actors.settings import Settings, load_settings
from mailboxes.events import MemberSpawned, MemberStatusChanged

__all__ = ["RuntimeBusy", "TeamRuntime"]

log = logging.getLogger(__name__)


class TeamRuntime(Services):
    """One team's runtime in this process. Thread-safe; ``start`` once, ``stop`` once."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        model: Any = None,
        tools: Callable[..., Any] | None = None,
        settings: Settings | None = None,
        hook_runner: Any = None,
        on_event: Callable[[Mapping[str, Any]], None] | None = None,
        permission_mode: str | None = None,
        lead: str = "lead",
        join: str | None = None,
        scheduler: bool = True,
        jobs: bool = True,
        worktrees: bool = True,
        rescan_s: float = 2.0,
        shutdown_timeout_s: float = 60.0,
        max_restarts: int = 3,
        fsync_transcripts: bool = True,
        idle_timer: Callable[..., Any] | None = thread_timer,
        lead_approver: Any = None,
        clock: Any = None,
        cron_timer: Any = None,
        disk_timer: Callable[..., Any] = thread_timer,
        fsync: Callable[[int], None] | None = None,
    ) -> None:
        self._init_hosting()
        self.team: Team = open_team(root, actor="runtime", fsync=fsync)
        try:
            self.settings = settings or load_settings(self.team.repo.settings_path)
        except BaseException:
            self.team.close()
            raise
        self.model_source = model or anthropic_models(self.settings.models.fallback)
        self.tools_factory = tools or default_tools
        if hook_runner is None:
            from actors.runtime.members import hooks_for

            hook_runner = hooks_for(self.settings)
        self.hook_runner = hook_runner
        self.on_event = on_event
        self.permission_mode = permission_mode
        self.lead_name = lead
        self.join_name = join
        self.fsync_transcripts = fsync_transcripts
        self.idle_timer = idle_timer
        self.shutdown_timeout_s = shutdown_timeout_s
        self.max_restarts = max_restarts
        self.rescan_s = rescan_s
        self._want_scheduler = scheduler and join is None
        self._want_jobs = jobs and join is None
        self.supervisor: pykka.ActorRef[Any] | None = None
        self.scheduler: Any = None
        self.jobs: Any = None
        self.job_runner = None
        self.worktrees: Any = None
        self._want_worktrees = worktrees and join is None
        self._watcher: Any = None
        from actors.runtime.permission_requests import JournalDecisions

        self.decisions = JournalDecisions(self.team.journal, ())
        self.lead_approver = lead_approver
        self.clock = clock or Clock()
        self._cron_timer = cron_timer
        self._init_degraded(fsync, disk_timer)  # the disk-full mode (actors.runtime.degraded)
        self._stack = ExitStack()
        self._seen_seq = 0
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def repo_root(self) -> Path:
        return self.team.repo.root

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
        if self.join_name is None:
            self._take_runtime_lock()
        state = self.board.refresh()
        if state.name is None:
            raise TeamError("no team here: run `teamctl init` first")
        self._seen_seq = state.seq
        self.supervisor = Supervisor.start(
            self, policy=self.settings.team.restart, max_restarts=self.max_restarts
        )
        plans = self._members_to_host()
        leases = {p.name: self._lease(p.name) for p in plans}
        team.board.reap_dead_owners()
        if self._want_jobs:
            self._start_jobs()
        if self._want_worktrees:
            self._start_worktrees()
        from actors.runtime.members import open_team_mcp
        from mailboxes.watch import FileWatcher

        self.mcp = open_team_mcp(self.repo_root, self.settings)  # one per runtime, shared
        team.mailbox.ensure_inbox(self.lead_name)
        self._watcher = FileWatcher(
            [team.repo.team_dir / "mailboxes", team.repo.team_dir / "journal.jsonl"],
            self._on_change,
            rescan_s=self.rescan_s,
        )
        self._watcher.start()
        for plan in plans:
            resume = self._has_transcript(plan.name)
            if plan.kind == "lead" and plan.name not in state.members:
                self._journal(MemberSpawned(name=plan.name, role="lead", model=plan.model))
            elif plan.name in state.members and state.members[plan.name].status != "starting":
                self._journal(MemberStatusChanged(name=plan.name, status="starting"), plan.name)
            self.host_member(plan, leases[plan.name], resume=resume)
        if self._want_scheduler:
            self._start_scheduler()
        self._started = True

    def _take_runtime_lock(self) -> None:
        self._stack.callback(take_runtime_lock(self.team.repo.team_dir / "runtime.lock"))

    def _has_transcript(self, name: str) -> bool:
        path = self.team.repo.team_dir / "transcripts" / f"{name}.jsonl"
        return path.exists() and path.stat().st_size > 0

    def _members_to_host(self) -> list[MemberPlan]:
        state = self.board.state
        models = self.settings.models
        if self.join_name is not None:
            member = state.members.get(self.join_name)
            if member is None or member.kind != "agent" or member.role == "lead":
                raise UnknownMember(self.join_name)
            if member.status == "stopped":
                raise TeamError(f"{self.join_name} has stopped; the lead can spawn it again")
            return [self._plan_of(self.join_name, "teammate")]
        plans = [MemberPlan(name=self.lead_name, kind="lead", model=models.lead)]
        for m in state.members.values():
            if m.kind != "agent" or m.name == self.lead_name or m.status == "stopped":
                continue
            if self.team.liveness.is_alive(m.name):
                continue  # hosted by another process (`teamctl join`)
            plans.append(self._plan_of(m.name, "teammate"))
        return plans

    def _plan_of(self, name: str, kind: MemberKind) -> MemberPlan:
        m = self.board.state.members[name]
        return MemberPlan(
            name=name,
            kind=kind,
            model=m.model or self.settings.models.teammate,
            role=m.role or None,
            tools=m.tools,
            prompt=m.prompt,
        )

    def _start_scheduler(self) -> None:
        from actors.jobs.scheduler import MaildirDelivery, SchedulerHandle

        deliver = MaildirDelivery(self.team.repo.team_dir / "mailboxes")
        extra = {"timer": self._cron_timer} if self._cron_timer is not None else {}
        self.scheduler = SchedulerHandle.start(
            self.team.journal, deliver, clock=self.clock, ids=Ids(), **extra
        )

    def _start_jobs(self) -> None:
        try:
            jobs = importlib.import_module("actors.jobs.actor")
        except ImportError:
            return
        from actors.jobs.scheduler import MaildirDelivery
        from harness.shell.sandbox import Sandbox

        deliver = MaildirDelivery(self.team.repo.team_dir / "mailboxes")
        self.jobs = jobs.JobsHandle.start(
            self.team.journal,
            deliver,
            jobs_dir=self.team.repo.team_dir / "jobs",
            clock=self.clock,
            ids=Ids(),
            sandbox=Sandbox(self.settings.sandbox),  # background bash: the foreground's sandbox
            root=self.repo_root,
        )
        self.job_runner = jobs.JobsRunner(self.jobs)

    def _start_worktrees(self) -> None:
        from actors.worktrees.actor import WorktreesHandle

        try:
            self.worktrees = WorktreesHandle.start(self.repo_root, self.board)
            for drift in self.worktrees.reconcile().drifts:
                log.warning("worktree drift: %s", drift)
        except Exception:
            log.exception("worktrees unavailable: tasks bound to worktrees run in the checkout")

    def submit(self, text: str) -> None:
        """User input for the lead (starts a turn, or joins the running one)."""
        with self._lock:
            hosted = self._hosted.get(self.lead_name)
            if hosted is None or hosted.ref is None:
                raise TeamError("the lead is not hosted by this runtime")
            hosted.inputs += 1  # until the lead has taken it: the team is not idle meanwhile
            ref = hosted.ref
        try:
            ref.tell(UserInput(text=text))
        except pykka.ActorDeadError:  # being restarted: keep it durably for the next incarnation
            self.input_taken(self.lead_name)
            self.send("user", self.lead_name, "message", {"text": text})

    def stop(self, reason: str = "runtime_exit") -> None:
        """Stop everything this runtime started (idempotent)."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        self.disk.close()
        if self._watcher is not None:
            self._watcher.stop()
        with self._lock:  # teammates first: their last idle notifications reach the lead
            names = [n for n, h in self._hosted.items() if not h.stopped]
            names.sort(key=lambda n: n == self.lead_name)
        self._deny_waiting_permissions()
        for name in names:  # interrupt all first so that they wind down in parallel
            hosted = self._hosted[name]
            if hosted.agent is not None:
                hosted.agent.interrupt()
        if self.jobs is not None:
            with contextlib.suppress(Exception):
                self.jobs.stop_all()
        for name in names:
            with contextlib.suppress(Exception):
                self.stop_member(name, reason, timeout_s=self.shutdown_timeout_s)
        for service in (self.scheduler, self.jobs, self.worktrees):
            if service is not None:
                with contextlib.suppress(Exception):
                    service.stop()
        if self.mcp is not None:  # after the members: no MCP call is running any more
            self.mcp.close()
        if self.supervisor is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                self.supervisor.stop(timeout=10)
        self._stack.close()
        self.team.close()
        self._notify()

    # -- the watcher ---------------------------------------------------------------------------

    def _on_change(self, paths: set[Path]) -> None:
        if self._stopping:
            return
        tick = not paths
        journal = tick
        for path in paths:
            if path.name == "journal.jsonl":
                journal = True
                continue
            if path.parent.name == "new":
                agent = self.mailbox.agent_for_path(path)
                if agent is not None:
                    self.wake(agent)
        if tick:  # the safety net: wake only who has unread mail (a listdir each, no parsing)
            for name in list(self._hosted):
                if os.listdir(self.mailbox.inbox(name) / "new"):
                    self.wake(name, "tick")
        if journal:
            self._on_journal(tick=tick)
        self._notify()

    def _on_journal(self, *, tick: bool = False) -> None:
        board = self.board
        state = board.refresh()
        changed = state.seq != self._seen_seq or not self._seen_seq
        if not changed and not tick:
            return
        for event in self.team.journal.read_from(self._seen_seq + 1):
            rid = str(event.data.get("request_id", ""))
            if event.type == "shutdown.requested" and rid.startswith(FORCE_PREFIX):
                self.member_done(str(event.data.get("name")), "forced")
            if self.on_event is not None:
                self.emit(
                    {
                        "type": "team_event",
                        "seq": event.seq,
                        "event": event.type,
                        "actor": event.actor,
                        "data": event.data,
                    }
                )
        self._seen_seq = state.seq
        if changed:
            self.decisions.scan()
        liveness = self.team.liveness  # a process hosting a member may have died (SIGKILL)
        if any(
            not state.tasks[tid].human and not liveness.is_alive(owner)
            for owner, tid in state.holdings.items()
        ):
            board.reap_dead_owners()  # a journal change: the watcher comes back with it
        elif changed:
            self.board_changed()

    # -- idleness ------------------------------------------------------------------------------

    def is_idle(self) -> bool:
        """Every hosted member idle (no turn, no unread mail, nothing being restarted), no ready
        task a hosted teammate could take, no running job and no pending one-shot cron."""
        # The checks below are not one atomic read: a claim or a finished task between them
        # could look idle. So the same flags and the journal seq are read again at the end, and
        # any change means "not idle yet" (the waiter is notified of it and checks again).
        before = self._idle_marker()
        return self._idle_checks() and self._idle_marker() == before

    def _idle_marker(self) -> tuple[object, ...]:
        with self._lock:
            flags = tuple(
                (h.busy, h.starting, h.inputs, h.stalled, h.stopped) for h in self._hosted.values()
            )
        return (self.board.refresh().seq, flags)

    def _idle_checks(self) -> bool:
        with self._lock:
            live = [h for h in self._hosted.values() if not h.stopped]
            busy = any(h.busy or h.starting or h.inputs or h.stalled for h in live)
            if self._supervising or self.paused() or busy:
                return False
            names = [h.plan.name for h in live if h.ref is not None]  # crashed for good: skip
            roles = [h.plan.role for h in live if h.plan.kind == "teammate" and h.ref is not None]
        for name in names:
            if self.mailbox.counts(name)[0]:
                return False
        state = self.board.refresh()
        for task in state.ready():
            if any(task.role is None or task.role == role for role in roles):
                return False
        if self.jobs is not None and any(j.status == "running" for j in self.jobs.list()):
            return False
        return not (
            self.scheduler is not None and any(not c.recurring for c in self.scheduler.list())
        )

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until ``is_idle`` (True) or the timeout (False)."""
        return self.wait_until(self.is_idle, timeout)

    def wait_until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until ``predicate()`` holds, re-checked on every status change or watcher hint."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                if predicate():
                    return True
                if self._stopping:
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                # The bound only guards against a missed notify; every change notifies.
                self._changed.wait(timeout=min(left, 1.0) if left is not None else 1.0)
