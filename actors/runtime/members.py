"""Building one member: its model client, tool policy, tools and harness ``Agent``.

The model client comes from a ``ModelSource``: one ``ModelClient`` shared by every agent (tests
pass a ``ScriptedModel``: its scripts are keyed by agent name), or a factory called per agent.
Without either, ``anthropic_models`` builds an ``AnthropicModel`` per agent (imported lazily: the
SDK is slow to import). ``scripted_models(path)`` loads a scripted model from a YAML/JSON file
(``teamctl run --script FILE`` or ``TEAMCTL_SCRIPT``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from harness.agent import Agent, AgentConfig
from harness.host_setup import install_mcp_tools, install_sandbox, open_mcp
from harness.ports import ModelClient
from harness.shell.environment import COMMAND_ENV_KEY
from teamctl_base.clock import new_id

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.board.state import TeamState
    from actors.runtime.background import Background
    from actors.runtime.goal import TeamGoal
    from actors.runtime.permission_requests import HumanDesk, JournalDecisions, OnWait
    from actors.runtime.usage import UsageMeter
    from actors.services import TeamServices
    from actors.settings import Settings
    from harness.hooks import HookRunner
    from harness.mcp.client import McpManager
    from harness.tools.base import Approver, JobRunner, Tool, ToolPolicy

__all__ = [
    "SCRIPT_ENV",
    "MemberBuilder",
    "MemberKind",
    "MemberPlan",
    "ModelFactory",
    "ModelSource",
    "ToolsFactory",
    "anthropic_models",
    "build_agent",
    "default_tools",
    "missing_key_message",
    "open_team_mcp",
    "plans_to_host",
    "scripted_models",
]

SCRIPT_ENV = "TEAMCTL_SCRIPT"
"""Environment variable naming a scripted-model file (YAML/JSON) to run the team with."""

MemberKind = Literal["lead", "teammate"]
ModelFactory = Callable[[str, str], ModelClient]
"""``factory(agent_name, model_name) -> ModelClient``."""
ModelSource: TypeAlias = ModelClient | ModelFactory
"""One client shared by every agent, or a factory called per agent."""
ToolsFactory = Callable[["TeamServices", str, MemberKind], "Sequence[Tool[Any]]"]
"""``tools(services, agent_name, kind)``: the team tools of one agent."""

LEAD_IDENTITY = (
    "You are the lead of a team of coding agents working in one git repository. You "
    "split the user's request into tasks on the task board (with dependencies), spawn teammates "
    "who claim and do them, answer their messages, review their plans, and report to the user. "
    "After spawning teammates, end your turn: their results come back to you as messages."
)
TEAMMATE_IDENTITY = (
    "You are a teammate in a team of coding agents working in one git repository. You "
    "work on one task at a time from the task board; when it is done, call complete_task with a "
    "short summary of the outcome. Message the lead with send_message when you are blocked."
)


def missing_key_message() -> str | None:
    """One line telling how to get going when no model can be reached, else None."""
    if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get(SCRIPT_ENV):
        return None
    base = os.environ.get("ANTHROPIC_BASE_URL", "")
    if base:
        return None
    return (
        "ANTHROPIC_API_KEY is not set: export it (or point ANTHROPIC_BASE_URL at a "
        "Messages-compatible server), or try `teamctl demo` for a scripted run"
    )


def anthropic_models(
    fallback: str | None = None, on_wait: Callable[[dict[str, Any]], None] | None = None
) -> ModelFactory:
    """One ``AnthropicModel`` per agent (the SDK is imported on the first call), all sharing
    one ``BackoffGate``: a 429/529 told to one agent makes every agent wait. ``on_wait`` gets a
    ``model_wait`` event for every long wait of a client (docs/RELIABILITY.md, no silent waits).
    They share one SDK client too (each sets its own retries and timeouts on it): one TLS
    context and one connection pool, so spawning a teammate neither loads the CA bundle again
    (tens of ms on its critical path) nor opens a new connection for its first call. The SDK is
    warmed up on a thread from here on (``actors.runtime.warmup``); each agent's first call waits
    for that to finish."""
    import threading

    from actors.runtime.warmup import AfterWarmUp, start_warm_up
    from harness.model.backoff import BackoffGate

    gate = BackoffGate()
    shared: list[Any] = []  # the SDK client, made by the first agent's ``make``
    lock = threading.Lock()
    # What the SDK builds at its first response, built while the runtime starts
    # (``actors.runtime.warmup``): not between the lead's first answer and its tools.
    warmed = start_warm_up()

    def make(agent: str, model: str) -> ModelClient:
        base = os.environ.get("ANTHROPIC_BASE_URL", "")
        if not os.environ.get("ANTHROPIC_API_KEY") and re.match(
            r"https?://(127\.|localhost|\[::1\])", base
        ):
            os.environ["ANTHROPIC_API_KEY"] = "fake-api-key"  # a local fake API needs no key
        import anthropic

        from harness.model.anthropic_client import AnthropicModel

        def waiting(wait: Any) -> None:
            if on_wait is not None:
                on_wait({"type": "model_wait", **wait.as_event(), "message": wait.line()})

        with lock:
            if not shared:
                shared.append(anthropic.Anthropic())
        client = shared[0]
        inner = AnthropicModel(
            model, fallback_model=fallback, client=client, gate=gate, on_wait=waiting
        )
        return AfterWarmUp(inner, warmed)

    return make


def scripted_models(path: str | Path) -> ModelClient:
    """A ``ScriptedModel`` playing the script in ``path`` (one instance for every agent)."""
    from harness.model.scripted import ScriptedModel

    return ScriptedModel(Path(path))


def open_team_mcp(root: Path, settings: Settings) -> McpManager | None:
    """The runtime's one MCP manager (shared by its agents; ``None`` when no server is
    configured); a configuration that does not parse is a ``TeamError`` naming the file."""
    from actors.errors import TeamError
    from harness.mcp.config import McpError

    try:
        return open_mcp(root, settings.mcp_servers, settings.child_env())
    except McpError as exc:
        raise TeamError(f"MCP servers: {exc}") from exc


def default_tools(services: TeamServices, agent: str, kind: MemberKind) -> Sequence[Tool[Any]]:
    """The team tools of ``actors.tools.toolsets`` (lead or teammate set)."""
    from actors.tools import toolsets as tools

    if kind == "lead":
        return list(tools.lead_tools(services, agent))
    return list(tools.teammate_tools(services, agent))


def client_for(source: ModelSource, agent: str, model: str) -> ModelClient:
    """The client of ``agent`` from a shared client or a factory."""
    if isinstance(source, ModelClient):
        return source
    return source(agent, model)


def policy_for(
    settings: Settings,
    hooks: HookRunner | None,
    *,
    mode: str | None = None,
    approver: Approver | None = None,
    board: Board | None = None,
    agent: str = "",
) -> ToolPolicy:
    """Permissions + hooks + approver from the team settings; with a ``board``, every call it
    denies outright is journaled as ``agent``'s (``actors.runtime.policy_journal``)."""
    from actors.runtime.policy_journal import journal_denials, mark_routed
    from harness.permissions.checks import Permissions
    from harness.permissions.policy import HarnessPolicy
    from harness.settings import PermissionSettings

    raw = settings.to_json()["permissions"]
    perms = PermissionSettings.model_validate(raw)
    permission_mode: Any = mode or perms.default_mode
    if board is not None:
        approver = mark_routed(approver)
    policy = HarnessPolicy(
        Permissions.from_settings(perms, mode=permission_mode), hooks, approver, permission_mode
    )
    return policy if board is None else journal_denials(policy, board, agent)


