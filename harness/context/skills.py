"""Skills: ``SKILL.md`` files with YAML frontmatter, as Claude Code and anthropics/skills write them.

Scopes, lowest precedence first (a later scope replaces an earlier skill of the same name):

1. project: ``<root>/.claude/skills/<name>/SKILL.md`` (the repository's Claude Code skills);
2. personal: ``~/.claude/skills/<name>/SKILL.md`` (Claude Code: personal skills override project
   skills of the same name);
3. team: ``<root>/.team/skills/<name>/SKILL.md`` (ours; the team's own choice wins).

Only the catalog (name + description) goes into the prompt; the body is loaded on demand by the
``load_skill`` tool. Frontmatter keys we do not use (``license``, ``metadata``, ``version``,
``disable-model-invocation``, ...) are accepted and ignored. Two keys are honoured while a skill is
active, that is from its ``load_skill`` until the end of the agent's turn (``SkillSession``):

- ``allowed-tools``: a string (``Read, Grep`` or ``Bash(git status:*) Bash(git diff:*)``) or a YAML
  list, in permission-rule syntax with Claude Code's tool names. Each entry becomes an extra allow
  rule for the calls of this turn (``harness.permissions.checks.GRANTED_RULES_KEY``): it never
  overrides a deny rule, an explicit ask rule or a protected path, and it is dropped when the next
  turn starts.
- ``model``: ``sonnet``/``opus``/``haiku`` (mapped to ``MODEL_ALIASES``), a ``claude-...`` model id,
  or ``inherit``; the model calls of the rest of the turn use it (Claude Code: "the override
  applies for the rest of the current turn"). ``TEAMCTL_MODEL``, which pins every model, wins.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessError
from harness.permissions.checks import GRANTED_RULES_KEY
from harness.permissions.rules import Rule, RuleError
from harness.ports import ModelClient, ModelRequest, ModelResponse
from harness.settings import claude_user_dir
from harness.tools.base import ToolContext
from harness.tools.names import OUR_NAMES

TEAM_SKILLS = Path(".team") / "skills"
PROJECT_SKILLS = Path(".claude") / "skills"

MODEL_ALIASES: Mapping[str, str] = {
    "opus": "claude-opus-4-8",
    "sonnet": "claude-sonnet-4-6",
    "haiku": "claude-haiku-4-5",
}
"""Claude Code's model aliases in a skill's ``model`` → the model id we send."""

PINNED_MODEL_ENV = "TEAMCTL_MODEL"
"""When set, every model is pinned (see README) and a skill's ``model`` is not applied."""

# Rule names our permission rules already understand as Claude Code names (harness.permissions.rules
# aliases); other Claude Code names are mapped to our tool names through harness.tools.names.
_RULE_ALIASES = frozenset({"Bash", "Read", "Edit", "Write", "Glob", "Grep"})


class SkillError(HarnessError):
    """A skill file cannot be parsed, or a skill name is unknown."""


@dataclass(frozen=True)
class Skill:
    """One skill: its catalog entry, where its body lives, and the frontmatter we honour."""

    name: str
    description: str
    path: Path
    scope: str = "team"
    allowed_tools: tuple[str, ...] = ()
    """Permission rules (our spelling) granted while the skill is active."""
    model: str | None = None
    """The model id the rest of the turn uses once loaded (``None``: the agent's)."""
    notes: tuple[str, ...] = ()
    """Frontmatter entries that could not be honoured (shown when the skill is loaded)."""


def split_tools(value: object) -> list[str]:
    """``allowed-tools`` as written (a string with commas and/or spaces, or a YAML list) → entries.

    Separators inside parentheses belong to the entry: ``Bash(git log --oneline:*)`` is one entry.
    """
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if item is None:
            continue
        text, depth, current = str(item), 0, ""
        for ch in text:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth = max(0, depth - 1)
            if depth == 0 and (ch == "," or ch.isspace()):
                if current.strip():
                    out.append(current.strip())
                current = ""
                continue
            current += ch
        if current.strip():
            out.append(current.strip())
    return out


