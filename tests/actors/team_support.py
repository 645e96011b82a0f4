"""The team the team tools and protocols are tested on: a real ``TeamRuntime`` over a team folder
in a git repository (``real_team``, ``RealTeam``), its members hosted for real with a model that
holds each in its first call (``Held``), so the test speaks for them through their tools
(``Driver``, which calls tools as an agent's executor does).

This replaced a fake runtime (``FakeTeam``) whose answers had to be kept equal to the runtime's;
what the services answer is tested in tests/actors/test_team_services.py."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from actors.jobs.cron import CronView
from actors.runtime.runtime import TeamRuntime
from actors.services import MemberView, TeammateSpec
from actors.settings import Settings
from harness.ports import ModelRequest, ModelResponse, TextBlock
from mailboxes.maildir import Maildir
from mailboxes.messages import Envelope, parse_envelope
from mailboxes.ports import OnHints, Watcher

LEAD = "lead"


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
        self.callers: set[str] = set()
        """The agents that have called the model (each is then held in that call)."""
        self._called = threading.Condition()

    def complete(self, request: ModelRequest) -> ModelResponse:
        with self._called:
            self.callers.add(request.agent)
            self._called.notify_all()
        self.release.wait(60)
        return ModelResponse(
            id="msg_held",
            model=request.model,
            content=(TextBlock(text="OK."),),
            stop_reason="end_turn",
        )

    def wait_called(self, agent: str, timeout: float = 30.0) -> bool:
        """Whether ``agent`` called the model (it is held there) within ``timeout`` seconds."""
        with self._called:
            return self._called.wait_for(lambda: agent in self.callers, timeout)


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
    # An ack moves a file from new/ to cur/ at any moment: listed in new/ first, then in cur/,
    # a message is seen at least once, and read from where it is when it is read.
    names = dict.fromkeys(p.name for sub in ("new", "cur") for p in (box / sub).iterdir())
    found = []
    for name in names:
        for sub in ("new", "cur"):
            try:
                found.append(parse_envelope((box / sub / name).read_bytes()))
                break
            except FileNotFoundError:
                continue
        else:
            raise AssertionError(f"message {name} of {agent} vanished")
    return sorted(found, key=lambda e: e.ts)


PARK = "(the test speaks for you: wait)"
"""The message that wakes a hosted member into its held model call (``RealTeam.park``)."""


class RealTeam:
    """A started ``TeamRuntime`` over a real team folder, with the handles the tests look at.

    Its services are the runtime's own (``RuntimeServices``): tools driven with it go through the
    runtime's spawning, mail, shutdown, cron and permission code. Members are hosted for real;
    their model (``Held``) keeps each in its first turn, so the test speaks for them. ``close``
    releases the model and stops the runtime."""

    def __init__(self, rt: TeamRuntime, model: Held) -> None:
        self.rt = rt
        self.model = model
        self.services = rt.services
        self.root = rt.repo_root
        self.board = rt.board
        self.mailbox = rt.team.mailbox
        self.journal = rt.team.journal
        self._worktrees: Any = None

    # TeamServices, by delegation to the runtime's
    @property
    def repo_root(self) -> Path:
        return self.services.repo_root

    @property
    def settings(self) -> Settings:
        return self.services.settings

    @property
    def worktrees(self) -> Any:
        """The runtime's Worktrees handle, or what a test set in its place."""
        return self._worktrees if self._worktrees is not None else self.services.worktrees

    @worktrees.setter
    def worktrees(self, stand_in: Any) -> None:
        self._worktrees = stand_in

    def watch(self, on_hints: OnHints, rescan_s: float = 2.0, *, inboxes: bool = True) -> Watcher:
        return self.services.watch(on_hints, rescan_s, inboxes=inboxes)

    def spawn_teammate(self, spec: TeammateSpec, *, by: str) -> MemberView:
        """The runtime's spawn, then the new member is held in a model call (``park``).

        Without ``spec.task_id`` no task may be ready: the hosted teammate would claim it
        itself, and a test that then claims it for the teammate would not see its own claim."""
        if spec.task_id is None:
            ready = [t.id for t in self.board.refresh().ready(spec.role, any_role=False)]
            assert not ready, f"spawn {spec.name} before creating {ready}: it would claim one"
        view = self.services.spawn_teammate(spec, by=by)
        self.park(view.name)
        return view

    def park(self, name: str) -> None:
        """Wait until the hosted member ``name`` is in a model call, where ``Held`` keeps it:
        its actor then does nothing on its own (it claims no task) and the test speaks for it.
        A member that claimed a task on joining is already there; one without work is woken by
        a message (``PARK``, left out of ``inbox``)."""
        if name not in self.model.callers and self.board.refresh().holding(name) is None:
            self.services.send(LEAD, name, "message", {"text": PARK})
        assert self.model.wait_called(name), f"{name} never called its model"

    def members(self) -> list[MemberView]:
        return self.services.members()

    def complete_task(self, tid: str, owner: str, epoch: int, summary: str, **more: Any) -> Any:
        return self.services.complete_task(tid, owner, epoch, summary, **more)

    def send(
        self,
        sender: str,
        to: str,
        type: str,
        body: Mapping[str, Any],
        *,
        in_reply_to: str | None = None,
    ) -> list[Envelope]:
        return self.services.send(sender, to, type, body, in_reply_to=in_reply_to)

    def request_shutdown(self, name: str, *, by: str) -> str:
        return self.services.request_shutdown(name, by=by)

    def schedule_cron(
        self, cron: str, prompt: str, *, recurring: bool, tz: str | None, owner: str
    ) -> CronView:
        return self.services.schedule_cron(cron, prompt, recurring=recurring, tz=tz, owner=owner)

    def list_crons(self) -> list[CronView]:
        return self.services.list_crons()

    def cancel_cron(self, cron_id: str, *, by: str) -> None:
        self.services.cancel_cron(cron_id, by=by)

    # --- test helpers ------------------------------------------------------------------------------

    def inbox(self, agent: str) -> list[Envelope]:
        """Every message delivered to ``agent``, read or not (its hosted actor may have taken
        one already)."""
        return [e for e in delivered(self.mailbox, agent) if e.text != PARK]

    def events(self, kind: str | None = None) -> list[Any]:
        return [e for e in self.journal.read_from(1) if kind is None or e.type == kind]

    def close(self) -> None:
        self.model.release.set()
        self.rt.stop()


