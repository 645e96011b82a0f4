"""The scenario file: ``scenarios/<name>/scenario.yaml`` parsed once, strictly
(docs/ARCHITECTURE.md, "Scenarios").

A scenario is a folder holding ``scenario.yaml`` and ``repo/`` (the fixture repository)::

    name: idle-claimers                  # must equal the folder name
    description: Three idle teammates drain a backlog.
    requires: []                         # runtime capabilities it needs, e.g. [worktrees]
    timeout_s: 60                        # wall-clock limit of the team run
    clock_offset_s: 0                    # the cron scheduler's clock runs this far ahead
    settings: {permissions: {defaultMode: acceptEdits}}    # merged into .team/settings.json
    prompt: Build the text helpers.      # the user's input for the lead, or instead:
    workflow: {name: review_changes, args: {}}   # a workflow run on the team (no prompt)
    goal: {check: python -m pytest -q}   # the lead's goal (with a prompt): judged at each stop
    setup: {tasks: [{subject: ..., blocked_by: [task_1]}]}  # created before the run
    script: {agents: {lead: {rules: [...]}, "*": {rules: [...]}}}   # harness.model.scripted format
    expect:
      tasks: [{subject: Add slugify, status: completed}]
      all_tasks: completed
      files: [{path: textkit/slug.py, contains: "def slugify"}, {branch: main, path: x, equals: ...}]
      events: [{type: plan.reviewed, data: {approve: false}}]
      messages: [{to: lead, type: cron_fired}]
      order: [{before: {type: task.completed, task: Add slugify},
                after: {type: task.claimed, task: Test slugify}}]
      invariants: [single_claim_per_epoch, claims_respect_dependencies, nothing_lost]
      commands: [{run: python -m pytest -q}]
      workflow: {status: completed, result: {...}}      # how the workflow run ended

A ``changes/`` folder next to ``repo/``, when there is one, is copied over the repository after
the fixture's commit and left uncommitted (what a review reviews).

``load_scenario`` returns a frozen ``Scenario`` or raises ``ScenarioError`` whose message is one
line naming the file and the key (unknown keys, bad regular expressions, bad settings).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from actors.errors import TeamError
from harness.model.scripted import Script
from teamctl_base.models import Frozen

__all__ = [
    "Capability",
    "CommandExpect",
    "EventMatch",
    "Expectations",
    "FileExpect",
    "GoalSpec",
    "Invariant",
    "MessageExpect",
    "OrderExpect",
    "Scenario",
    "ScenarioError",
    "TaskExpect",
    "WorkflowExpect",
    "WorkflowRun",
    "find_scenario",
    "list_scenarios",
    "load_scenario",
    "scenarios_dir",
]

SCENARIO_FILE = "scenario.yaml"
Capability = Literal["worktrees"]
Invariant = Literal[
    "single_claim_per_epoch",
    "claims_respect_dependencies",
    "no_write_before_plan_approval",
    "nothing_lost",
]
TaskStatus = Literal["pending", "in_progress", "completed", "deleted"]


class ScenarioError(TeamError):
    """A scenario that cannot be found or parsed; the message is one line."""


class _Strict(Frozen):
    model_config = ConfigDict(**Frozen.model_config, populate_by_name=True)


def _check_regex(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"bad regular expression {value!r}: {exc}") from exc
    return value


class SetupTask(_Strict):
    """A task created on the board before the lead gets the prompt."""

    subject: str = Field(min_length=1)
    """Short imperative title."""
    description: str = ""
    """What done looks like."""
    blocked_by: tuple[str, ...] = ()
    """Ids of earlier setup tasks it waits on (``task_1`` is the first one)."""
    plan_required: bool = False
    """Whoever claims it must get a plan approved."""
    role: str | None = None
    """Only teammates of this role may claim it."""


class Setup(_Strict):
    """Extra state created after ``teamctl init`` and before the run."""

    tasks: tuple[SetupTask, ...] = ()
    """Tasks on the board at start, in id order."""


class TaskExpect(_Strict):
    """The final state of one task, named by ``id`` or by ``subject``."""

    id: str | None = None
    """Task id (``task_3``)."""
    subject: str | None = None
    """Exact subject (must name one task)."""
    status: TaskStatus | None = None
    """Expected final status."""
    owner: str | None = None
    """Expected owner (the last claimer)."""

    @model_validator(mode="after")
    def _one_name(self) -> TaskExpect:
        if (self.id is None) == (self.subject is None):
            raise ValueError("name the task by exactly one of `id` or `subject`")
        return self


class FileExpect(_Strict):
    """A file in the final repository: the working tree, or committed on ``branch``."""

    path: str
    """Path relative to the repository root."""
    branch: str | None = None
    """Read ``git show BRANCH:PATH`` instead of the working tree."""
    contains: tuple[str, ...] = ()
    """Substrings the content must contain (a single string is accepted)."""
    lacks: tuple[str, ...] = ()
    """Substrings the content must not contain (a single string is accepted)."""
    matches: str | None = None
    """A regular expression searched in the content."""
    equals: str | None = None
    """The exact content."""
    absent: bool = False
    """The file must not exist."""

    _regex = field_validator("matches")(_check_regex)

    @field_validator("contains", "lacks", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value


class EventMatch(_Strict):
    """Selects journal events: its ``type``, and optionally actor, task and a data subset."""

    type: str
    """Event type (``task.claimed``)."""
    actor: str | None = None
    """Who caused it."""
    task: str | None = None
    """Task id or exact subject; matched against ``data.task_id``."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Key/values the event's data must contain (equal values)."""


