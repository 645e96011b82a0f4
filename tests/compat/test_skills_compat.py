"""Real skills load as Claude Code loads them: from ``.claude/skills/<name>/SKILL.md``, with the
name (the folder's when the front matter has none), the description and ``allowed-tools``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.context.skills import SkillLibrary
from harness.permissions.checks import GRANTED_RULES_KEY, Permissions
from harness.permissions.rules import Rule
from harness.tools.base import PermissionRequest, ToolContext
from tests.compat import artifacts
from tests.compat.support import git_repo

FOLDERS = sorted({a.file.split("/")[1] for a in artifacts.of_kind("skills")})
"""``<owner>__<repo>__<skill>`` folders under ``data/skills/``."""


def install(root: Path, folder: str) -> str:
    name = folder.split("__")[-1]
    artifacts.install_skill(f"skills/{folder}", root / ".claude" / "skills" / name)
    return name


@pytest.mark.parametrize("folder", FOLDERS)
def test_real_skill_loads_with_name_and_description(tmp_path: Path, folder: str) -> None:
    root = git_repo(tmp_path)
    name = install(root, folder)
    library = SkillLibrary(root, home=Path.home())
    assert library.errors == []
    skill = library.get(name)
    assert skill.scope == "project"
    assert len(skill.description) > 20
    assert f"- {name}: " in library.catalog()
    body = library.load(name)
    assert body.strip()
    assert "\n---" not in body.split("\n", 3)[2][:4]  # the front matter is not in the body


def test_allowed_tools_are_granted_while_the_skill_is_active(tmp_path: Path) -> None:
    root = git_repo(tmp_path)
    name = install(root, "pydantic__pydantic-ai__pre-push-review")
    skill = SkillLibrary(root, home=Path.home()).get(name)
    assert skill.name == "pre-push-review"  # no `name:` in its front matter: the folder's
    assert len(skill.allowed_tools) == 12
    assert "Bash(gh pr view:*)" in skill.allowed_tools
    for rule in skill.allowed_tools:
        Rule.parse(rule)

    ctx = ToolContext(agent="a", root=root, cwd=root)
    diff = PermissionRequest(tool="bash", kind="shell", target="gh pr view 1234")
    push = PermissionRequest(tool="bash", kind="shell", target="git push origin main")
    perms = Permissions()
    assert perms.check(diff, ctx).decision == "ask"
    ctx.extra[GRANTED_RULES_KEY] = tuple(Rule.parse(r) for r in skill.allowed_tools)
    assert perms.check(diff, ctx).decision == "allow"
    assert perms.check(push, ctx).decision == "ask"  # not in allowed-tools
    denied = Permissions(deny=["Bash(gh pr view:*)"])
    assert denied.check(diff, ctx).decision == "deny"  # never over a deny rule


def test_enough_real_skills() -> None:
    assert len(FOLDERS) >= 3
