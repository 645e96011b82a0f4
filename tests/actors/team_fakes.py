"""A small ``TeamServices`` over a real journal-backed ``Board`` and a real ``Maildir``.

Members are journaled (``member.spawned``, the lead's first, as a starting runtime does) and get
an inbox; crons are journaled with the commands the runtime's Scheduler uses, and never fire.
Enough for the team tools and protocols. Where the fake answers, it answers as the runtime
(actors/runtime/services.py) does: the same checks, errors, events and messages, which
tests/actors/test_team_fakes.py checks against a real ``TeamRuntime`` for the same input. What is
the runtime's own behaviour (hosting, waking, a teammate answering a shutdown request) is tested
on the real runtime: ``held_runtime`` below, tests/actors/tools/test_tools_lead.py.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.board.board import Board, acting_as
from actors.board.rules import check_new_member
from actors.errors import ClaimRefused, DuplicateMember, TeamError, UnknownMember
from actors.jobs.cron import CronView, views
from actors.jobs.scheduler import SENDER as CRON_ACTOR
from actors.jobs.scheduler import cancel_cron, read_crons, schedule_cron
from actors.runtime.runtime import TeamRuntime
from actors.services import MemberView, TeammateSpec
from actors.settings import Settings, parse_settings
from harness.ports import ModelRequest, ModelResponse, TextBlock
from mailboxes.events import MemberSpawned, ShutdownRequested, draft
from mailboxes.journal.store import FileJournal
from mailboxes.maildir import Maildir
from mailboxes.messages import (
    BROADCAST,
    Envelope,
    MessageDraft,
    check_agent_name,
    parse_envelope,
)
from mailboxes.ports import OnHints, Watcher
from teamctl_base.clock import UuidIds, new_id

LEAD = "lead"


@dataclass
class FakeTeam:
    """The fake runtime: services plus handles tests look at."""

    root: Path
    journal: FileJournal
    board: Board
    mailbox: Maildir
    settings: Settings
    worktrees: None = None
    """No Worktrees actor runs (``TeamServices.worktrees``)."""

    @property
    def repo_root(self) -> Path:
        return self.root

    def spawn_teammate(self, spec: TeammateSpec, *, by: str) -> MemberView:
        # The runtime's checks, in its order and with its errors (actors/runtime/services.py);
        # tests/actors/test_team_fakes.py compares the two for the same bad input.
        name = check_agent_name(spec.name)
        state = self.board.refresh()
        existing = state.members.get(name)
        if name == LEAD or (existing is not None and existing.status != "stopped"):
            raise DuplicateMember(name)
        check_new_member(state, name, lead=LEAD)
        alive = [m for m in state.members.values() if m.kind == "agent" and m.status != "stopped"]
        limit = self.settings.team.max_teammates
        if len(alive) - 1 >= limit:
            raise TeamError(f"the team already has {limit} teammates")
        if spec.task_id is not None:
            claim = self.board.claim(spec.task_id, name)
            if not claim.ok:
                raise ClaimRefused(spec.task_id, claim.reason or "refused")
        body = MemberSpawned(
            name=name,
            role=spec.role,
            model=spec.model or self.settings.models.teammate,
            prompt=spec.prompt,
            plan_required=spec.plan_required,
            tools=spec.tools,
        )
        with acting_as(by):
            self.board.add_member(body, lead=LEAD)
        self.mailbox.ensure_inbox(name)
        return self._view(name)

    def _view(self, name: str) -> MemberView:
        st = self.board.refresh()
        member = st.members[name]
        held = st.holding(name)
        return MemberView(
            name=name,
            kind=member.kind,
            role=member.role,
            status=member.status,
            task_id=held.id if held else None,
            worktree=held.worktree if held else None,
            model=member.model,
            last_activity=member.joined_at,
            tokens_used=0,
            hosted_here=True,
        )

    def members(self) -> list[MemberView]:
        return [self._view(name) for name in self.board.refresh().members]

    def watch(self, on_hints: OnHints, rescan_s: float = 2.0, *, inboxes: bool = True) -> Watcher:
        """As ``Team.watch`` on the file backend (not started)."""
        from mailboxes.watch import HintWatcher

        folder = self.root / ".team" / "mailboxes" if inboxes else None
        return HintWatcher(on_hints, journal=self.journal.path, mailboxes=folder, rescan_s=rescan_s)

    def send(
        self,
        sender: str,
        to: str,
        type: str,
        body: Mapping[str, Any],
        *,
        in_reply_to: str | None = None,
    ) -> list[Envelope]:
        if to not in (BROADCAST, LEAD):  # as actors/runtime/hosting.py MemberHosting.send
            member = self.board.state.members.get(to)
            if member is not None and member.status == "stopped" and member.kind == "agent":
                raise TeamError(f"{to} has stopped; messages to it would never be read")
        message = MessageDraft.model_validate(
            {"to": to, "type": type, "body": dict(body), "in_reply_to": in_reply_to}
        )
        return self.mailbox.deliver(sender, message)

    def request_shutdown(self, name: str, *, by: str) -> str:
        state = self.board.refresh()
        member = state.members.get(name)
        if member is None or member.kind != "agent" or name == LEAD:
            raise UnknownMember(name)
        if member.status == "stopped":
            raise TeamError(f"{name} has already stopped")
        rid = new_id()
        body = ShutdownRequested(name=name, request_id=rid)
        self.board.execute(lambda st: (draft(body.TYPE, by, body),))
        text = f"{by} asks you to shut down: finish your step, release or complete your task."
        self.send(by, name, "shutdown_request", {"text": text, "request_id": rid})
        return rid

    # Crons: the journal commands the runtime's Scheduler and the CLI share
    # (actors/jobs/scheduler.py); nothing fires them.

    def schedule_cron(
        self, cron: str, prompt: str, *, recurring: bool, tz: str | None, owner: str
    ) -> CronView:
        cron_id = schedule_cron(
            self.journal,
            UuidIds(),
            cron=cron,
            prompt=prompt,
            recurring=recurring,
            tz=tz,
            owner=owner,
        )
        [view] = [v for v in self._crons(include_done=True) if v.cron_id == cron_id]
        return view

    def _crons(self, *, include_done: bool = False) -> tuple[CronView, ...]:
        return views(read_crons(self.journal), include_done=include_done)

    def list_crons(self) -> list[CronView]:
        return list(self._crons())

    def cancel_cron(self, cron_id: str, *, by: str) -> None:
        cancel_cron(self.journal, cron_id, actor=CRON_ACTOR)

    # --- test helpers ------------------------------------------------------------------------------

    def inbox(self, agent: str) -> list[Envelope]:
        """Unread messages of ``agent`` (not acked)."""
        return self.mailbox.pending(agent)

    def events(self, kind: str | None = None) -> list[Any]:
        return [e for e in self.journal.read_from(1) if kind is None or e.type == kind]

    def close(self) -> None:
        self.journal.close()


def make_team(root: Path, settings: Mapping[str, Any] | None = None) -> FakeTeam:
    """A git repository at ``root`` with ``teamctl init`` done, and a fake team over it."""
    from actors.board.projections import Projections
    from actors.factory import init_team

    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    if settings:
        import json

        (root / ".team" / "settings.json").write_text(json.dumps(settings))
    journal = FileJournal(root / ".team")
    board = Board(journal, projections=Projections(root), actor="runtime")
    mailbox = Maildir(root / ".team" / "mailboxes")
    parsed = parse_settings(dict(settings or {}), "test")
    # the lead is on the team from the start, as a starting runtime records it
    lead = MemberSpawned(name=LEAD, role="lead", model=parsed.models.lead)
    board.execute(lambda st: (draft(lead.TYPE, "runtime", lead),))
    mailbox.ensure_inbox(LEAD)
    return FakeTeam(root=root, journal=journal, board=board, mailbox=mailbox, settings=parsed)


class Driver:
    """Calls team tools the way an agent's executor does (validation, policy, ToolError)."""

    def __init__(
        self, tools: Sequence[Any], agent: str, root: Path, *, read_only: bool = False
    ) -> None:
        from harness.permissions.checks import Permissions
        from harness.permissions.policy import HarnessPolicy
        from harness.tools.base import ToolContext
        from harness.tools.executor import ToolExecutor
        from harness.tools.registry import ToolRegistry

        self.executor = ToolExecutor(ToolRegistry(tools), HarnessPolicy(Permissions()))
        self.ctx = ToolContext(agent=agent, root=root, cwd=root, read_only=read_only)
        self._n = 0

    def result(self, tool: str, /, **args: Any) -> Any:
        """The ``ToolResultBlock`` of one call."""
        from harness.ports import ToolUseBlock

        self._n += 1
        call = ToolUseBlock(id=f"toolu_{self._n}", name=tool, input=args)
        return self.executor.run_one(call, self.ctx)

    def ok(self, tool: str, /, **args: Any) -> str:
        """Call and require success; the text."""
        block = self.result(tool, **args)
        assert not block.is_error, block.content
        return str(block.content)

    def error(self, tool: str, /, **args: Any) -> str:
        """Call and require a tool error; the text."""
        block = self.result(tool, **args)
        assert block.is_error, block.content
        return str(block.content)


# --- the real runtime, for what is the runtime's own behaviour ---------------------------------


class Held:
    """A model whose every call waits until ``release`` is set: a teammate spawned on a real
    ``TeamRuntime`` stays in its first turn, so the test speaks for it and reads its mail."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.release.wait(60)
        return ModelResponse(
            id="msg_held",
            model=request.model,
            content=(TextBlock(text="OK."),),
            stop_reason="end_turn",
        )


def held_runtime(root: Path, model: Held) -> TeamRuntime:
    """A real runtime over the team at ``root`` (no jobs, no worktrees, a scheduler), not
    started. The caller stops it (``stop_actors``) after setting ``model.release``."""
    return TeamRuntime(
        root, model=model, jobs=False, worktrees=False, fsync_transcripts=False, scheduler=True
    )


def delivered(mailbox: object, agent: str) -> list[Envelope]:
    """Every message delivered to ``agent``, read or not (its actor may have taken one), from
    the Maildir of a team on the file backend."""
    assert isinstance(mailbox, Maildir), mailbox
    box = Path(mailbox.inbox(agent))
    found = [
        parse_envelope(p.read_bytes()) for sub in ("new", "cur") for p in (box / sub).iterdir()
    ]
    return sorted(found, key=lambda e: e.ts)
