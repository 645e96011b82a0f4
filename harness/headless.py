"""The logic of ``teamctl ask PROMPT``: one agent, one turn, in a repository, without a team.

``run_ask`` runs the turn and writes the result (testable in-process with any ``ModelClient``);
the click command that parses the options and builds the model client is ``actors.cli.ask``.
Exit codes: 0 success, 1 the turn failed (model error, max turns, budget, stopped by a hook, the
goal's evaluator failed or judged the goal impossible), 3 the final answer never matched
``--json-schema``, 4 the goal was not met within its cap of blocked stops, 130 interrupted.

With a goal (``--goal``/``--goal-check``, ``harness.goal``) the turn ends only when it holds; the
goal and every evaluation are ``goal`` records of the ask's transcript, and ``--resume`` without a
new goal goes on judging the recorded one while it is still active.

Waits of the model client (``WaitNotices``, its ``on_wait``) are never silent: a line on stderr
for ``text``/``json``, a ``system``/``api_retry`` event for ``stream-json``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from harness.errors import HarnessError
from teamctl_base.clock import new_id

if TYPE_CHECKING:  # the runtime imports are inside the functions: `teamctl --help` stays fast
    from harness.goal import Goal, GoalStatus
    from harness.loop import TurnResult
    from harness.model.backoff import ModelWait
    from harness.ports import Message, ModelClient
    from harness.tools.base import Approver, ToolPolicy

OutputFormat = Literal["text", "json", "stream-json"]
PolicyFactory = Callable[[Path, str, "Approver | None"], "ToolPolicy"]
"""Builds the tool policy from (repository root, permission mode, approver)."""

ASK_AGENT = "ask"
EXIT_OK, EXIT_FAILED, EXIT_SCHEMA, EXIT_GOAL_UNMET, EXIT_INTERRUPTED = 0, 1, 3, 4, 130
GOAL_SUBTYPES = {
    "unmet": "error_goal_unmet",
    "impossible": "error_goal_impossible",
    "error": "error_goal_evaluator",
}
SUBTYPES = {
    "completed": "success",
    "max_turns": "error_max_turns",
    "budget": "error_max_budget",
    "hook_stopped": "error_stopped_by_hook",
    "goal_failed": "error_goal_evaluator",
    "interrupted": "error_interrupted",
    "error": "error_during_execution",
}
DEFAULT_MODEL = "claude-sonnet-4-6"


# -- JSON schema -------------------------------------------------------------------------------


class SchemaFileError(ValueError):
    """A ``--json-schema`` file that is not a valid JSON schema."""


class SettingsFileError(HarnessError):
    """``.team/settings.json`` is not JSON, or a section of it does not validate."""


def check_schema(schema: Any) -> None:
    """Refuse an invalid schema up front (one line naming the problem)."""
    import jsonschema  # type: ignore[import-untyped]

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaFileError(f"invalid JSON schema: {exc.message}") from None


def schema_errors(value: Any, schema: Any) -> list[str]:
    """Every way ``value`` violates ``schema`` (empty when it validates), each as
    ``$.path: message``. Full JSON Schema (the draft the schema declares; ``$ref`` included),
    through ``jsonschema``."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    return [f"{e.json_path}: {e.message}" for e in errors]


def extract_json(text: str) -> Any:
    """The JSON value in a final answer: the whole text, a fenced block, or the outermost
    ``{...}``/``[...]``; raises ``ValueError`` when there is none."""
    candidates = [text.strip()]
    fence = re.search(r"```(?:json)?\s*\n(.*?)```", text, re.S)
    if fence:
        candidates.append(fence.group(1).strip())
    for open_, close in ("{}", "[]"):
        i, j = text.find(open_), text.rfind(close)
        if 0 <= i < j:
            candidates.append(text[i : j + 1])
    for c in candidates:
        try:
            return json.loads(c)
        except ValueError:
            continue
    raise ValueError("the answer contains no JSON value")


# -- the command's logic ---------------------------------------------------------------


class _Output:
    """Writes results in the chosen format."""

    def __init__(self, fmt: OutputFormat, out: TextIO, session_id: str) -> None:
        self.fmt, self.out, self.session_id = fmt, out, session_id

    def emit(self, obj: dict[str, Any]) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.out.flush()

    def message(self, message: Message) -> None:
        if self.fmt == "stream-json":
            self.emit(
                {
                    "type": message.role,
                    "message": message.model_dump(mode="json", exclude_none=True),
                    "session_id": self.session_id,
                }
            )


