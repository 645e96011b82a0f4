"""The service actors a runtime runs next to its members: the cron Scheduler, the background Jobs
(and the harness ``JobRunner`` over them) and the MCP servers.

Each is optional (no ``.mcp.json`` means no MCP manager) and each is started by the runtime at
its point of the start sequence. ``stop`` ends the actors; ``close_mcp`` stops the MCP server
processes (after the members: no MCP call runs).

``teamctl join`` runs a Jobs actor of its own for the teammate it hosts (``start_jobs(adopt=…)``
takes over only that member's jobs at start-up, so a runtime never re-attaches or kills the jobs
of a member another live process hosts) and no Scheduler: the team runtime's Scheduler fires
every cron job, and a firing reaches its owner's inbox, which the joined process watches.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from teamctl_base.clock import UuidIds

if TYPE_CHECKING:
    from collections.abc import Callable

    from actors.factory import Team
    from actors.jobs.actor import JobsHandle, JobsRunner
    from actors.jobs.scheduler import SchedulerHandle, TimerFactory
    from actors.settings import Settings
    from harness.mcp.client import McpManager
    from mailboxes.ports import Clock

__all__ = ["Background"]

log = logging.getLogger(__name__)


class Background:
    """The Scheduler, Jobs and MCP manager of one runtime (each None until started)."""

    def __init__(
        self,
        team: Team,
        settings: Settings,
        *,
        clock: Clock,
        cron_clock: Clock | None = None,
        cron_timer: TimerFactory | None = None,
    ) -> None:
        self._team = team
        self._settings = settings
        self._clock = clock
        self._cron_clock = cron_clock or clock
        self._cron_timer = cron_timer
        self.scheduler: SchedulerHandle | None = None
        self.jobs: JobsHandle | None = None
        self.job_runner: JobsRunner | None = None
        self.mcp: McpManager | None = None

    def start_jobs(self, adopt: Callable[[str], bool] | None = None) -> None:
        """The Jobs actor, its background ``bash`` sandboxed like the foreground one (not on a
        platform without the jobs machinery). ``adopt(owner)``: whose unfinished jobs its
        start-up recovery takes over (default: everyone's)."""
        try:
            from actors.jobs.actor import JobsHandle, JobsRunner
        except ImportError:
            return
        from actors.jobs.scheduler import MailboxDelivery
        from harness.shell.sandbox import Sandbox

        self.jobs = JobsHandle.start(
            self._team.journal,
            MailboxDelivery(self._team.mailbox),
            jobs_dir=self._team.repo.team_dir / "jobs",
            clock=self._clock,
            ids=UuidIds(),
            sandbox=Sandbox(self._settings.bash_sandbox),
            root=self._team.repo.root,
            adopt=adopt,
            command_env=self._settings.child_env(),
        )
        self.job_runner = JobsRunner(self.jobs)

    def start_scheduler(self) -> None:
        from actors.jobs.scheduler import MailboxDelivery, SchedulerHandle, thread_timer

        self.scheduler = SchedulerHandle.start(
            self._team.journal,
            MailboxDelivery(self._team.mailbox),
            clock=self._cron_clock,
            ids=UuidIds(),
            timer=self._cron_timer or thread_timer,
        )

    def open_mcp(self) -> None:
        """The runtime's one MCP manager, shared by its agents (``TeamError`` for a
        configuration that does not parse)."""
        from actors.runtime.members import open_team_mcp

        self.mcp = open_team_mcp(self._team.repo.root, self._settings)

    def busy(self) -> bool:
        """A job runs or a one-shot cron job is still to fire (the team is not idle)."""
        if self.jobs is not None and any(j.status == "running" for j in self.jobs.list()):
            return True
        return self.scheduler is not None and any(not c.recurring for c in self.scheduler.list())

    def kill_jobs(self) -> None:
        """Kill every running job (the runtime stops)."""
        if self.jobs is not None:
            with contextlib.suppress(Exception):
                self.jobs.stop_all()

    def kill_jobs_of(self, name: str) -> None:
        """Kill ``name``'s running jobs (a member stopped by the runtime)."""
        if self.jobs is None:
            return
        try:
            self.jobs.stop_jobs_of(name)
        except Exception:
            log.exception("killing the background jobs of %s failed", name)

    def stop(self) -> None:
        """Stop the Scheduler and the Jobs actor (idempotent)."""
        for service in (self.scheduler, self.jobs):
            if service is not None:
                with contextlib.suppress(Exception):
                    service.stop()

    def close_mcp(self) -> None:
        if self.mcp is not None:
            self.mcp.close()
