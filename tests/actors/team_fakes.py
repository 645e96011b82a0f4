"""A small ``TeamServices`` over a real journal-backed ``Board`` and a real ``Maildir``.

Members are journaled (``member.spawned``) and get an inbox; cron jobs live in a dict. Enough
for the team tools and protocols; the real runtime implements the same protocol. What is the
runtime's own behaviour (spawning, mail, shutdown, cron) is tested on the real ``TeamRuntime``
(tests/actors/tools/test_tools_lead.py); where the fake answers, it uses the runtime's messages.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from actors.board.board import Board
from actors.board.state import TeamState
from actors.errors import DuplicateMember, TeamError, UnknownMember
from actors.jobs.cron import CronView
from actors.services import MemberView, TeammateSpec
from actors.settings import Settings, parse_settings
from mailboxes.events import EventDraft, MemberSpawned, ShutdownRequested, draft
from mailboxes.journal.store import FileJournal
from mailboxes.maildir import Maildir
from mailboxes.messages import Envelope, MessageDraft

LEAD = "lead"


@dataclass
class FakeTeam:
    """The fake runtime: services plus handles tests look at."""

    root: Path
    journal: FileJournal
    board: Board
    mailbox: Maildir
    settings: Settings
    crons: dict[str, CronView] = field(default_factory=dict)
    worktrees: None = None
    """No Worktrees actor runs (``TeamServices.worktrees``)."""
    spawned: list[TeammateSpec] = field(default_factory=list)

    @property
    def repo_root(self) -> Path:
        return self.root

    def spawn_teammate(self, spec: TeammateSpec, *, by: str) -> MemberView:
        if spec.task_id is not None:
            claim = self.board.claim(spec.task_id, spec.name)
            if not claim.ok:
                raise TeamError(f"cannot spawn {spec.name}: {claim.reason}")

        def decision(st: TeamState) -> Sequence[EventDraft]:
            member = st.members.get(spec.name)
            if member is not None and member.status != "stopped":
                raise DuplicateMember(spec.name)
            body = MemberSpawned(
                name=spec.name,
                role=spec.role,
                model=spec.model,
                prompt=spec.prompt,
                plan_required=spec.plan_required,
                tools=spec.tools,
            )
            return (draft(body.TYPE, by, body),)

        self.board.execute(decision)
        self.mailbox.ensure_inbox(spec.name)
        self.spawned.append(spec)
        return self._view(spec.name)

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
            last_activity=member.joined_at,
            tokens_used=0,
            hosted_here=True,
        )

    def members(self) -> list[MemberView]:
        return [self._view(name) for name in self.board.refresh().members]

    def send(
        self,
        sender: str,
        to: str,
        type: str,
        body: Mapping[str, Any],
        *,
        in_reply_to: str | None = None,
    ) -> list[Envelope]:
        message = MessageDraft.model_validate(
            {"to": to, "type": type, "body": dict(body), "in_reply_to": in_reply_to}
        )
        return self.mailbox.deliver(sender, message)

    def request_shutdown(self, name: str, *, by: str) -> str:
        rid = f"shutdown-{uuid.uuid4().hex[:6]}"

        def decision(st: TeamState) -> Sequence[EventDraft]:
            if name not in st.members:
                raise UnknownMember(name)
            body = ShutdownRequested(name=name, request_id=rid)
            return (draft(body.TYPE, by, body),)

        self.board.execute(decision)
        text = f"{by} asks you to shut down: finish your step, release or complete your task."
        self.send(by, name, "shutdown_request", {"text": text, "request_id": rid})
        return rid

    def schedule_cron(
        self, cron: str, prompt: str, *, recurring: bool, tz: str | None, owner: str
    ) -> CronView:
        from actors.jobs.cron import parse_cron

        cron = parse_cron(cron)  # the runtime's own check and message (a CronError)
        view = CronView(
            cron_id=f"cron_{len(self.crons) + 1}",
            cron=cron,
            prompt=prompt,
            recurring=recurring,
            tz=tz,
            owner=owner,
            status="active",
            next_fire="soon",
            last_slot=None,
            fired=0,
        )
        self.crons[view.cron_id] = view
        return view

    def list_crons(self) -> list[CronView]:
        return [v for v in self.crons.values() if v.status == "active"]

    def cancel_cron(self, cron_id: str, *, by: str) -> None:
        view = self.crons.get(cron_id)
        if view is None:  # as the runtime: unknown is an error, cancelling twice is not
            raise TeamError(f"unknown cron job {cron_id!r}")
        self.crons[cron_id] = replace(view, status="cancelled")

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
    mailbox.ensure_inbox(LEAD)
    return FakeTeam(
        root=root,
        journal=journal,
        board=board,
        mailbox=mailbox,
        settings=parse_settings(dict(settings or {}), "test"),
    )


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
