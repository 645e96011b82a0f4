"""Goals: a turn ends only when a condition verifiably holds (docs/ARCHITECTURE.md, "Goals").

A ``Goal`` is a condition judged by an independent evaluator (a separate model call with no
tools that reads a compact rendering of the conversation and answers JSON
``{"ok": bool, "reason": str, "impossible": bool}``) and/or a check command that must exit 0
(run in the agent's cwd with the scrubbed child environment, ``harness.shell.environment``).
Both must pass when both are given; the command runs first and, while it fails, the evaluator is
not asked.

``GoalJudge.judge`` is what the loop calls when the model stops calling tools (``LoopHooks.on_goal``)
and answers a ``GoalVerdict``:

- ``allow``: no goal, the goal holds, or the judgement is deferred because background work of this
  agent is still running (the turn ends as usual, the goal stays set and is judged again at the
  end of the next turn, which the work's notification opens);
- ``continue``: the goal does not hold yet; ``reason`` is appended as a user message and the turn
  goes on (at most ``max_blocks`` consecutive times, then ``fail`` with ``status == "unmet"``);
- ``fail``: the evaluator failed (a model error, or output that is not the JSON asked for after
  one retry), answered ``impossible``, or the block cap was reached. Never a success.

Every change is reported to ``record`` as a ``(kind, fields)`` pair — ``goal.set``,
``goal.evaluated``, ``goal.cleared`` — which hosts store (the team journal, the ``ask``
transcript) and fold back with ``GoalStatus.apply`` on resume.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from harness.context.compaction import render_for_summary
from harness.errors import ModelError
from harness.ports import Message, ModelClient, ModelRequest, SystemBlock, TextBlock, Usage
from harness.tools.bash import run_command
from teamctl_base.models import Frozen

__all__ = [
    "GOAL_AGENT_SUFFIX",
    "GOAL_SYSTEM",
    "Goal",
    "GoalJudge",
    "GoalStatus",
    "GoalVerdict",
    "RecordFn",
    "parse_evaluation",
]

GOAL_SYSTEM = (
    "You are a goal evaluator. You judge, from a coding agent's conversation, whether a goal "
    'condition holds now. Answer with one JSON object only: {"ok": true|false, "reason": "...", '
    '"impossible": true|false}. ok: the condition holds, judged from evidence in the '
    "conversation (tool results), not from the agent's claims. reason: when not ok, what is "
    "still missing, written to the agent as its next instruction. impossible: the condition "
    "can never hold (say why in reason)."
)
"""The evaluator's system prompt: scripted models recognise the call by it, or by its agent
name (``<agent>.goal``)."""
GOAL_AGENT_SUFFIX = ".goal"
"""The evaluator call's agent name is the agent's plus this (the fake API's agent header)."""

RecordFn = Callable[[str, dict[str, Any]], None]


class Goal(Frozen):
    """What must hold before a turn may end."""

    condition: str | None = None
    """Judged by the evaluator model call (``--goal TEXT``)."""
    check: str | None = None
    """A shell command that must exit 0 (``--goal-check CMD``)."""
    max_blocks: int = Field(10, ge=1)
    """Consecutive blocked stops allowed before the goal is given up as unmet."""
    check_timeout_s: float = Field(600.0, gt=0)
    """How long the check command may run."""
    output_chars: int = Field(4000, ge=200)
    """How much of a failing check's output is appended (head and tail)."""
    rendered_chars: int = Field(40_000, ge=1000)
    """How much of the conversation the evaluator reads."""


@dataclass(frozen=True)
class GoalVerdict:
    """What the goal decided at a stop: ``allow`` it, ``continue`` with ``reason``, or
    ``fail`` (end the turn as ``goal_failed`` with ``reason``)."""

    action: Literal["allow", "continue", "fail"] = "allow"
    reason: str = ""


GoalState = Literal["active", "met", "unmet", "impossible", "error"]


@dataclass
class GoalStatus:
    """A goal's progress: a fold over its ``goal.*`` records (``apply``)."""

    goal: Goal | None = None
    state: GoalState = "active"
    evaluations: int = 0
    blocks: int = 0
    tokens: int = 0
    last_reason: str = ""
    started_at: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)

    def apply(self, kind: str, fields: Mapping[str, Any]) -> None:
        """Fold one record (``goal.set``/``goal.evaluated``/``goal.cleared``)."""
        if kind == "goal.set":
            self._reset(Goal.model_validate(fields["goal"]), float(fields.get("at", 0.0)))
        elif kind == "goal.cleared":
            self._reset(None, 0.0)
        elif kind == "goal.evaluated" and self.goal is not None:
            self.evaluations += 1
            self.tokens += int(fields.get("tokens", 0))
            self.blocks = int(fields.get("blocks", self.blocks))
            self.last_reason = str(fields.get("reason", ""))
            self.state = fields.get("state", self.state)
            self.history.append(dict(fields))

    def _reset(self, goal: Goal | None, started_at: float) -> None:
        self.goal, self.state, self.started_at = goal, "active", started_at
        self.evaluations = self.blocks = self.tokens = 0
        self.last_reason, self.history = "", []

    def describe(self, now: float) -> str:
        """The console's ``/goal`` text: condition, evaluations, elapsed, tokens, last reason."""
        if self.goal is None:
            return "no goal set (/goal TEXT sets one)"
        parts = []
        if self.goal.condition:
            parts.append(f"goal: {self.goal.condition}")
        if self.goal.check:
            parts.append(f"check: {self.goal.check}")
        elapsed = max(0.0, now - self.started_at) if self.started_at else 0.0
        parts.append(
            f"state: {self.state}; evaluations: {self.evaluations}; blocks: {self.blocks}/"
            f"{self.goal.max_blocks}; elapsed: {elapsed:.0f}s; evaluator tokens: {self.tokens}"
        )
        if self.last_reason:
            parts.append(f"last reason: {self.last_reason}")
        return "\n".join(parts)


