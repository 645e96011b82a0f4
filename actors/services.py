"""The seam between the team runtime and the team tools.

The runtime (``actors.runtime.services.RuntimeServices``) implements ``TeamServices``; the team
tools (``actors.tools.toolsets``) and protocols (``actors.protocols``) use only this. Every method
is safe to call from any actor thread. Journal writes go through ``board`` (validated under the
journal lock); messages through ``send`` (durable delivery, then an in-process wake of the
recipient when it lives here). ``TeamChannel`` is the part a member's own protocol steps need
(a teammate's host provides it too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.rules import Completion
    from actors.jobs.cron import CronView
    from actors.settings import Settings
    from actors.worktrees.actor import WorktreesHandle
    from mailboxes.messages import Envelope
    from mailboxes.ports import EventStore, OnHints, Watcher


@dataclass(frozen=True)
class TeammateSpec:
    """What the lead asks for in ``spawn_teammate``."""

    name: str
    role: str = "general"
    prompt: str = ""
    model: str | None = None
    task_id: str | None = None
    plan_required: bool = False
    tools: tuple[str, ...] | None = None
    worktree: bool = False


@dataclass(frozen=True)
class MemberView:
    """One member as ``list_teammates`` and the live view show it."""

    name: str
    kind: str
    role: str
    status: str
    task_id: str | None = None
    worktree: str | None = None
    cwd: str | None = None
    model: str | None = None
    last_activity: float | None = None
    tokens_used: int = 0
    hosted_here: bool = False


class TeamChannel(Protocol):
    """The board and the mail: what a member's protocol steps (``actors.protocols``) use."""

    @property
    def board(self) -> Board:
        """The task board (journal-backed, shared by every actor of this process)."""
        ...

    def send(
        self,
        sender: str,
        to: str,
        type: str,
        body: Mapping[str, Any],
        *,
        in_reply_to: str | None = None,
    ) -> list[Envelope]:
        """Deliver durably (``to="*"`` broadcasts) and wake in-process recipients.
        Unknown recipient → ``UnknownRecipient``."""
        ...


class TeamServices(TeamChannel, Protocol):
    """What team tools may ask of the running team."""

    @property
    def repo_root(self) -> Path:
        """The main checkout's root."""
        ...

    @property
    def settings(self) -> Settings:
        """The effective settings."""
        ...

    @property
    def worktrees(self) -> WorktreesHandle | None:
        """The running Worktrees actor, or None when the team runs no worktrees."""
        ...

    @property
    def journal(self) -> EventStore:
        """The team's journal on its backend (reads; writes go through ``board``)."""
        ...

    def watch(self, on_hints: OnHints, rescan_s: float = 2.0, *, inboxes: bool = True) -> Watcher:
        """A not started ``Watcher`` of the team's journal (and, with ``inboxes``, its inboxes)
        on its backend: ``actors.factory.Team.watch``."""
        ...

    def complete_task(
        self,
        tid: str,
        owner: str,
        epoch: int,
        summary: str,
        *,
        commit: str | None = None,
        remote: str | None = None,
    ) -> Completion:
        """``Board.complete`` for ``owner`` (fenced, durable when it returns), in one journal
        commit with other writes of this process's members that meet it
        (``actors.runtime.commits``)."""
        ...

    def spawn_teammate(self, spec: TeammateSpec, *, by: str) -> MemberView:
        """Start a teammate. Names are unique; a given ``task_id`` is claimed for it before it
        starts and a failed claim means no teammate (``TeamError`` with the reason)."""
        ...

    def members(self) -> list[MemberView]:
        """Every member (agents and humans), in join order."""
        ...

    def request_shutdown(self, name: str, *, by: str) -> str:
        """Journal ``shutdown.requested`` and send ``shutdown_request``; returns the request id."""
        ...

    def schedule_cron(
        self, cron: str, prompt: str, *, recurring: bool, tz: str | None, owner: str
    ) -> CronView:
        """Validate and schedule (``TeamError`` on a bad expression)."""
        ...

    def list_crons(self) -> list[CronView]:
        """Scheduled, not cancelled, not finished cron jobs (``actors.jobs.cron.CronView``)."""
        ...

    def cancel_cron(self, cron_id: str, *, by: str) -> None:
        """Cancel a cron job (unknown id → ``TeamError``)."""
        ...
