"""Skills: ``SKILL.md`` files with YAML frontmatter (``name``, ``description``).

Looked up in ``.team/skills/<name>/SKILL.md`` then ``.claude/skills/<name>/SKILL.md`` (the first
wins on a name clash). Only the catalog (name + description) goes into the prompt; the body is
loaded on demand by the ``load_skill`` tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.errors import HarnessError

SKILL_DIRS = (Path(".team") / "skills", Path(".claude") / "skills")


class SkillError(HarnessError):
    """A skill file cannot be parsed, or a skill name is unknown."""


@dataclass(frozen=True)
class Skill:
    """One skill: its catalog entry and where its body lives."""

    name: str
    description: str
    path: Path


def parse_skill(path: Path) -> tuple[Skill, str]:
    """Parse one ``SKILL.md`` into its catalog entry and body; ``SkillError`` when malformed."""
    text = path.read_text(encoding="utf-8")
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
    name = str(meta.get("name") or path.parent.name).strip()
    description = " ".join(str(meta.get("description") or "").split())
    if not description:
        raise SkillError(f"{path}: frontmatter needs a description")
    body = text[end + 4 :].lstrip("\n")
    return Skill(name=name, description=description, path=path), body


class SkillLibrary:
    """The skills visible from one repository root (re-scanned on ``refresh``)."""

    def __init__(self, root: Path, dirs: tuple[Path, ...] = SKILL_DIRS) -> None:
        self.root = root
        self.dirs = dirs
        self.skills: dict[str, Skill] = {}
        self.errors: list[str] = []
        self.refresh()

    def refresh(self) -> None:
        found: dict[str, Skill] = {}
        errors: list[str] = []
        for d in self.dirs:
            base = self.root / d
            if not base.is_dir():
                continue
            for path in sorted(base.glob("*/SKILL.md")):
                try:
                    skill, _ = parse_skill(path)
                except (SkillError, OSError, UnicodeDecodeError) as exc:
                    errors.append(str(exc))
                    continue
                found.setdefault(skill.name, skill)
        self.skills, self.errors = dict(sorted(found.items())), errors

    def catalog(self) -> str:
        """The prompt section: one line per skill (empty when there are none)."""
        if not self.skills:
            return ""
        lines = ["Load a skill with load_skill(name) when its description fits the task."]
        lines += [f"- {s.name}: {s.description}" for s in self.skills.values()]
        return "\n".join(lines)

    def load(self, name: str) -> str:
        """The body of skill ``name`` with a note on where its files are."""
        skill = self.skills.get(name)
        if skill is None:
            known = ", ".join(self.skills) or "none"
            raise SkillError(f"unknown skill {name!r} (available: {known})")
        _, body = parse_skill(skill.path)
        return f"Skill {skill.name} (files in {skill.path.parent}):\n\n{body}"