def hooks_for(settings: Settings) -> HookRunner:
    """The command hooks configured in ``settings.json``."""
    from harness.hooks import HookRunner
    from harness.settings import HookSettings

    return HookRunner(
        settings=HookSettings.parse(settings.to_json().get("hooks") or {}),
        env=settings.child_env().environment(),
    )


@dataclass(frozen=True)
class MemberPlan:
    """Everything needed to (re)build one member's agent."""

    name: str
    kind: MemberKind
    model: str
    role: str | None = None
    tools: tuple[str, ...] | None = None
    prompt: str = ""


def build_agent(
    plan: MemberPlan,
    *,
    root: Path,
    client: ModelClient,
    policy: ToolPolicy,
    team_tools: Sequence[Tool[Any]],
    settings: Settings,
    hook_runner: HookRunner | None,
    state_provider: Callable[[], str] | None,
    job_runner: JobRunner | None,
    resume: bool,
    session_id: str,
    fsync: bool = True,
    mcp: McpManager | None = None,
    transcript_sink: Callable[[str], None] | None = None,
) -> Agent:
    """The harness agent of one member, with the bash sandbox of ``settings`` and the tools of
    ``mcp``'s servers (a member restricted by ``plan.tools`` gets only the MCP tools the list
    names: ``mcp__server__tool``, ``mcp__server__*`` or ``mcp__server``; see
    ``harness.host_setup``)."""
    # The identity has no name, and the lead's prompt goes after the system prompt's shared
    # block, so teammates share it in the prompt cache (docs/ARCHITECTURE.md, "Context and the
    # prompt cache").
    identity = LEAD_IDENTITY if plan.kind == "lead" else TEAMMATE_IDENTITY
    config = AgentConfig(
        name=plan.name,
        model=plan.model,
        max_tokens=settings.models.max_tokens,
        identity=identity,
        brief=f"From the lead:\n{plan.prompt}" if plan.prompt else "",
        fsync_transcript=fsync,
    )
    names: set[str] | None = None
    if plan.tools is not None:
        names = set(plan.tools) | {t.name for t in team_tools}
    agent = Agent(
        config,
        root=root,
        model=client,
        policy=policy,
        transcript_dir=root / ".team" / "transcripts",
        extra_tools=team_tools,
        tool_names=names,
        hook_runner=hook_runner,
        state_provider=state_provider,
        job_runner=job_runner,
        session_id=session_id,
        resume=resume,
        transcript_sink=transcript_sink,
    )
    try:
        install_sandbox(agent, settings.bash_sandbox)
        agent.tool_context.extra[COMMAND_ENV_KEY] = settings.child_env()
        if mcp is not None:
            install_mcp_tools(agent, mcp, plan.tools)
    except BaseException:
        agent.close()
        raise
    return agent