def real_team(
    root: Path,
    settings: Mapping[str, Any] | None = None,
    *,
    initial_commit: bool = False,
    **runtime: Any,
) -> RealTeam:
    """A git repository at ``root`` (with an empty first commit if ``initial_commit``) with
    ``teamctl init`` done, and a started real runtime over it (no jobs, no worktrees actor, a
    scheduler; ``runtime`` overrides: ``run_team``). The caller closes it."""
    import json

    from actors.factory import init_team

    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    if initial_commit:
        for args in (
            ("config", "user.email", "t@example.com"),
            ("config", "user.name", "T"),
            ("commit", "-q", "--allow-empty", "-m", "initial"),
        ):
            subprocess.run(["git", *args], cwd=root, check=True)
    init_team(root)
    if settings:
        (root / ".team" / "settings.json").write_text(json.dumps(settings))
    return run_team(root, **runtime)


def run_team(root: Path, **runtime: Any) -> RealTeam:
    """A started real runtime over the team of the checkout ``root`` (its backend as its
    settings say; no jobs, no worktrees actor, a scheduler; ``runtime`` overrides)."""
    model = Held()
    options: dict[str, Any] = {
        "jobs": False,
        "worktrees": False,
        "fsync_transcripts": False,
        "scheduler": True,
    }
    options.update(runtime)
    rt = TeamRuntime(root, model=model, **options)
    try:
        rt.start()
    except BaseException:
        model.release.set()
        raise
    team = RealTeam(rt, model)
    _wait_lead_idle(team)
    return team


def _wait_lead_idle(team: RealTeam, timeout: float = 30.0) -> None:
    """Wait until the lead has journaled its first ``idle``: the runtime's start-up events are
    then all in, and a test that counts the journal's events counts only its own (CI once saw
    the lead's status land after a test had taken its count). The roster is told of each status
    change after it is journaled (``MemberHosting.set_status``), so it wakes this wait."""

    def lead_idle() -> bool:
        return any(
            e.data.get("name") == LEAD and e.data.get("status") == "idle"
            for e in team.events("member.status_changed")
        )

    if not team.rt.roster.wait_until(lead_idle, timeout):
        team.close()
        raise AssertionError("the lead never went idle after the runtime started")
