"""A teammate confined to its worktree: paths into the main checkout or another worktree, cd out,
and git redirection are denied before its normal policy is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.worktrees.confine import Confinement, confine_policy, confined_context
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolUseBlock
from harness.tools.base import PermissionRequest
from tests.actors.worktrees.worktree_support import Env, env
from tests.support.fakes import AllowAll

__all__ = ["env"]


def _bash(command: str) -> tuple[ToolUseBlock, PermissionRequest]:
    call = ToolUseBlock(id="t1", name="bash", input={"command": command})
    return call, PermissionRequest(tool="bash", kind="shell", target=command)


def _file(path: str, *, write: bool) -> tuple[ToolUseBlock, PermissionRequest]:
    tool = "write_file" if write else "read_file"
    call = ToolUseBlock(id="t1", name=tool, input={"path": path})
    if write:
        return call, PermissionRequest(tool=tool, kind="write", target=path, paths=(path,))
    return call, PermissionRequest(tool=tool, kind="read", target=path, paths=(path,))


@pytest.fixture
def two(env: Env) -> tuple[Env, Path, Path]:
    env.wt.create("mine", env.task())
    env.wt.create("theirs", env.task())
    return env, env.wt.path("mine"), env.wt.path("theirs")


DENIED_SHELL = [
    "cd ../.. && git commit -am x",
    "cd ../../src",
    "cd /",
    "cd",
    "cd -",
    "pushd ..",
    'cd "$HOME"',
    "git -C {main} commit -am x",
    "git --git-dir={main}/.git log",
    "git --work-tree {main} status",
    "git -c core.fsmonitor=/tmp/x status",
    "GIT_DIR={main}/.git git log",
    "export GIT_WORK_TREE={main}; git add -A",
    "env GIT_INDEX_FILE=/tmp/i git add .",
    "cat {main}/README.md",
    "cp evil ../../.git/hooks/pre-commit",
    "echo x > {main}/.git/hooks/pre-commit",
    "echo x > ../theirs/stolen.txt",
    "ls {theirs}",
    "rm -rf ../theirs",
    "git config core.fsmonitor /tmp/x",
    "git config --worktree core.hooksPath /tmp/h",
    "git worktree remove ../theirs",
    "sh -c 'cd ../.. && make'",
]

ALLOWED_SHELL = [
    "git status",
    "git commit -am 'fix a/b parsing'",
    "ls src/ && cat README.md",
    "cd sub && ls",
    "git config --get user.name",
    "git log --oneline -- README.md",
    "python -m pytest -q",
    "cat /etc/hostname",
]


@pytest.mark.parametrize("command", DENIED_SHELL)
def test_shell_escapes_are_denied(two: tuple[Env, Path, Path], command: str) -> None:
    env, mine, theirs = two
    inner = AllowAll()
    policy = confine_policy(inner, mine, env.root)
    ctx = confined_context("w1", mine)
    text = command.format(main=env.root, theirs=theirs)
    verdict = policy.before(*_bash(text), ctx)
    assert verdict.decision == "deny", text
    assert inner.seen == []


@pytest.mark.parametrize("command", ALLOWED_SHELL)
def test_work_inside_the_worktree_goes_to_the_normal_policy(
    two: tuple[Env, Path, Path], command: str
) -> None:
    env, mine, _ = two
    (mine / "sub").mkdir()
    inner = AllowAll()
    policy = confine_policy(inner, mine, env.root)
    verdict = policy.before(*_bash(command), confined_context("w1", mine))
    assert verdict.decision == "allow", command
    assert inner.seen == ["bash"]


def test_file_tools(two: tuple[Env, Path, Path]) -> None:
    env, mine, theirs = two
    policy = confine_policy(AllowAll(), mine, env.root)
    ctx = confined_context("w1", mine)
    for path, write in [
        (str(env.root / "README.md"), False),
        ("../../README.md", True),
        (str(theirs / "README.md"), False),
        ("../theirs/new.txt", True),
        (str(env.root / ".team" / "journal.jsonl"), False),
    ]:
        verdict = policy.before(*_file(path, write=write), ctx)
        assert verdict.decision == "deny", path
        assert "confined to your worktree" in verdict.reason
    assert policy.before(*_file("src/new.py", write=True), ctx).decision == "allow"
    assert policy.before(*_file(str(mine / "README.md"), write=False), ctx).decision == "allow"


def test_a_symlink_into_the_main_checkout_is_followed(two: tuple[Env, Path, Path]) -> None:
    env, mine, _ = two
    (mine / "link").symlink_to(env.root)
    confinement = Confinement.of(mine, env.root)
    assert confinement.path("link/README.md", mine) is not None


def test_bypass_mode_cannot_lift_confinement(two: tuple[Env, Path, Path]) -> None:
    """Control: the harness alone in bypass mode would allow `git -C <main>`; confined, denied."""
    env, mine, _ = two
    ctx = confined_context("w1", mine)
    harness = HarnessPolicy(Permissions(mode="bypassPermissions"))
    command = f"git -C {env.root} commit -am x"
    assert harness.before(*_bash(command), ctx).decision == "allow"
    confined = confine_policy(harness, mine, env.root)
    verdict = confined.before(*_bash(command), ctx)
    assert verdict.decision == "deny" and "git -C" in verdict.reason
    assert confined.before(*_bash("git status"), ctx).decision == "allow"


def test_protected_worktree_git_file_stays_protected(two: tuple[Env, Path, Path]) -> None:
    env, mine, _ = two
    ctx = confined_context("w1", mine)
    policy = confine_policy(HarnessPolicy(Permissions(mode="bypassPermissions")), mine, env.root)
    assert policy.before(*_file(".git", write=True), ctx).decision == "deny"
    assert policy.before(*_bash("echo gitdir: /tmp > .git"), ctx).decision == "deny"