class EventExpect(EventMatch):
    """Events that must appear."""

    count: int | None = Field(default=None, ge=0)
    """Exactly this many (default: at least one)."""


class MessageExpect(_Strict):
    """Messages that must have been delivered to ``to`` (unread or acknowledged)."""

    to: str
    """Recipient."""
    type: str | None = None
    """Message type (``idle_notification``, ``cron_fired``...)."""
    sender: str | None = Field(default=None, alias="from")
    """Sender."""
    contains: str | None = None
    """Substring of the message's text."""
    count: int | None = Field(default=None, ge=0)
    """Exactly this many (default: at least one)."""


class OrderExpect(_Strict):
    """Every event matching ``before`` precedes every event matching ``after`` (both exist)."""

    before: EventMatch
    """The events that come first."""
    after: EventMatch
    """The events that come later."""


class CommandExpect(_Strict):
    """A shell command run in the final repository (``python`` is this interpreter)."""

    run: str = Field(min_length=1)
    """The command (``/bin/sh -c``)."""
    exit_code: int = 0
    """Expected exit status."""
    output_contains: str | None = None
    """Substring of its combined output."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Killed and failed after this long."""


class WorkflowExpect(_Strict):
    """How the scenario's workflow run ended (``workflow:`` scenarios only)."""

    status: Literal["completed", "failed"] = "completed"
    """The run's final status."""
    result: Any = None
    """The exact result (JSON); None: not compared."""
    error_contains: str | None = None
    """Substring of the run's error (a ``failed`` run)."""


class Expectations(_Strict):
    """Everything checked after the run."""

    tasks: tuple[TaskExpect, ...] = ()
    """Final task states."""
    task_count: int | None = Field(default=None, ge=0)
    """How many tasks exist at the end (deleted ones included)."""
    all_tasks: TaskStatus | None = None
    """Every task ends in this status."""
    files: tuple[FileExpect, ...] = ()
    """Files and contents, per branch."""
    events: tuple[EventExpect, ...] = ()
    """Journal events that must appear."""
    messages: tuple[MessageExpect, ...] = ()
    """Messages that must have been delivered."""
    order: tuple[OrderExpect, ...] = ()
    """Order constraints between journal events."""
    invariants: tuple[Invariant, ...] = ()
    """Named invariants checked from the journal, mailboxes and transcripts."""
    commands: tuple[CommandExpect, ...] = ()
    """Commands that must succeed in the final repository."""
    tool_errors: int | None = Field(default=0, ge=0)
    """How many tool calls may fail (answered with an error) over the run; None: any."""
    workflow: WorkflowExpect | None = None
    """How the workflow run ended (needs the scenario's ``workflow``)."""


class WorkflowRun(_Strict):
    """A workflow the scenario runs on the team instead of prompting the lead
    (``actors.workflows``; docs/ARCHITECTURE.md, "Workflows")."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    """The workflow: the fixture's ``.team/workflows/<name>.py`` or a packaged example."""
    args: Any = None
    """Its ``args`` (JSON)."""


class GoalSpec(_Strict):
    """The lead's goal for the run (``teamctl run --goal/--goal-check``; docs/ARCHITECTURE.md,
    "Goals")."""

    condition: str | None = None
    """Judged by the evaluator model call (``--goal``)."""
    check: str | None = None
    """A command that must exit 0 (``--goal-check``)."""
    max_blocks: int = Field(default=10, ge=1)
    """Blocked stops in a row before the goal is given up."""

    @model_validator(mode="after")
    def _something(self) -> GoalSpec:
        if not (self.condition or "").strip() and not (self.check or "").strip():
            raise ValueError("a goal needs a `condition` or a `check`")
        return self