class WaitNotices:
    """The ``on_wait`` of the ask's model client: says what the client waits for and until when,
    in the output of the running ask (before ``attach``: a line on stderr)."""

    def __init__(self, err: TextIO | None = None) -> None:
        self._output: _Output | None = None
        self._err = err

    def attach(self, output: _Output, err: TextIO) -> None:
        self._output, self._err = output, err

    def __call__(self, wait: ModelWait) -> None:
        output = self._output
        if output is not None and output.fmt == "stream-json":
            output.emit(
                {"type": "system", "subtype": "api_retry"}
                | wait.as_event()
                | {"message": wait.line(), "session_id": output.session_id}
            )
            return
        err = self._err or sys.stderr
        err.write(f"teamctl ask: {wait.line()}\n")
        err.flush()


def run_ask(
    repo_root: Path,
    prompt: str,
    *,
    model_client: ModelClient,
    output_format: OutputFormat = "text",
    max_turns: int | None = None,
    json_schema: dict[str, Any] | None = None,
    resume: bool = False,
    permission_mode: str = "default",
    approver: Approver | None = None,
    policy_factory: PolicyFactory,
    model: str = DEFAULT_MODEL,
    max_schema_repairs: int = 2,
    out: TextIO | None = None,
    err: TextIO | None = None,
    wait_notices: WaitNotices | None = None,
    goal: Goal | None = None,
) -> int:
    """Run one turn of one agent on ``repo_root`` and write the result; returns the exit code.
    ``wait_notices`` (the model client's ``on_wait``) is attached to this run's output; ``goal``
    must hold before the turn ends."""
    from harness.agent import Agent, AgentConfig
    from harness.loop import LoopHooks
    from harness.permissions.policy import HarnessPolicy
    from harness.transcript import load_transcript

    out, err = out or sys.stdout, err or sys.stderr
    transcripts = repo_root / ".team" / "transcripts"
    session_id = ""
    if resume:
        session_id = str(
            load_transcript(transcripts / f"{ASK_AGENT}.jsonl").meta.get("session_id", "")
        )
    session_id = session_id or new_id()
    output = _Output(output_format, out, session_id)
    if wait_notices is not None:
        wait_notices.attach(output, err)
    policy = policy_factory(repo_root, permission_mode, approver)
    agent = Agent(
        AgentConfig(name=ASK_AGENT, model=model, max_turns=max_turns),
        root=repo_root,
        model=model_client,
        policy=policy,
        hook_runner=policy.hooks if isinstance(policy, HarnessPolicy) else None,
        transcript_dir=transcripts,
        hooks=LoopHooks(on_message=output.message),
        session_id=session_id,
        resume=resume,
    )
    mcp = None
    try:
        mcp = _equip(agent, repo_root)
        if output_format == "stream-json":
            output.emit(
                {
                    "type": "system",
                    "subtype": "init",
                    "session_id": session_id,
                    "cwd": str(repo_root),
                    "model": model,
                    "tools": agent.registry.names(),
                    "permission_mode": permission_mode,
                }
            )
        goal_status = _arm_goal(agent, goal, resume, output)  # after `init` in stream-json
        if json_schema is not None:
            prompt += (
                "\n\nYour final answer must be a single JSON value, and nothing else, that "
                f"validates against this JSON schema:\n{json.dumps(json_schema)}"
            )
        result = agent.run_turn(prompt)
        turns = result.steps
        structured: Any = None
        schema_failed = False
        if json_schema is not None and result.transition == "completed":
            for attempt in range(max_schema_repairs + 1):
                problems = _check(result.text, json_schema)
                if not problems:
                    structured = extract_json(result.text)
                    break
                if attempt == max_schema_repairs:
                    schema_failed = True
                    break
                result = agent.run_turn(
                    "Your final answer does not validate against the required JSON schema:\n- "
                    + "\n- ".join(problems[:20])
                    + "\nAnswer again with only the corrected JSON value."
                )
                turns += result.steps
                if result.transition != "completed":
                    break
        return _report(output, result, turns, structured, schema_failed, err, goal_status)
    finally:
        agent.close()
        if mcp is not None:
            mcp.close()