_ENTRY = re.compile(r"^([A-Za-z0-9_*?\-.]+)(\(.*\))?$", re.DOTALL)


def to_rule(entry: str) -> str:
    """One ``allowed-tools`` entry in our rule spelling (``TodoWrite`` → ``todo_write``,
    ``Skill(pdf)`` → ``load_skill(pdf)``; ``Read``/``Bash(...)`` are already rule aliases)."""
    m = _ENTRY.match(entry)
    if m is None:
        raise RuleError(f"allowed-tools entry {entry!r} is not `Tool` or `Tool(specifier)`")
    name, spec = m.group(1), m.group(2) or ""
    if name not in _RULE_ALIASES and name in OUR_NAMES:
        name = OUR_NAMES[name]
    rule = f"{name}{spec}"
    Rule.parse(rule)  # raises RuleError for what the permission checks could not read
    return rule


def resolve_model(value: object) -> tuple[str | None, str | None]:
    """A skill's ``model`` → (model id or ``None``, a note when it is not usable)."""
    if value is None:
        return None, None
    text = str(value).strip()
    if not text or text == "inherit":
        return None, None
    if text in MODEL_ALIASES:
        return MODEL_ALIASES[text], None
    if text.startswith("claude-"):
        return text, None
    return None, f"model {text!r} is not a Claude model id or alias; the agent's model is kept"


