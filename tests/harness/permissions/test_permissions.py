"""Permissions: rule precedence, aliases, modes, path confinement and protected files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.permissions.checks import Permissions
from harness.permissions.rules import Rule, RuleError
from harness.settings import PermissionMode, PermissionSettings
from harness.tools.base import PermissionRequest, ToolContext


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".team").mkdir()
    return ToolContext(agent="alice", root=root, cwd=root)


def read(path: str, tool: str = "read_file") -> PermissionRequest:
    return PermissionRequest(tool=tool, kind="read", target=path, paths=(path,), read_only=True)


def write(path: str, tool: str = "write_file") -> PermissionRequest:
    return PermissionRequest(tool=tool, kind="write", target=path, paths=(path,))


def shell(command: str) -> PermissionRequest:
    return PermissionRequest(tool="bash", kind="shell", target=command)


def decide(
    p: Permissions, req: PermissionRequest, ctx: ToolContext, mode: PermissionMode | None = None
) -> str:
    return p.check(req, ctx, mode=mode).decision


def test_rule_syntax() -> None:
    assert Rule.parse("Bash(git commit:*)") == Rule("Bash(git commit:*)", "Bash", "git commit:*")
    assert Rule.parse("mcp__srv__*").specifier is None
    assert Rule.parse("Read(*)").specifier is None
    with pytest.raises(RuleError):
        Rule.parse("Bash(")
    with pytest.raises(ValueError):
        PermissionSettings.model_validate({"deny": ["not a rule("]})
    with pytest.raises(ValueError):
        PermissionSettings.model_validate({"alow": []})


def test_deny_beats_ask_beats_allow(ctx: ToolContext) -> None:
    p = Permissions(
        allow=["Bash(git:*)"], ask=["Bash(git push:*)"], deny=["Bash(git push --force:*)"]
    )
    assert decide(p, shell("git commit -m x"), ctx) == "allow"
    assert decide(p, shell("git push origin main"), ctx) == "ask"
    assert decide(p, shell("git push --force origin main"), ctx) == "deny"
    r = p.check(shell("git push --force"), ctx)
    assert "Bash(git push --force:*)" in r.reason


def test_exact_prefix_and_glob_specifiers(ctx: ToolContext) -> None:
    p = Permissions(allow=["Bash(npm run test)", "Bash(make * check)"])
    assert decide(p, shell("npm run test"), ctx) == "allow"
    assert decide(p, shell("npm run test --watch"), ctx) == "ask"
    assert decide(p, shell("make -j4 check"), ctx) == "allow"
    assert decide(p, shell("make install"), ctx) == "ask"


def test_aliases_cover_the_tool_families(ctx: ToolContext) -> None:
    (ctx.root / "secrets").mkdir()
    p = Permissions(deny=["Read(./secrets/**)", "Edit(src/**)"], allow=["Bash"])
    assert decide(p, read("secrets/key"), ctx) == "deny"
    assert decide(p, read("secrets", tool="grep"), ctx) == "deny"
    assert decide(p, write("src/a.py"), ctx) == "deny"
    assert decide(p, write("src/a.py", tool="edit_file"), ctx) == "deny"
    assert decide(p, write("docs/a.md"), ctx) == "ask"
    assert decide(p, shell("npm test"), ctx) == "allow"
    assert decide(p, shell("cat secrets/key"), ctx) == "deny"


def test_mcp_and_team_tool_names(ctx: ToolContext) -> None:
    p = Permissions(allow=["mcp__github__*"], deny=["mcp__danger", "send_message"])
    mcp = PermissionRequest(tool="mcp__github__list_issues", kind="other")
    assert decide(p, mcp, ctx) == "allow"
    assert decide(p, PermissionRequest(tool="mcp__danger__boom", kind="other"), ctx) == "deny"
    assert decide(p, PermissionRequest(tool="mcp__other__x", kind="other"), ctx) == "ask"
    assert decide(p, PermissionRequest(tool="send_message", kind="other"), ctx) == "deny"
    assert decide(p, PermissionRequest(tool="todo_write", kind="other"), ctx) == "allow"


def test_defaults(ctx: ToolContext) -> None:
    p = Permissions()
    assert decide(p, read("src/a.py"), ctx) == "allow"
    assert decide(p, write("src/a.py"), ctx) == "ask"
    for safe in [
        "ls -la",
        "git status",
        "git log --oneline | head -5",
        "rg foo src",
        "find . -name x",
    ]:
        assert decide(p, shell(safe), ctx) == "allow", safe
    for unsafe in ["npm install", "find . -delete", "sort -o out x", "git push", "cat /etc/passwd"]:
        assert decide(p, shell(unsafe), ctx) == "ask", unsafe


def test_modes(ctx: ToolContext) -> None:
    p = Permissions(deny=["Bash(rm:*)"], ask=["Edit(docs/**)"])
    assert decide(p, write("src/a.py"), ctx, "acceptEdits") == "allow"
    assert decide(p, write("docs/a.md"), ctx, "acceptEdits") == "ask"
    assert decide(p, shell("echo x > src/out.txt"), ctx, "acceptEdits") == "allow"
    assert decide(p, write("src/a.py"), ctx, "plan") == "deny"
    assert decide(p, shell("npm test"), ctx, "plan") == "deny"
    assert decide(p, shell("ls"), ctx, "plan") == "allow"
    assert decide(p, read("src/a.py"), ctx, "plan") == "allow"
    assert decide(p, write("src/a.py"), ctx, "dontAsk") == "deny"
    assert decide(p, write("src/a.py"), ctx, "bypassPermissions") == "allow"
    assert decide(p, shell("npm test"), ctx, "bypassPermissions") == "allow"
    assert decide(p, shell("rm -rf x"), ctx, "bypassPermissions") == "deny"
    assert decide(p, shell("$CMD -rf x"), ctx, "bypassPermissions") == "deny"
    assert decide(p, write(".git/config"), ctx, "bypassPermissions") == "deny"
    assert decide(p, write("../elsewhere"), ctx, "bypassPermissions") == "deny"


def test_read_only_context_forces_plan_mode(ctx: ToolContext) -> None:
    ctx.read_only = True
    assert decide(Permissions(mode="bypassPermissions"), write("src/a.py"), ctx) == "deny"


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "src/../../outside.txt", "~/x"])
def test_paths_outside_the_root_are_denied(ctx: ToolContext, path: str) -> None:
    p = Permissions(allow=["Edit"])
    assert decide(p, read(path), ctx) == "deny"
    assert decide(p, write(path), ctx) == "deny"


def test_explicit_allow_lets_a_read_outside(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    target = str(tmp_path / "shared" / "doc.md")
    p = Permissions(allow=[f"Read(/{tmp_path}/shared/**)"])
    assert decide(p, read(target), ctx) == "allow"
    assert decide(p, write(target), ctx) == "deny"


def test_symlink_out_of_the_root_is_denied(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path / "secret.txt", ctx.root / "src" / "link.txt")
    p = Permissions(allow=["Edit"])
    assert decide(p, read("src/link.txt"), ctx) == "deny"
    assert decide(p, write("src/link.txt"), ctx) == "deny"


def test_symlink_loop_and_nul_are_denied_with_reasons(ctx: ToolContext) -> None:
    os.symlink(ctx.root / "b", ctx.root / "a")
    os.symlink(ctx.root / "a", ctx.root / "b")
    p = Permissions()
    r = p.check(read("a/x"), ctx)
    assert r.decision == "deny" and "loop" in r.reason
    r = p.check(read("src/a\x00b"), ctx)
    assert r.decision == "deny" and "NUL" in r.reason


@pytest.mark.parametrize(
    "path",
    [
        ".team/settings.json",
        ".team/journal.jsonl",
        ".team/mailboxes/bob/new/1",
        ".git/config",
        ".git/hooks/pre-commit",
        "sub/.git/config",
        ".mcp.json",
        ".claude/settings.json",
    ],
)
def test_protected_files_are_never_writable(ctx: ToolContext, path: str) -> None:
    p = Permissions(allow=["Edit", "Write(**)"])
    for mode in ("default", "acceptEdits", "bypassPermissions"):
        r = p.check(write(path), ctx, mode=mode)  # type: ignore[arg-type]
        assert r.decision == "deny" and "protected" in r.reason, (path, mode)
    assert decide(p, read(path), ctx) == "allow"


def test_symlink_into_a_protected_file_is_denied(ctx: ToolContext) -> None:
    os.symlink(ctx.root / ".git" / "hooks", ctx.root / "src" / "hooks")
    r = Permissions(allow=["Edit"]).check(write("src/hooks/pre-commit"), ctx)
    assert r.decision == "deny"
    assert "protected" in r.reason


def test_team_memory_is_writable(ctx: ToolContext) -> None:
    assert decide(Permissions(allow=["Edit"]), write(".team/memory/notes.md"), ctx) == "allow"


def test_gitignore_style_patterns(ctx: ToolContext) -> None:
    p = Permissions(deny=["Read(*.env)", "Read(build/)"])
    assert decide(p, read("a/b/prod.env"), ctx) == "deny"
    assert decide(p, read("build/out/x.o"), ctx) == "deny"
    assert decide(p, read("src/build.py"), ctx) == "allow"


def test_cd_out_of_the_root_is_not_auto_allowed(ctx: ToolContext) -> None:
    p = Permissions()
    assert decide(p, shell("cd src && ls"), ctx) == "allow"
    assert decide(p, shell("cd / && cat etc/passwd"), ctx) == "ask"


def test_shell_breakdown_lists_every_part(ctx: ToolContext) -> None:
    r = Permissions(deny=["Bash(rm:*)"]).check(shell("ls; rm -rf x > out.txt"), ctx)
    assert r.shell is not None
    parts = {p.part: p.verdict.decision for p in r.shell.parts}
    assert parts["ls"] == "allow"
    assert parts["rm -rf x"] == "deny"
    assert parts["> out.txt"] == "ask"
    assert r.decision == "deny"


def test_from_settings() -> None:
    s = PermissionSettings.model_validate({"defaultMode": "plan", "deny": ["Bash(rm:*)"]})
    p = Permissions.from_settings(s)
    assert p.mode == "plan"
    assert Permissions.from_settings(s, mode="default").mode == "default"