def _equip(agent: Any, root: Path) -> Any:
    """Give the agent the bash sandbox (``bash_sandbox`` in the settings of every scope; default
    auto) and the tools of the MCP servers of ``.mcp.json`` and the settings' ``mcpServers``.
    Returns the MCP manager to close (``None``, and no ``mcp`` import, when no server is
    configured)."""
    import os

    from harness.host_setup import install_mcp_tools, install_sandbox, open_mcp
    from harness.settings import SandboxSettings, scoped_settings_json
    from harness.settings import SettingsFileError as BadSettingsFile
    from harness.shell.environment import COMMAND_ENV_KEY, CommandEnv, CommandEnvSettings

    path = root / ".team" / "settings.json"
    try:
        raw = scoped_settings_json(root, os.environ)
        install_sandbox(agent, SandboxSettings.model_validate(raw.get("bash_sandbox") or {}))
        servers = raw.get("mcpServers") or {}
        section = CommandEnvSettings.model_validate(raw.get("command_env") or {})
        command_env = CommandEnv.from_settings(raw.get("env") or {}, section)
        agent.tool_context.extra[COMMAND_ENV_KEY] = command_env
    except BadSettingsFile as exc:
        raise SettingsFileError(str(exc)) from exc
    except (ValueError, AttributeError) as exc:
        raise SettingsFileError(f"{path}: {exc}") from exc
    manager = open_mcp(root, servers, command_env)
    if manager is not None:
        try:
            install_mcp_tools(agent, manager)
        except BaseException:
            manager.close()
            raise
    return manager


def _arm_goal(agent: Any, goal: Goal | None, resume: bool, output: _Output) -> GoalStatus | None:
    """Give the agent its goal (a resumed ask's recorded one when no new one is given), its
    records going to the transcript (and to stream-json as ``system``/``goal`` events)."""
    from harness.transcript import load_transcript

    transcript = agent.transcript
    recorded = load_transcript(transcript.path).goal if resume and transcript else []

    def record(kind: str, fields: dict[str, Any]) -> None:
        if transcript is not None:
            transcript.goal(kind, fields)
        if output.fmt == "stream-json":
            output.emit(
                {"type": "system", "subtype": kind, "session_id": output.session_id} | fields
            )

    if goal is None and not recorded:
        return None
    judge = agent.goal_judge(record=record)
    judge.restore(recorded)
    if goal is not None:
        judge.set(goal)
    status: GoalStatus = judge.status
    return status


def _check(text: str, schema: dict[str, Any]) -> list[str]:
    try:
        value = extract_json(text)
    except ValueError as exc:
        return [str(exc)]
    return schema_errors(value, schema)


def _report(
    output: _Output,
    result: TurnResult,
    turns: int,
    structured: Any,
    schema_failed: bool,
    err: TextIO,
    goal: GoalStatus | None = None,
) -> int:
    subtype = "error_json_schema" if schema_failed else SUBTYPES[result.transition]
    if result.transition == "goal_failed" and goal is not None:
        subtype = GOAL_SUBTYPES.get(goal.state, subtype)
    ok = subtype == "success"
    code = (
        EXIT_OK
        if ok
        else EXIT_SCHEMA
        if schema_failed
        else EXIT_INTERRUPTED
        if result.transition == "interrupted"
        else EXIT_GOAL_UNMET
        if subtype == "error_goal_unmet"
        else EXIT_FAILED
    )
    if output.fmt == "text":
        if ok:
            text = json.dumps(structured) if structured is not None else result.text
            output.out.write(text.rstrip("\n") + "\n")
        else:
            detail = result.error or result.text or result.transition
            err.write(f"teamctl ask: {subtype}: {detail.strip()}\n")
        return code
    output.emit(
        {
            "type": "result",
            "subtype": subtype,
            "is_error": not ok,
            "result": result.text,
            "structured_output": structured,
            "stop_reason": result.transition,
            "error": result.error,
            "num_turns": turns,
            "session_id": output.session_id,
            "usage": result.usage.model_dump(),
        }
        | ({"goal": _goal_summary(goal)} if goal is not None and goal.goal is not None else {})
    )
    return code


def _goal_summary(goal: GoalStatus) -> dict[str, Any]:
    """The ``goal`` object of the ``result``: condition, check, state and the evaluations."""
    assert goal.goal is not None
    return {
        "condition": goal.goal.condition,
        "check": goal.goal.check,
        "state": goal.state,
        "evaluations": goal.evaluations,
        "blocks": goal.blocks,
        "evaluator_tokens": goal.tokens,
        "last_reason": goal.last_reason,
    }