def plan_of(state: TeamState, name: str, settings: Settings) -> MemberPlan:
    """The plan of the teammate ``name`` as the journal records it."""
    m = state.members[name]
    return MemberPlan(
        name=name,
        kind="teammate",
        model=m.model or settings.models.teammate,
        role=m.role or None,
        tools=m.tools,
        prompt=m.prompt,
    )


def plans_to_host(
    state: TeamState,
    settings: Settings,
    *,
    lead: str,
    join: str | None,
    hosted_elsewhere: Callable[[str], bool],
) -> list[MemberPlan]:
    """Who a starting runtime hosts: the lead and every agent that has not stopped and that no
    live process hosts, or (``join``) that one existing teammate."""
    from actors.errors import TeamError, UnknownMember

    if join is not None:
        member = state.members.get(join)
        if member is None or member.kind != "agent" or member.role == "lead":
            raise UnknownMember(join)
        if member.status == "stopped":
            raise TeamError(f"{join} has stopped; the lead can spawn it again")
        return [plan_of(state, join, settings)]
    plans = [MemberPlan(name=lead, kind="lead", model=settings.models.lead)]
    for m in state.members.values():
        if m.kind != "agent" or m.name == lead or m.status == "stopped":
            continue
        if hosted_elsewhere(m.name):
            continue  # hosted by another process (`teamctl join`)
        plans.append(plan_of(state, m.name, settings))
    return plans


