"""Read a team's ``Snapshot`` from its repository, incrementally and without getting in the way.

A ``LiveSource`` keeps the folds it needs (team state, jobs, crons, pending permissions) and on
each ``load`` folds only the journal lines appended since the last one. Locks: opening the team
takes the journal's flock once, briefly, as every ``teamctl`` command does (to index the file and
repair a torn tail left by a dead writer); after that nothing here takes a lock a running runtime
waits for: journal reads are lock-free, inbox counts are directory listings, a job's process is looked up
in ``/proc``, and liveness is a non-blocking shared probe of each member's lease. ``Team.board`` is never touched: building it
repairs projections, which is the runtime's business, not a viewer's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import tzinfo
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from actors.board.fold import fold_all
from actors.board.state import EMPTY, TeamState
from actors.jobs.cron import EMPTY_TABLE, CronTable, fold_crons, local_zone, views
from actors.jobs.proc import same_process
from actors.jobs.table import JobTable, fold_jobs, job_views
from actors.live.snapshot import (
    NO_PERMISSIONS,
    NO_WORKFLOWS,
    PermissionTable,
    Snapshot,
    WorkflowTable,
    build_snapshot,
    fold_workflows,
)
from actors.live.snapshot import fold_permissions as _fold_permissions

if TYPE_CHECKING:
    from actors.factory import Team

_NO_JOBS: JobTable = MappingProxyType({})


class LiveSource:
    """Snapshots of one open team; ``load`` is thread-safe. Owns ``team`` when ``owns`` (the
    default of ``open``): ``close`` closes it."""

    def __init__(
        self,
        team: Team,
        *,
        now: Callable[[], float] = time.time,
        local: tzinfo | None = None,
        owns: bool = False,
    ) -> None:
        self.team = team
        self._now = now
        self._local = local or local_zone()
        self._owns = owns
        self._lock = threading.Lock()
        self._state: TeamState = EMPTY
        self._jobs: JobTable = _NO_JOBS
        self._crons: CronTable = EMPTY_TABLE
        self._permissions: PermissionTable = NO_PERMISSIONS
        self._workflows: WorkflowTable = NO_WORKFLOWS

    @classmethod
    def open(cls, start: Path | None = None) -> LiveSource:
        """The source for the team of the repository around ``start`` (default: cwd)."""
        from actors.factory import open_team

        return cls(open_team(start), owns=True)

    @property
    def paths(self) -> tuple[Path, ...]:
        """What to watch for changes: the journal and the mailboxes folder, those that are files
        (none on JetStream: the view then refreshes at the rescan tick)."""
        return tuple(p for p in (self.team.journal_path, self.team.mailbox_path) if p is not None)

    @property
    def state(self) -> TeamState:
        """The team state as of the last ``load``."""
        return self._state

    def load(self) -> Snapshot:
        """A snapshot of the team now (folds only what was appended since the last call)."""
        with self._lock:
            events = list(self.team.journal.read_from(self._state.seq + 1))
            if events:
                self._state = fold_all(self._state, events)
                self._jobs = fold_jobs(self._jobs, events)
                self._crons = fold_crons(self._crons, events)
                self._permissions = _fold_permissions(self._permissions, events)
                self._workflows = fold_workflows(self._workflows, events)
            state = self._state
            mailbox = self.team.mailbox
            inboxes = {agent: mailbox.counts(agent) for agent in mailbox.agents()}
            liveness = self.team.liveness
            alive = frozenset(
                m.name
                for m in state.members.values()
                if m.kind == "agent" and liveness.is_alive(m.name)
            )
            return build_snapshot(
                state,
                inboxes=inboxes,
                jobs=job_views(self._jobs, self.team.repo.team_dir / "jobs", limit=10_000),
                crons=views(self._crons, local=self._local),
                alive=alive,
                gone_jobs=_gone_jobs(self._jobs),
                permissions=self._permissions,
                workflows=self._workflows,
                taken_at=self._now(),
            )

    def close(self) -> None:
        if self._owns:
            self.team.close()

    def __enter__(self) -> LiveSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _gone_jobs(table: JobTable) -> frozenset[str]:
    """Running jobs whose process (pid and start time, read from ``/proc``) no longer exists."""
    return frozenset(
        r.job_id
        for r in table.values()
        if r.status == "running"
        and r.pid is not None
        and r.start_time is not None
        and not same_process(r.pid, r.start_time)
    )


def load_snapshot(start: Path | None = None) -> Snapshot:
    """One snapshot of the team around ``start`` (default: cwd)."""
    with LiveSource.open(start) as source:
        return source.load()
