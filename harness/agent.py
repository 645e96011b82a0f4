"""Assemble one ``Agent``: model, tools (registry + executor + policy), context, transcript.

The agent owns its loop and everything the loop needs; the team runtime (or ``teamctl ask``)
passes in what only it knows: the model client, the tool policy, extra tools, hooks and a
team-state provider. What the model sees keeps a stable prefix (docs/ARCHITECTURE.md, "Context and
the prompt cache"): tools in a fixed order, a system prompt fixed for the session, and the
volatile context (team state, memory index, working directory) as reminders appended to the
conversation when it changes.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from harness.context.compaction import CompactionBlocked, CompactionConfig, Compactor
from harness.context.instructions import denied_by_rules, load_instructions
from harness.context.memory import Memory
from harness.context.prompt import SystemPrompt
from harness.context.skills import SkillLibrary, SkillSession
from harness.goal import GoalJudge, GoalVerdict, RecordFn
from harness.hooks import HOOK_SESSION_KEY, HookOutcome, HookRunner, HookSession, session_for
from harness.loop import (
    AgentLoop,
    LoopConfig,
    LoopHooks,
    PromptVerdict,
    StepResult,
    StopVerdict,
    TurnResult,
)
from harness.permissions.policy import harness_policy
from harness.ports import (
    ContentBlock,
    Message,
    ModelClient,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from harness.settings import HookEvent
from harness.shell.environment import command_env_of
from harness.tools.base import JobRunner, Tool, ToolContext, ToolPolicy
from harness.tools.compact_tool import CompactTool
from harness.tools.executor import ToolExecutor
from harness.tools.memory_tools import MEMORY_GUIDANCE, memory_tools
from harness.tools.registry import ToolRegistry, builtin_tools
from harness.tools.skill_tool import LoadSkillTool
from harness.tools.subagent import SUBAGENT_KEY, SubagentOutcome, TaskInput, TaskTool
from harness.tools.todo import TodoStore
from harness.transcript import Transcript, TranscriptSink, load_transcript, repair_dangling
from teamctl_base.models import Frozen

log = logging.getLogger(__name__)

SUBAGENT_TYPE = "general-purpose"
"""The ``agent_type`` of a ``task`` subagent in hook payloads (Claude Code's built-in name)."""

DEFAULT_IDENTITY = (
    "You are a coding agent working in a git repository. You act through tools; prefer "
    "reading before writing, make small verifiable changes, and say plainly what you did."
)
DEFAULT_GUIDANCE = (
    "Tool use: read files with read_file and search with glob/grep rather than bash; change "
    "files with edit_file (exactly one match) or write_file; keep a todo list with todo_write "
    "for multi-step work; use task to delegate a self-contained search or change; load_skill "
    "when a skill in the catalog fits; compact when your context is full of stale output. "
    "Independent read-only calls can go in one message and run in parallel."
)


class AgentConfig(Frozen):
    """How one agent is built (the team runtime fills it from ``settings.json``)."""

    name: str = "agent"
    """The agent's name: transcript file, hook payloads, fake-API header."""
    model: str = "claude-sonnet-4-6"
    """Model name for every request."""
    max_tokens: int = 8000
    """``max_tokens`` per model call."""
    max_turns: int | None = None
    """Model calls allowed per turn (``None``: unlimited)."""
    budget_tokens: int | None = None
    """Total tokens this agent may spend (``None``: unlimited)."""
    temperature: float | None = None
    """Sampling temperature (``None``: the API default)."""
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    """Context window and compaction thresholds."""
    identity: str = DEFAULT_IDENTITY
    """Static prompt: who the agent is (``{name}`` is filled in, but the name also comes after
    the shared part of the system prompt: an identity without it is shared by agents of one kind
    and read from the prompt cache; docs/ARCHITECTURE.md, "Context and the prompt cache")."""
    brief: str = ""
    """This agent's own instructions (a teammate's prompt from the lead): in the system prompt
    after the part shared by agents of one kind."""
    tool_guidance: str = DEFAULT_GUIDANCE
    """Static prompt: how to use the tools."""
    subagents: bool = True
    """Offer the ``task`` tool (never offered inside a subagent)."""
    subagent_max_turns: int = 30
    """Model calls a subagent may make."""
    todo_reminder_steps: int = 10
    """Remind the model of its todo list after this many steps without an update (0: never)."""
    result_limit_chars: int = 60_000
    """Tool results above this size are spilled to ``.team/outputs``."""
    fsync_transcript: bool = True
    """fsync every transcript line (turn off only in benchmarks of other parts)."""


class Agent:
    """One agent: its loop, tools, skills, memory, todos and transcript."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        root: Path,
        model: ModelClient,
        policy: ToolPolicy,
        cwd: Path | None = None,
        transcript_dir: Path | None = None,
        extra_tools: Sequence[Tool[Any]] = (),
        tool_names: Collection[str] | None = None,
        hooks: LoopHooks | None = None,
        hook_runner: HookRunner | None = None,
        state_provider: Callable[[], str] | None = None,
        job_runner: JobRunner | None = None,
        session_id: str = "",
        resume: bool = False,
        subagent: bool = False,
        transcript_sink: TranscriptSink | None = None,
    ) -> None:
        self.config = config
        self.root, self.cwd = root, cwd or root
        self.model, self.policy = model, policy
        self.transcript_dir = transcript_dir
        self.is_subagent = subagent
        self.hook_runner = hook_runner
        self.todos = TodoStore()
        self.skills = SkillLibrary(root)
        self.skill_session = SkillSession()
        self.memory = Memory(root)
        self._subagents: list[Agent] = []
        self.goal: GoalJudge | None = None
        self._sub_ids = itertools.count(1)
        tools: list[Tool[Any]] = [*builtin_tools(self.todos), *memory_tools(self.memory)]
        tools.append(LoadSkillTool(self.skills, self.skill_session))
        tools.append(CompactTool(self.request_compaction))
        if config.subagents and not subagent:
            tools.append(TaskTool(self._run_subagent))
        # The request's tool order: the agent's own tools, then the team's, then the rest (MCP),
        # each by name; tools added later go last, so earlier ones never move.
        self._tool_rank = {t.name: 0 for t in tools} | {t.name: 1 for t in extra_tools}
        self._tool_order: list[str] = []
        tools += extra_tools
        if tool_names is not None:
            tools = [t for t in tools if t.name in tool_names]
        self.registry = ToolRegistry(tools)
        self._spec_cache: tuple[tuple[str, ...], tuple[ToolSpec, ...]] | None = None
        self.executor = ToolExecutor(self.registry, policy)
        self.tool_context = ToolContext(
            agent=config.name,
            root=root,
            cwd=self.cwd,
            session_id=session_id,
            outputs_dir=root / ".team" / "outputs",
            job_runner=job_runner,
            extra={SUBAGENT_KEY: 1} if subagent else {},
            extra_roots=_extra_roots(policy),
        )
        self.transcript = (
            Transcript.for_agent(
                transcript_dir, config.name, fsync=config.fsync_transcript, sink=transcript_sink
            )
            if transcript_dir is not None
            else None
        )
        self._session_ended = False
        self.tool_context.extra[HOOK_SESSION_KEY] = HookSession(
            transcript_path=str(self.transcript.path.absolute()) if self.transcript else "",
            project_dir=str(root),
            stop=self._stop_by_hook,
        )
        self.system = self._system_prompt(state_provider, resume)
        messages = self._initial_messages(resume, session_id)
        # Callbacks given here take precedence one by one; the settings' hooks fill the rest
        # (``teamctl ask`` passes only ``on_message`` and must still run Stop hooks).
        given = hooks or LoopHooks()
        ran = self._hooks_from_runner() if hook_runner else LoopHooks()
        base_hooks = LoopHooks(
            on_user_prompt=given.on_user_prompt or ran.on_user_prompt,
            on_stop=given.on_stop or ran.on_stop,
            on_message=given.on_message or ran.on_message,
            after_tools=given.after_tools or ran.after_tools,
        )
        self._message_listeners: list[Callable[[Message], None]] = []
        if base_hooks.on_message is not None:
            self._message_listeners.append(base_hooks.on_message)
        self.loop = AgentLoop(
            model=self.skill_session.wrap(model),
            executor=self.executor,
            tools=self._specs,
            tool_context=self.tool_context,
            system=self.system,
            compactor=Compactor(
                model,
                model_name=config.model,
                agent=config.name,
                config=config.compaction,
                pre_compact=self._pre_compact if hook_runner else None,
            ),
            config=LoopConfig(
                model=config.model,
                agent=config.name,
                max_tokens=config.max_tokens,
                max_turns=config.max_turns,
                budget_tokens=config.budget_tokens,
                temperature=config.temperature,
                result_limit_chars=config.result_limit_chars,
            ),
            transcript=self.transcript,
            hooks=replace(
                base_hooks,
                after_tools=base_hooks.after_tools or self._todo_reminder,
                on_message=self._message_appended,
                on_goal=self._goal_verdict,
            ),
            messages=messages,
        )

    # -- assembly --------------------------------------------------------------------------

    def _system_prompt(
        self, state_provider: Callable[[], str] | None, resume: bool
    ) -> SystemPrompt:
        cfg = self.config
        prompt = SystemPrompt(
            identity=cfg.identity.replace("{name}", cfg.name), tool_guidance=cfg.tool_guidance
        )
        # Fixed for the session (the system prompt): memory guidance, instructions, workspace,
        # the skills catalog as the session starts (sections added later, such as the MCP
        # servers', too: the prompt is rendered at the first request). Nothing here may change
        # while the session runs, nor (ideally) when it resumes.
        if "remember" in self.registry or "recall" in self.registry:
            prompt.add_static("How memory works", MEMORY_GUIDANCE.format(dir=self.memory.dir))
        denied = denied_by_rules(self.policy, self.tool_context)
        prompt.add_static(
            "Project instructions", load_instructions(self.root, self.cwd, denied=denied).text()
        )
        prompt.add_static(
            "Workspace", f"Repository root: {self.root}\nWorking directory: {self.cwd}"
        )
        prompt.add_section("Skills", self.skills.catalog)
        # The agent's own, after the shared block and its cache breakpoint: its name, its
        # instructions, its SessionStart context (below).
        name, brief = cfg.name, cfg.brief
        prompt.add_own("Agent", lambda: f"Your name is {name}.")
        prompt.add_own("Your instructions", lambda: brief)
        # Volatile: sent as a reminder at the tail of the conversation whenever it changes (the
        # first one with the first request of a session, a resumed one too).
        prompt.add_volatile("Working directory", lambda: str(self.cwd), known=str(self.cwd))
        if state_provider is not None:
            prompt.add_volatile("Team state", state_provider, mid_turn=False)
        prompt.add_volatile("Memory", self.memory.index_text, mid_turn=False)
        if self.hook_runner is not None and not self.is_subagent:
            start = self.run_hook(
                "SessionStart", source="resume" if resume else "startup", model=self.config.model
            )
            if start is not None and start.blocked:  # exit 2: shown to the user only
                log.warning("SessionStart hook of %s: %s", self.config.name, start.reason)
            context = start.additional_context or "" if start else ""
            prompt.add_own("Session start", lambda: context)
        return prompt

    # -- hooks (HookRunner → loop callbacks; docs/ARCHITECTURE.md, "Hooks") ------------------

    def hook_session(self) -> HookSession:
        """This agent's common hook fields: session id, transcript, project root, command env."""
        return session_for(self.tool_context)

    def permission_mode(self) -> str | None:
        """The permission mode its tool calls are checked in (``plan`` while read-only)."""
        if self.tool_context.read_only:
            return "plan"
        found = harness_policy(self.executor.policy)
        return found.permission_mode if found is not None else None

    def run_hook(self, event: HookEvent, **fields: Any) -> HookOutcome | None:
        """Run ``event``'s hooks as this agent (``None`` when none is configured)."""
        if self.hook_runner is None or not self.hook_runner.has_hooks(event):
            return None
        mode = self.permission_mode()
        payload: dict[str, Any] = {"cwd": str(self.cwd)}
        if mode is not None:
            payload["permission_mode"] = mode
        return self.hook_runner.run(event, payload | fields, session=self.hook_session())

    def notify(self, notification_type: str, message: str, title: str | None = None) -> None:
        """Fire ``Notification`` hooks (``idle_prompt``, ``permission_prompt``, ...)."""
        fields: dict[str, Any] = {"message": message, "notification_type": notification_type}
        if title is not None:
            fields["title"] = title
        self.run_hook("Notification", **fields)

    def _stop_by_hook(self, reason: str) -> None:
        """A hook's ``continue: false`` during a tool call: the turn ends before the next model
        call (``hook_stopped``, with ``reason`` as its text)."""
        loop = getattr(self, "loop", None)
        if loop is not None and loop.state.turn_active:
            loop.state.blocked_reason = reason

    def _hooks_from_runner(self) -> LoopHooks:
        def on_prompt(text: str) -> PromptVerdict:
            out = self.run_hook("UserPromptSubmit", prompt=text)
            if out is None:
                return PromptVerdict()
            if out.blocked or out.stop:
                return PromptVerdict(blocked=True, reason=out.reason or out.stop_reason)
            return PromptVerdict(additional_context=out.additional_context or "")

        def on_stop(text: str, active: bool) -> StopVerdict:
            event: HookEvent = "SubagentStop" if self.is_subagent else "Stop"
            fields: dict[str, Any] = {"stop_hook_active": active, "last_assistant_message": text}
            if self.is_subagent and self.transcript is not None:
                fields["agent_transcript_path"] = str(self.transcript.path.absolute())
            out = self.run_hook(event, **fields)
            if out is None:
                return StopVerdict()
            if out.stop:
                return StopVerdict("stop", out.stop_reason or out.reason)
            if out.blocked:
                return StopVerdict("continue", out.reason or f"A {event} hook asked you to go on.")
            if out.additional_context:  # feedback that keeps the conversation going
                return StopVerdict("continue", out.additional_context)
            return StopVerdict()

        return LoopHooks(on_user_prompt=on_prompt, on_stop=on_stop)

    def _pre_compact(self, trigger: str) -> str | None:
        out = self.run_hook("PreCompact", trigger=trigger, custom_instructions="")
        if out is not None and out.blocked:  # exit 2 or decision "block": no compaction
            log.warning("a PreCompact hook blocked compaction of %s: %s", self.name, out.reason)
            raise CompactionBlocked(out.reason)
        return out.additional_context if out else None

    def _initial_messages(self, resume: bool, session_id: str) -> list[Message]:
        if self.transcript is None:
            return []
        loaded = load_transcript(self.transcript.path)
        if not resume:
            if loaded.messages:  # a fresh session over an old file starts from nothing
                self.transcript.compact_boundary(
                    [], trigger="new_session", pre_tokens=0, post_tokens=0
                )
            self.transcript.meta(agent=self.config.name, session_id=session_id)
            return []
        messages = loaded.messages
        fix = repair_dangling(messages, is_read_only=self._is_read_only, rerun=self._rerun)
        if fix is not None:
            self.transcript.message(fix)
            messages.append(fix)
        return messages

    def _specs(self) -> tuple[ToolSpec, ...]:
        # JSON schemas cost ~1 ms a tool to generate; the tool set only changes between turns.
        names = tuple(self.registry.names())
        if self._spec_cache is None or self._spec_cache[0] != names:
            known = set(self._tool_order)
            new = [n for n in names if n not in known]
            self._tool_order += sorted(new, key=lambda n: (self._tool_rank.get(n, 2), n))
            present = set(names)
            specs = tuple(
                tool.spec()
                for tool in (self.registry.get(n) for n in self._tool_order if n in present)
                if tool is not None
            )
            self._spec_cache = (names, specs)
        return self._spec_cache[1]

    def _is_read_only(self, call: ToolUseBlock) -> bool:
        """Safe to run again after a crash cut it short (the dangling-call repair)."""
        # Read-only *and* concurrency-safe: team tools count as read-only for permissions (plan
        # mode allows them) but write the journal, and are not concurrency-safe.
        tool = self.registry.get(call.name)
        if tool is None:
            return False
        try:
            args = tool.input_model.model_validate(call.input)
            return bool(tool.is_read_only(args) and tool.is_concurrency_safe(args))
        except ValidationError:
            return False

    def _rerun(self, calls: list[ToolUseBlock]) -> list[ToolResultBlock]:
        return self.executor.run_batch(calls, self.tool_context)

    def _todo_reminder(self) -> str | None:
        name, every = self.config.name, self.config.todo_reminder_steps
        self.todos.note_step(name)
        if every <= 0 or not self.todos.get(name):
            return None
        return self.todos.reminder(name, after_steps=every)

    def _run_subagent(self, args: TaskInput, ctx: ToolContext) -> SubagentOutcome:
        cfg = self.config.model_copy(
            update={
                "name": f"{self.config.name}.task-{next(self._sub_ids)}",
                "max_turns": self.config.subagent_max_turns,
                "subagents": False,
            }
        )
        sub = Agent(
            cfg,
            root=self.root,
            model=self.model,
            policy=self.policy,
            cwd=ctx.cwd,
            transcript_dir=self.transcript_dir,
            job_runner=self.tool_context.job_runner,
            session_id=self.tool_context.session_id,
            hook_runner=self.hook_runner,
            subagent=True,
        )
        # The subagent is held to its parent's confinement: the root (a worktree), read-only
        # mode (a teammate without an assignment) and the host's extras such as the sandbox.
        sub.tool_context.root, sub.tool_context.read_only = ctx.root, ctx.read_only
        own = replace(
            self.hook_session(), agent_id=cfg.name, agent_type=SUBAGENT_TYPE, stop=sub._stop_by_hook
        )  # its hooks get the parent's transcript_path and its own agent_id
        sub.tool_context.extra = {**ctx.extra, SUBAGENT_KEY: 1, HOOK_SESSION_KEY: own}
        prompt: list[ContentBlock] = [TextBlock(text=args.prompt)]
        start = sub.run_hook("SubagentStart")
        if start is not None and start.additional_context:
            prompt.append(TextBlock(text=start.additional_context))
        self._subagents.append(sub)
        try:
            result = sub.run_turn(prompt)
        finally:
            self._subagents.remove(sub)
            sub.close()
        return SubagentOutcome(result.text, result.transition, result.steps, result.error)

    # -- the loop's API --------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def messages(self) -> list[Message]:
        return self.loop.messages

    def run_turn(self, user_input: str | Sequence[ContentBlock] | None = None) -> TurnResult:
        self.skill_session.reset(self.tool_context)  # skills are active for one turn
        return self.loop.run_turn(user_input)

    def begin_turn(self, user_input: str | Sequence[ContentBlock] | None = None) -> None:
        self.skill_session.reset(self.tool_context)
        self.loop.begin_turn(user_input)

    def step(self) -> StepResult:
        return self.loop.step()

    def inject(self, text: str) -> None:
        self.loop.inject(text)

    def interrupt(self) -> None:
        """Interrupt this agent's turn and any subagent it is running."""
        self.loop.interrupt()
        for sub in list(self._subagents):
            sub.interrupt()

    def request_compaction(self, instructions: str = "") -> None:
        self.loop.request_compaction(instructions)

    # -- what a host changes -----------------------------------------------------------------

    def relocate(self, root: Path, cwd: Path, policy: ToolPolicy) -> None:
        """Run the next tool calls confined to ``root``, in ``cwd``, under ``policy`` (a host
        moving the agent into a worktree and back). Subagents keep the policy the agent was
        built with (``self.policy``); they take the root from the calling context."""
        self.cwd = cwd
        self.executor.use_policy(policy)
        self.tool_context.root, self.tool_context.cwd = root, cwd

    def set_read_only(self, read_only: bool) -> None:
        """Plan mode on or off: while on, only read-only tools run (subagents inherit it)."""
        self.tool_context.read_only = read_only

    def observe_messages(self, listener: Callable[[Message], None]) -> None:
        """Call ``listener`` with every message appended to the conversation (after it is in
        the transcript), after the listeners already registered."""
        self._message_listeners.append(listener)

    def _message_appended(self, message: Message) -> None:
        for listener in list(self._message_listeners):
            listener(message)

    def goal_judge(
        self, *, record: RecordFn | None = None, pending_work: Callable[[], int] | None = None
    ) -> GoalJudge:
        """This agent's goal judge (made on first use; docs/ARCHITECTURE.md, "Goals"): its
        evaluator calls this agent's model, its check runs in the agent's cwd with the agent's
        command environment. ``record`` stores the ``goal.*`` records; ``pending_work`` counts
        the agent's unfinished background work (judging waits for it)."""
        if self.goal is None:
            self.goal = GoalJudge(
                model=self.model,
                model_name=self.config.model,
                agent=self.config.name,
                cwd=lambda: self.cwd,
                env=lambda: command_env_of(self.tool_context.extra).environment(),
                pending_work=pending_work,
                record=record,
            )
        return self.goal

    def _goal_verdict(self) -> GoalVerdict:
        return self.goal.judge(self.loop.messages) if self.goal is not None else GoalVerdict()

    def close(self, reason: str = "other") -> None:
        """End the session: ``SessionEnd`` hooks (with ``reason``; once, not for a subagent),
        then the transcript is closed."""
        if not self.is_subagent and not self._session_ended:
            self._session_ended = True
            try:
                self.run_hook("SessionEnd", reason=reason)
            except Exception:  # closing must not fail on a hook
                log.warning("SessionEnd hooks of %s failed", self.config.name, exc_info=True)
        if self.transcript is not None:
            self.transcript.close()


def _extra_roots(policy: ToolPolicy) -> tuple[Path, ...]:
    """The ``additionalDirectories`` the policy's permission checks accept, for the file tools."""
    found = harness_policy(policy)
    return tuple(Path(p) for p in found.permissions.extra_roots) if found is not None else ()
