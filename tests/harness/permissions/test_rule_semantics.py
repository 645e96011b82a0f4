"""Rule matching and modes as Claude Code documents them: the optional trailing `` *``, the
legacy ``:*``, variable assignments before a command, Claude Code's tool names, explicit ask rules
in ``bypassPermissions``, fail-closed plan mode and ``additionalDirectories``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.permissions.checks import Permissions
from harness.settings import PermissionMode, PermissionSettings
from harness.tools.base import PermissionRequest, ToolContext


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "repo"
    root.mkdir()
    return ToolContext(agent="alice", root=root, cwd=root)


def shell(command: str) -> PermissionRequest:
    return PermissionRequest(tool="bash", kind="shell", target=command)


def decide(
    p: Permissions, req: PermissionRequest, ctx: ToolContext, mode: PermissionMode | None = None
) -> str:
    return p.check(req, ctx, mode=mode).decision


def test_a_trailing_space_star_also_matches_the_bare_command(ctx: ToolContext) -> None:
    p = Permissions(allow=["Bash(make check *)", "Bash(ls*)"])
    assert decide(p, shell("make check"), ctx) == "allow"
    assert decide(p, shell("make check -j4"), ctx) == "allow"
    assert decide(p, shell("make checkout"), ctx) == "ask"  # a word boundary
    assert decide(p, shell("lsof -i"), ctx) == "allow"  # no space: no boundary


def test_the_legacy_colon_star_prefix(ctx: ToolContext) -> None:
    p = Permissions(allow=["Bash(docker ps:*)"])
    assert decide(p, shell("docker ps"), ctx) == "allow"
    assert decide(p, shell("docker ps -a"), ctx) == "allow"
    assert decide(p, shell("docker psx"), ctx) == "ask"


@pytest.mark.parametrize(
    "command", ["DOCKER_HOST=evil docker ps", "env DOCKER_HOST=evil docker ps", "A=1 B=2 docker ps"]
)
def test_an_allow_rule_does_not_match_past_assignments_it_does_not_name(
    command: str, ctx: ToolContext
) -> None:
    p = Permissions(allow=["Bash(docker ps:*)"])
    assert decide(p, shell(command), ctx) == "ask"
    named = Permissions(allow=["Bash(DOCKER_HOST=tcp://ci:2375 docker ps:*)"])
    assert decide(named, shell("DOCKER_HOST=tcp://ci:2375 docker ps -a"), ctx) == "allow"


def test_deny_and_ask_rules_match_past_assignments(ctx: ToolContext) -> None:
    p = Permissions(deny=["Bash(rm -rf:*)"], ask=["Bash(cat:*)"], allow=["Bash"])
    assert decide(p, shell("FOO=1 rm -rf /"), ctx) == "deny"
    assert decide(p, shell("LC_ALL=C cat README"), ctx) == "ask"


@pytest.mark.parametrize(
    ("rule", "req"),
    [
        ("Task", PermissionRequest(tool="task", kind="other")),
        ("Agent", PermissionRequest(tool="task", kind="other")),
        ("Task(*)", PermissionRequest(tool="task", kind="other")),
        ("TodoWrite", PermissionRequest(tool="todo_write", kind="other", read_only=True)),
        ("Skill", PermissionRequest(tool="load_skill", kind="other", target="deploy")),
        ("Skill(deploy)", PermissionRequest(tool="load_skill", kind="other", target="deploy")),
        ("Skill(dep*)", PermissionRequest(tool="load_skill", kind="other", target="deploy")),
        ("Skill(deploy *)", PermissionRequest(tool="load_skill", kind="other", target="deploy")),
        ("Skill(deploy:*)", PermissionRequest(tool="load_skill", kind="other", target="deploy")),
    ],
)
def test_claude_code_tool_names_reach_our_tools(
    rule: str, req: PermissionRequest, ctx: ToolContext
) -> None:
    for mode in ("default", "bypassPermissions"):
        assert decide(Permissions(deny=[rule]), req, ctx, mode) == "deny"  # type: ignore[arg-type]


def test_a_skill_rule_names_one_skill(ctx: ToolContext) -> None:
    p = Permissions(deny=["Skill(deploy)"])
    other = PermissionRequest(tool="load_skill", kind="other", target="review", read_only=True)
    assert decide(p, other, ctx) == "allow"


@pytest.mark.parametrize(
    "req",
    [
        shell("git push origin main"),
        PermissionRequest(tool="write_file", kind="write", target="a.py", paths=("a.py",)),
        PermissionRequest(tool="task", kind="other"),
    ],
)
def test_explicit_ask_rules_still_ask_in_bypass_mode(
    req: PermissionRequest, ctx: ToolContext
) -> None:
    p = Permissions(ask=["Bash(git push *)", "Write(a.py)", "Task"], mode="bypassPermissions")
    result = p.check(req, ctx)
    assert result.decision == "ask"
    assert not result.overridable  # a hook's allow cannot answer it either
    assert decide(p, req, ctx, "dontAsk") == "deny"
    assert decide(Permissions(mode="bypassPermissions"), req, ctx) == "allow"


def test_a_command_that_might_match_a_deny_rule_is_refused_in_bypass(ctx: ToolContext) -> None:
    p = Permissions(deny=["Bash(rm -rf:*)"])
    assert decide(p, shell("rm $FLAGS x"), ctx) == "ask"
    assert decide(p, shell("rm $FLAGS x"), ctx, "bypassPermissions") == "deny"


def test_plan_mode_refuses_tools_that_do_not_say_they_may_plan(ctx: ToolContext) -> None:
    p = Permissions(mode="plan")
    changing = PermissionRequest(tool="create_task", kind="other")
    planning = PermissionRequest(tool="submit_plan", kind="other", read_only=True)
    assert decide(p, changing, ctx) == "deny"
    assert decide(p, planning, ctx) == "allow"


def test_additional_directories_are_working_area(ctx: ToolContext, tmp_path: Path) -> None:
    other = tmp_path / "shared"
    other.mkdir()
    (other / "notes.md").write_text("n\n")
    (other / ".env").write_text("S=1\n")
    settings = PermissionSettings.model_validate(
        {"additionalDirectories": [str(other)], "deny": [f"Read(//{str(other)[1:]}/.env)"]}
    )
    p = Permissions.from_settings(settings)
    notes, env = str(other / "notes.md"), str(other / ".env")
    read = PermissionRequest(tool="read_file", kind="read", target=notes, paths=(notes,))
    write = PermissionRequest(tool="write_file", kind="write", target=notes, paths=(notes,))
    assert decide(p, read, ctx) == "allow"
    assert decide(p, write, ctx) == "ask"
    assert decide(p, write, ctx, "acceptEdits") == "allow"
    assert decide(p, shell(f"cat {notes}"), ctx) == "allow"
    assert decide(p, shell(f"cat {env}"), ctx, "bypassPermissions") == "deny"
    # Without the setting the same paths are outside the working root.
    assert decide(Permissions(), read, ctx) == "deny"
    assert decide(Permissions(), write, ctx, "acceptEdits") == "deny"
    assert decide(Permissions(), shell(f"cat {notes}"), ctx) == "ask"
    protected = str(other / ".git" / "config")
    hook = PermissionRequest(tool="write_file", kind="write", target=protected, paths=(protected,))
    assert decide(p, hook, ctx, "bypassPermissions") == "deny"
