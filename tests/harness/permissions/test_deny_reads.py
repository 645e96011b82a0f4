"""A file a ``Read`` deny rule covers stays unread through the shell too, in every mode: named,
through a glob, under a directory a command reads whole, inside or outside the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.permissions.checks import Permissions
from harness.settings import PermissionMode
from harness.tools.base import PermissionRequest, ToolContext

MODES: list[PermissionMode] = ["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"]
DENY = ["Read(./.env)", "Read(~/.ssh/**)", "Read(**/*.pem)"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    return home


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "repo"
    (root / "src" / "certs").mkdir(parents=True)
    (root / ".env").write_text("SECRET_KEY=hunter2\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "src" / "certs" / "server.pem").write_text("-----BEGIN-----\n")
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("SECRET in docs\n")
    return ToolContext(agent="alice", root=root, cwd=root)


def shell(p: Permissions, command: str, ctx: ToolContext, mode: PermissionMode) -> tuple[str, str]:
    r = p.check(PermissionRequest(tool="bash", kind="shell", target=command), ctx, mode=mode)
    return r.decision, r.reason


DENIED = [
    "cat .env",
    "cat ./.env",
    "cat .en*",
    "cat .{env,x}",
    "head -n1 .e{n,x}v",
    "sed -n p .env",
    "cp .env /tmp/x",
    "FOO=1 cat .env",
    "timeout 5 cat .env",
    "cat src/app.py .env",
    "grep -r SECRET .",
    "grep -R SECRET",
    "grep -rn SECRET src",
    "grep --recursive SECRET .",
    "rg SECRET",
    "rg SECRET src",
    "git grep SECRET",
    "cp -r . /tmp/copy",
    "tar czf /tmp/x.tgz .",
    "cat src/certs/*",
    "cat ~/.ssh/id_rsa",
    "cat ~/.ssh/*",
    "base64 ~/.ssh/id_rsa",
    "echo x && cat .env",
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("command", DENIED)
def test_shell_reads_of_denied_files_are_denied_in_every_mode(
    command: str, mode: PermissionMode, ctx: ToolContext, home: Path
) -> None:
    p = Permissions(deny=DENY, allow=["Bash"], home=home)
    decision, reason = shell(p, command, ctx, mode)
    assert decision == "deny", reason
    assert "Read(" in reason


def test_a_recursive_read_names_the_rule_and_the_grep_tool(ctx: ToolContext, home: Path) -> None:
    p = Permissions(deny=DENY, home=home)
    decision, reason = shell(p, "grep -r SECRET .", ctx, "default")
    assert decision == "deny"
    assert "Read(./.env)" in reason and "grep tool" in reason
    assert "hunter2" not in reason


@pytest.mark.parametrize(
    "command",
    ["cat src/app.py", "grep -r SECRET docs", "rg SECRET docs", "ls", "find . -name '*.py'",
     "echo .env", "grep -e .env docs/a.md", "ls -la src"],
)  # fmt: skip
def test_reads_that_miss_denied_files_still_pass(
    command: str, ctx: ToolContext, home: Path
) -> None:
    p = Permissions(deny=DENY, home=home)
    assert shell(p, command, ctx, "default")[0] == "allow"


def test_without_read_deny_rules_a_recursive_grep_is_not_refused(ctx: ToolContext) -> None:
    assert shell(Permissions(), "grep -r SECRET .", ctx, "default")[0] == "allow"


@pytest.mark.parametrize("command", ["cat $F", "ls | xargs cat", "find . -exec cat {} +"])
def test_a_read_of_a_file_known_only_at_run_time_is_refused_when_nobody_can_be_asked(
    command: str, ctx: ToolContext, home: Path
) -> None:
    p = Permissions(deny=DENY, allow=["Bash"], home=home)
    assert shell(p, command, ctx, "default")[0] == "ask"
    for mode in ("bypassPermissions", "dontAsk"):
        decision, reason = shell(p, command, ctx, mode)  # type: ignore[arg-type]
        assert decision == "deny", reason
    # Without a Read deny rule there is nothing to protect: bypass runs it.
    assert shell(Permissions(), command, ctx, "bypassPermissions")[0] == "allow"


@pytest.mark.parametrize("mode", MODES)
def test_read_file_of_a_denied_file_is_denied_in_every_mode(
    mode: PermissionMode, ctx: ToolContext, home: Path
) -> None:
    p = Permissions(deny=DENY, home=home)
    for path in (".env", "src/certs/server.pem", str(home / ".ssh" / "id_rsa")):
        req = PermissionRequest(tool="read_file", kind="read", target=path, paths=(path,))
        assert p.check(req, ctx, mode=mode).decision == "deny", path


def test_a_bash_deny_rule_matches_past_assignments_and_a_bare_trailing_star(
    ctx: ToolContext,
) -> None:
    p = Permissions(deny=["Bash(rm -rf *)"], allow=["Bash"])
    for command in ("rm -rf", "rm -rf /", "FOO=1 rm -rf /", "env A=b rm -rf x"):
        assert shell(p, command, ctx, "bypassPermissions")[0] == "deny", command
    assert shell(p, "rm -rfv x", ctx, "default")[0] == "allow"  # a word boundary, not a prefix