class Scenario(_Strict):
    """One runnable scenario (``folder`` is set by ``load_scenario``)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    """Equal to the folder name."""
    description: str
    """One or two sentences for ``teamctl scenario list``."""
    requires: tuple[Capability, ...] = ()
    """Runtime capabilities it needs; skipped (with a message) while one is missing."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Wall-clock limit for the team to go idle."""
    clock_offset_s: float = Field(default=0.0, ge=0)
    """The cron scheduler's clock runs this many seconds ahead of real time (so a slot in the
    next minute is already due); 0 = the runtime's own scheduler and clock."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """Overrides merged into the default ``.team/settings.json`` (validated)."""
    prompt: str | None = Field(default=None, min_length=1)
    """The user's input for the lead (exactly one of ``prompt`` and ``workflow``)."""
    workflow: WorkflowRun | None = None
    """A workflow run on the team instead of a prompt."""
    goal: GoalSpec | None = None
    """The lead's goal (with a ``prompt``): the run ends only once it holds."""
    setup: Setup = Setup()
    """Board state created before the run."""
    script: Script
    """The scripted model (``harness.model.scripted`` format, keyed by agent name)."""
    expect: Expectations = Expectations()
    """What must hold at the end."""
    folder: Path = Path(".")
    """The scenario's folder (set by the loader, not written in the file)."""

    @field_validator("script", mode="before")
    @classmethod
    def _regexes(cls, value: Any) -> Any:
        for where, pattern in _script_patterns(value):
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise ValueError(f"{where}: bad regular expression {pattern!r}: {exc}") from exc
        return value

    @field_validator("settings")
    @classmethod
    def _settings(cls, value: dict[str, Any]) -> dict[str, Any]:
        from actors.settings import SettingsError, parse_settings

        try:
            parse_settings(value, "of the scenario")
        except SettingsError as exc:
            raise ValueError(str(exc)) from exc
        return value

    @model_validator(mode="after")
    def _one_input(self) -> Scenario:
        if (self.prompt is None) == (self.workflow is None):
            raise ValueError("give exactly one of `prompt` or `workflow`")
        if self.goal is not None and self.prompt is None:
            raise ValueError("goal: needs a `prompt` (the lead pursues the goal)")
        if self.expect.workflow is not None and self.workflow is None:
            raise ValueError("expect.workflow: needs a `workflow` to run")
        return self

    @property
    def repo_dir(self) -> Path:
        """The fixture files copied into the run's repository."""
        return self.folder / "repo"

    @property
    def changes_dir(self) -> Path:
        """Files copied over the repository after the fixture's commit (left uncommitted)."""
        return self.folder / "changes"


def _script_patterns(raw: Any) -> Iterator[tuple[str, Any]]:
    agents = raw.get("agents") if isinstance(raw, dict) else None
    if not isinstance(agents, dict):
        return
    for agent, spec in agents.items():
        if not isinstance(spec, dict):
            continue
        for kind in ("steps", "rules"):
            for i, item in enumerate(spec.get(kind) or ()):
                if isinstance(item, dict) and item.get("match") is not None:
                    yield f"agents.{agent}.{kind}.{i}.match", item["match"]


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "(top level)"
        if error["type"] == "extra_forbidden":
            parts.append(f"{key}: unknown key")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            parts.append(f"{key}: {message}")
    return "; ".join(" ".join(p.split()) for p in parts)


def load_scenario(folder: Path) -> Scenario:
    """Parse ``folder/scenario.yaml``; ``ScenarioError`` names the file and the key."""
    path = folder / SCENARIO_FILE
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: must be a mapping of keys")
    if "folder" in raw:
        raise ScenarioError(f"{path}: folder: unknown key")
    try:
        scenario = Scenario.model_validate({**raw, "folder": folder})
    except ValidationError as exc:
        raise ScenarioError(f"{path}: {_describe(exc)}") from exc
    if scenario.name != folder.name:
        raise ScenarioError(f"{path}: name: {scenario.name!r} differs from the folder name")
    if not scenario.repo_dir.is_dir():
        raise ScenarioError(f"{path}: the fixture folder {scenario.repo_dir} is missing")
    return scenario


def scenarios_dir() -> Path:
    """The bundled scenarios: ``scenarios/`` next to the ``actors`` package."""
    return Path(__file__).resolve().parents[2] / "scenarios"


def list_scenarios(root: Path | None = None) -> list[Scenario]:
    """Every scenario under ``root`` (default: the bundled ones), sorted by name."""
    base = root or scenarios_dir()
    if not base.is_dir():
        return []
    return [load_scenario(p) for p in sorted(base.iterdir()) if (p / SCENARIO_FILE).is_file()]


def find_scenario(name: str, root: Path | None = None) -> Scenario:
    """A bundled scenario by name, or the scenario folder at path ``name``."""
    as_path = Path(name)
    if (as_path / SCENARIO_FILE).is_file():
        return load_scenario(as_path.resolve())
    base = root or scenarios_dir()
    folder = base / name
    if not (folder / SCENARIO_FILE).is_file():
        known = ", ".join(s.folder.name for s in list_scenarios(base)) or "none"
        raise ScenarioError(f"no scenario {name!r} (known: {known})")
    return load_scenario(folder)