def _frontmatter(path: Path, text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---"):
        raise SkillError(f"{path}: no YAML frontmatter (a '---' block with name and description)")
    end = text.find("\n---", 3)
    if end < 0:
        raise SkillError(f"{path}: unterminated YAML frontmatter")
    try:
        meta = yaml.safe_load(text[3:end]) or {}
    except yaml.YAMLError as exc:
        raise SkillError(f"{path}: bad YAML frontmatter: {exc}") from exc
    if not isinstance(meta, dict):
        raise SkillError(f"{path}: frontmatter must be a mapping")
    body = text[end + 4 :].lstrip("\n")
    return meta, body


def parse_skill(path: Path, scope: str = "team") -> tuple[Skill, str]:
    """Parse one ``SKILL.md`` into its catalog entry and body; ``SkillError`` when malformed."""
    meta, body = _frontmatter(path, path.read_text(encoding="utf-8"))
    name = str(meta.get("name") or path.parent.name).strip()
    description = " ".join(str(meta.get("description") or "").split())
    if not description:
        raise SkillError(f"{path}: frontmatter needs a description")
    notes: list[str] = []
    rules: list[str] = []
    for entry in split_tools(meta.get("allowed-tools")):
        try:
            rules.append(to_rule(entry))
        except RuleError as exc:
            notes.append(f"{exc}; ignored")
    model, note = resolve_model(meta.get("model"))
    if note:
        notes.append(note)
    skill = Skill(
        name=name,
        description=description,
        path=path,
        scope=scope,
        allowed_tools=tuple(dict.fromkeys(rules)),
        model=model,
        notes=tuple(notes),
    )
    return skill, body


def skill_scopes(root: Path, home: Path | None = None) -> list[tuple[str, Path]]:
    """``(scope, folder)`` in precedence order, lowest first (see the module docstring)."""
    user = (claude_user_dir(home) or Path.home() / ".claude") / "skills"
    return [("project", root / PROJECT_SKILLS), ("personal", user), ("team", root / TEAM_SKILLS)]


class SkillLibrary:
    """The skills visible from one repository root (re-scanned on ``refresh``)."""

    def __init__(self, root: Path, home: Path | None = None) -> None:
        self.root = root
        self.home = home
        self.skills: dict[str, Skill] = {}
        self.errors: list[str] = []
        self.refresh()

    def refresh(self) -> None:
        found: dict[str, Skill] = {}
        errors: list[str] = []
        for scope, base in skill_scopes(self.root, self.home):
            if not base.is_dir():
                continue
            for path in sorted(base.glob("*/SKILL.md")):
                try:
                    skill, _ = parse_skill(path, scope)
                except (SkillError, OSError, UnicodeDecodeError) as exc:
                    errors.append(str(exc))
                    continue
                found[skill.name] = skill  # a later scope replaces an earlier one
        self.skills, self.errors = dict(sorted(found.items())), errors

    def catalog(self) -> str:
        """The prompt section: one line per skill (empty when there are none)."""
        if not self.skills:
            return ""
        lines = ["Load a skill with load_skill(name) when its description fits the task."]
        lines += [f"- {s.name}: {s.description}" for s in self.skills.values()]
        return "\n".join(lines)

    def get(self, name: str) -> Skill:
        skill = self.skills.get(name)
        if skill is None:
            known = ", ".join(self.skills) or "none"
            raise SkillError(f"unknown skill {name!r} (available: {known})")
        return skill

    def load(self, name: str) -> str:
        """The body of skill ``name`` with a note on where its files are."""
        skill, body = self.load_skill(name)
        return f"Skill {skill.name} (files in {skill.path.parent}):\n\n{body}"

    def load_skill(self, name: str) -> tuple[Skill, str]:
        """Skill ``name`` as it is on disk now (frontmatter re-read) and its body."""
        known = self.get(name)
        return parse_skill(known.path, known.scope)


class SkillSession:
    """The skills an agent has loaded in its current turn: their ``allowed-tools`` (in the tool
    context, where the permission checks read them) and their ``model`` (read by ``wrap``).

    ``reset`` at the start of each turn. Subagents copy their parent's tool context, so a skill's
    grants cover the subagents of the turn that loaded it (a reset removes only the grants of
    this session's own skills); its model does not (each agent wraps its own client).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active: dict[str, Skill] = {}
        self._model: str | None = None
        self._added: set[Rule] = set()

    @property
    def model(self) -> str | None:
        """The model the next calls of this turn use (``None``: the agent's own)."""
        if os.environ.get(PINNED_MODEL_ENV):
            return None
        return self._model

    def activate(self, skill: Skill, ctx: ToolContext) -> list[str]:
        """Record ``skill`` as loaded; returns lines telling the model what changed."""
        lines: list[str] = []
        with self._lock:
            self.active[skill.name] = skill
            if skill.allowed_tools:
                granted: tuple[Rule, ...] = ctx.extra.get(GRANTED_RULES_KEY, ())
                new = tuple(
                    r for r in (Rule.parse(t) for t in skill.allowed_tools) if r not in granted
                )
                ctx.extra[GRANTED_RULES_KEY] = (*granted, *new)
                self._added.update(new)
                lines.append(
                    "Until this turn ends these run without asking (deny rules still apply): "
                    + ", ".join(skill.allowed_tools)
                )
            if skill.model is not None:
                if os.environ.get(PINNED_MODEL_ENV):
                    lines.append(f"model {skill.model} not applied: {PINNED_MODEL_ENV} pins it")
                else:
                    self._model = skill.model
                    lines.append(f"The rest of this turn uses model {skill.model}.")
        return lines + [f"Note: {n}" for n in skill.notes]

    def reset(self, ctx: ToolContext) -> None:
        """A new turn: no skill is active, its grants and model are gone."""
        with self._lock:
            self.active.clear()
            self._model = None
            kept = tuple(r for r in ctx.extra.get(GRANTED_RULES_KEY, ()) if r not in self._added)
            self._added.clear()
            if kept:
                ctx.extra[GRANTED_RULES_KEY] = kept
            else:
                ctx.extra.pop(GRANTED_RULES_KEY, None)

    def wrap(self, client: ModelClient) -> ModelClient:
        """``client`` sending the active skill's model instead of the request's, when set."""
        return _SkillModel(client, self)


class _SkillModel:
    def __init__(self, inner: ModelClient, session: SkillSession) -> None:
        self.inner, self.session = inner, session

    def complete(self, request: ModelRequest) -> ModelResponse:
        model = self.session.model
        if model is not None and model != request.model:
            request = request.model_copy(update={"model": model})
        return self.inner.complete(request)