def parse_evaluation(text: str) -> tuple[bool, str, bool]:
    """``(ok, reason, impossible)`` from the evaluator's answer; ``ValueError`` when it is not a
    JSON object with a boolean ``ok``."""
    candidates = [text.strip()]
    fence = re.search(r"```(?:json)?\s*\n(.*?)```", text, re.S)
    if fence:
        candidates.append(fence.group(1).strip())
    i, j = text.find("{"), text.rfind("}")
    if 0 <= i < j:
        candidates.append(text[i : j + 1])
    for c in candidates:
        try:
            value = json.loads(c)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("ok"), bool):
            reason = value.get("reason", "")
            return value["ok"], str(reason or ""), value.get("impossible") is True
    raise ValueError(f"not a JSON object with a boolean 'ok': {text[:300]!r}")


class GoalJudge:
    """Judges one agent's goal at each stop. Called from the agent's loop thread only."""

    def __init__(
        self,
        *,
        model: ModelClient,
        model_name: str,
        agent: str,
        cwd: Callable[[], Path],
        env: Callable[[], Mapping[str, str]],
        pending_work: Callable[[], int] | None = None,
        record: RecordFn | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.model, self.model_name, self.agent = model, model_name, agent
        self.cwd, self.env = cwd, env
        self.pending_work = pending_work
        self.record = record
        self.clock = clock
        self.status = GoalStatus()

    # -- setting ---------------------------------------------------------------------------

    def set(self, goal: Goal) -> None:
        """Start judging ``goal`` (counters from zero); recorded as ``goal.set``."""
        self._emit("goal.set", {"goal": goal.model_dump(mode="json"), "at": self.clock()})

    def clear(self) -> None:
        """Stop judging; recorded as ``goal.cleared``."""
        if self.status.goal is not None:
            self._emit("goal.cleared", {})

    def restore(self, records: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Fold stored records (a resume); nothing is recorded again."""
        for kind, fields in records:
            self.status.apply(kind, fields)

    @property
    def active(self) -> bool:
        return self.status.goal is not None and self.status.state == "active"

    def _emit(self, kind: str, fields: dict[str, Any]) -> None:
        self.status.apply(kind, fields)
        if self.record is not None:
            self.record(kind, fields)

    # -- judging ---------------------------------------------------------------------------

    def judge(self, messages: Sequence[Message]) -> GoalVerdict:
        """The verdict at a stop of the model (see the module docstring)."""
        st, goal = self.status, self.status.goal
        if goal is None or st.state != "active":
            return GoalVerdict()
        if self.pending_work is not None and self.pending_work() > 0:
            return GoalVerdict()  # deferred: judged when the work's notification ends a turn
        tokens = 0
        reason = ""
        ok = True
        if goal.check:
            ok, reason = self._run_check(goal)
        if ok and goal.condition:
            try:
                ok, reason, impossible, tokens = self._evaluate(goal.condition, messages)
            except _EvaluatorFailed as exc:
                return self._conclude("error", f"goal evaluator error: {exc}", tokens=exc.tokens)
            if impossible and not ok:
                text = f"goal impossible: {reason or 'the evaluator gave no reason'}"
                return self._conclude("impossible", text, tokens=tokens)
        if ok:
            return self._conclude("met", reason or "the goal holds", tokens=tokens)
        blocks = st.blocks + 1
        if blocks > goal.max_blocks:
            text = (
                f"goal not met after {goal.max_blocks} blocked stops (the cap): "
                f"{reason or 'no reason given'}"
            )
            return self._conclude("unmet", text, tokens=tokens, blocks=blocks)
        self._emit(
            "goal.evaluated",
            {"ok": False, "state": "active", "reason": reason, "tokens": tokens, "blocks": blocks},
        )
        return GoalVerdict(
            "continue", f"[goal] Not done yet — the goal does not hold: {reason}\nKeep working."
        )

    def _conclude(
        self, state: GoalState, reason: str, *, tokens: int, blocks: int | None = None
    ) -> GoalVerdict:
        self._emit(
            "goal.evaluated",
            {
                "ok": state == "met",
                "state": state,
                "reason": reason,
                "tokens": tokens,
                "blocks": self.status.blocks if blocks is None else blocks,
            },
        )
        return GoalVerdict() if state == "met" else GoalVerdict("fail", reason)

    def _run_check(self, goal: Goal) -> tuple[bool, str]:
        assert goal.check is not None
        half = goal.output_chars // 2
        try:
            result = run_command(
                goal.check,
                cwd=self.cwd(),
                timeout_s=goal.check_timeout_s,
                outputs_dir=None,
                head_bytes=half,
                tail_bytes=half,
                env=self.env(),
            )
        except OSError as exc:
            return False, f"the goal check `{goal.check}` could not run: {exc}"
        if result.exit_code == 0 and not result.timed_out:
            return True, f"the goal check `{goal.check}` passed"
        return False, (
            f"the goal check `{goal.check}` failed:\n{result.render(goal.check_timeout_s)}"
        )

    def _evaluate(self, condition: str, messages: Sequence[Message]) -> tuple[bool, str, bool, int]:
        assert self.status.goal is not None
        rendered = render_for_summary(messages, self.status.goal.rendered_chars)
        ask = (
            f"<conversation>\n{rendered}\n</conversation>\n\n<goal>\n{condition}\n</goal>\n\n"
            "Does the goal hold now? Answer with the JSON object only."
        )
        convo: list[Message] = [Message(role="user", content=(TextBlock(text=ask),))]
        tokens = 0
        for attempt in range(2):
            request = ModelRequest(
                model=self.model_name,
                system=(SystemBlock(text=GOAL_SYSTEM),),
                messages=tuple(convo),
                tools=(),
                max_tokens=1000,
                agent=self.agent + GOAL_AGENT_SUFFIX,
            )
            try:
                response = self.model.complete(request)
            except ModelError as exc:
                raise _EvaluatorFailed(str(exc), tokens) from exc
            tokens += _total(response.usage)
            text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
            try:
                ok, reason, impossible = parse_evaluation(text)
            except ValueError as exc:
                if attempt == 1:
                    raise _EvaluatorFailed(
                        f"unparseable answer after a retry: {exc}", tokens
                    ) from exc
                convo += [
                    Message(role="assistant", content=(TextBlock(text=text or "(empty)"),)),
                    Message(
                        role="user",
                        content=(
                            TextBlock(
                                text='That is not the JSON asked for. Answer with only {"ok": '
                                'true|false, "reason": "...", "impossible": true|false}.'
                            ),
                        ),
                    ),
                ]
                continue
            return ok, reason, impossible, tokens
        raise AssertionError("unreachable")


class _EvaluatorFailed(Exception):
    def __init__(self, message: str, tokens: int) -> None:
        super().__init__(message)
        self.tokens = tokens


def _total(u: Usage) -> int:
    return (
        u.input_tokens + u.output_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
    )