class MemberBuilder:
    """Builds the harness ``Agent`` of a member, for its first start and for every restart:
    its model client (metered: every call's usage journaled), its policy (a teammate's ``ask`` permissions routed by a
    ``PermissionRouter``, the lead's to ``lead_approver``, or with a ``desk`` (a person reached
    through ``teamctl run``) to the human through a router of its own; every denial journaled),
    its team tools over ``services``, the sandbox and the shared MCP servers; the lead's goal
    judge restored from the journal (``actors.runtime.goal.TeamGoal``)."""

    def __init__(
        self,
        *,
        root: Path,
        settings: Settings,
        model: ModelSource,
        tools: ToolsFactory,
        services: TeamServices,
        background: Background,
        decisions: JournalDecisions,
        hook_runner: HookRunner | None,
        permission_mode: str | None,
        lead: str,
        lead_approver: Approver | None,
        fsync_transcripts: bool,
        usage: UsageMeter,
        desk: HumanDesk | None = None,
        goal: TeamGoal | None = None,
        transcript_sink: Callable[[str], Callable[[str], None]] | None = None,
    ) -> None:
        self._root = root
        self._transcript_sink = transcript_sink
        """``TranscriptStore.sink`` of a backend that copies transcripts beyond this host."""
        self._settings = settings
        self._model = model
        self._tools = tools
        self._services = services
        self._background = background
        self._decisions = decisions
        self._hooks = hook_runner
        self._mode = permission_mode
        self._lead = lead
        self._lead_approver = lead_approver
        self._fsync = fsync_transcripts
        self._desk = desk
        self._usage = usage
        self._goal = goal

    def build(self, plan: MemberPlan, *, resume: bool, on_permission_wait: OnWait) -> Agent:
        """``plan``'s agent (from its transcript when ``resume``); ``on_permission_wait`` is
        told when a teammate starts and stops waiting for a permission answer."""
        board = self._services.board
        agent = build_agent(
            plan,
            root=self._root,
            client=self._usage.client(plan.name, client_for(self._model, plan.name, plan.model)),
            policy=policy_for(
                self._settings,
                self._hooks,
                mode=self._mode,
                approver=self._approver(plan, on_permission_wait),
                board=board,
                agent=plan.name,
            ),
            team_tools=self._tools(self._services, plan.name, plan.kind),
            settings=self._settings,
            hook_runner=self._hooks,
            state_provider=self._state_text if plan.kind == "lead" else None,
            job_runner=self._background.job_runner,
            resume=resume,
            session_id=new_id(),
            fsync=self._fsync,
            mcp=self._background.mcp,
            transcript_sink=(
                None if self._transcript_sink is None else self._transcript_sink(plan.name)
            ),
        )
        if plan.kind == "lead" and self._goal is not None:
            self._goal.arm(agent)  # the lead's stops are judged by its goal, if any
        return agent

    def _approver(self, plan: MemberPlan, on_wait: OnWait) -> Approver | None:
        """Teammates route ``ask`` permissions (to a human or the lead, bounded wait); the
        lead's go to ``lead_approver``, else to the human when a desk reaches one."""
        from actors.runtime.permission_requests import PermissionRouter

        if plan.kind == "lead":
            if self._lead_approver is not None or self._desk is None:
                return self._lead_approver
            return PermissionRouter(
                self._services,
                self._decisions.wait,
                on_wait=on_wait,
                desk=self._desk,
                route="human",
            )
        return PermissionRouter(
            self._services, self._decisions.wait, on_wait=on_wait, desk=self._desk
        )

    def _state_text(self) -> str:
        from actors.runtime.lead import team_state_text

        return team_state_text(self._services.board.state, lead=self._lead)
