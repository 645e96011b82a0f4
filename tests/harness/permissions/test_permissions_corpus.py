"""Wrapped dangerous commands never come out `allow` when `rm` or the target is denied."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.permissions.checks import Permissions
from harness.settings import PermissionMode
from harness.tools.base import PermissionRequest, ToolContext

CORPUS = [
    "rm -rf x",
    "FOO=1 rm -rf x",
    "bash -c 'rm -rf x'",
    'sh -c "rm -rf x"',
    "zsh -c 'ls; rm -rf x'",
    "$(rm -rf x)",
    "echo $(rm -rf x)",
    "echo `rm -rf x`",
    "cat <(rm -rf x)",
    "env rm -rf x",
    "env -i FOO=1 rm -rf x",
    "\\rm -rf x",
    "/bin/rm -rf x",
    "/usr/bin/env rm x",
    "'rm' -rf x",
    "r''m -rf x",
    "command rm x",
    "builtin command rm x",
    "exec rm x",
    "nice -n 5 rm x",
    "nohup rm x &",
    "timeout 10 rm x",
    "time rm x",
    "sudo rm x",
    "sudo -u root rm x",
    "find . -delete",
    "find . -name '*.tmp' -exec rm {} \\;",
    "find . -execdir rm -f {} +",
    "ls | xargs rm",
    "ls | xargs -0 -n1 rm -f",
    'eval "rm -rf x"',
    "eval rm -rf x",
    "ls && rm x",
    "ls || rm x",
    "ls; rm x",
    "ls | rm x",
    "(rm x)",
    "{ rm x; }",
    "if true; then rm x; fi",
    "for f in *; do rm $f; done",
    "f() { rm x; }; f",
    "cat <<EOF\n$(rm -rf x)\nEOF",
    "$CMD -rf x",
    "r$(echo m) -rf x",
    "{rm,-rf,x}",
    "/bin/r? -rf x",
    'bash -c "$(echo rm) x"',
    "X=rm; $X -rf x",
    "echo rm -rf x | bash",
    "bash script.sh",
    "echo x > .git/hooks/pre-commit",
    "echo x >> .git/config",
    "cat a > .team/settings.json",
    "tee .git/hooks/post-checkout < a",
    "echo x > ../outside",
    "echo x > /etc/cron.d/x",
    "ls > .mcp.json",
]


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    return ToolContext(agent="alice", root=tmp_path, cwd=tmp_path)


def shell(command: str) -> PermissionRequest:
    return PermissionRequest(tool="bash", kind="shell", target=command)


MODES: list[PermissionMode] = ["default", "acceptEdits", "dontAsk", "bypassPermissions", "plan"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("command", CORPUS)
def test_corpus_is_never_allowed(ctx: ToolContext, command: str, mode: PermissionMode) -> None:
    # Everything a user might allow, except rm: the deny rule and protected paths must hold.
    p = Permissions(
        deny=["Bash(rm:*)", "Bash(tee:*)"],
        allow=["Bash(ls:*)", "Bash(echo:*)", "Bash(cat:*)", "Bash(find:*)", "Edit", "Read"],
    )
    result = p.check(shell(command), ctx, mode=mode)
    assert result.decision != "allow", (command, mode, result.reason)
    if mode in ("dontAsk", "bypassPermissions", "plan"):
        assert result.decision == "deny", (command, mode, result.reason)


# --- property: any stack of wrappers around a denied command never yields allow ---------------


def _env(cmd: str) -> str:
    return f"env FOO=1 {cmd}"


def _prefix(cmd: str) -> str:
    return f"A=1 B=$HOME {cmd}"


def _bash_c(cmd: str) -> str:
    return f"bash -c {shlex.quote(cmd)}"


def _sh_c(cmd: str) -> str:
    return f"sh -ec {shlex.quote(cmd)}"


def _subst(cmd: str) -> str:
    return f"echo $( {cmd} )"


def _backticks(cmd: str) -> str:
    return f"echo `{cmd}`" if "`" not in cmd else f"echo $({cmd})"


def _procsub(cmd: str) -> str:
    return f"cat <({cmd})"


def _eval(cmd: str) -> str:
    return f"eval {shlex.quote(cmd)}"


def _xargs(cmd: str) -> str:
    return f"ls | xargs {cmd}"


def _simple(word: str):  # type: ignore[no-untyped-def]
    return lambda cmd: f"{word} {cmd}"


def _and(cmd: str) -> str:
    return f"ls && {cmd}"


def _pipe(cmd: str) -> str:
    return f"{cmd} | cat"


def _subshell(cmd: str) -> str:
    return f"( {cmd} )"


def _group(cmd: str) -> str:
    return f"{{ {cmd}; }}"


def _if(cmd: str) -> str:
    return f"if true; then {cmd}; fi"


def _func(cmd: str) -> str:
    return f"g() {{ {cmd}; }}; g"


def _find_exec(cmd: str) -> str:
    return f"find . -exec {cmd} {{}} \\;"


WRAPPERS = [
    _env, _prefix, _bash_c, _sh_c, _subst, _backticks, _procsub, _eval, _xargs, _and, _pipe,
    _subshell, _group, _if, _func, _find_exec,
    _simple("command"), _simple("exec"), _simple("nohup"), _simple("time"), _simple("sudo"),
    _simple("timeout 5"), _simple("nice -n 2"), _simple("stdbuf -o0"), _simple("/usr/bin/env"),
]  # fmt: skip
DENIED = ["rm -rf x", "\\rm x", "/bin/rm -f x", "rm", "git push --force origin main"]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    base=st.sampled_from(DENIED),
    stack=st.lists(st.sampled_from(WRAPPERS), min_size=1, max_size=4),
    mode=st.sampled_from(MODES),
)
def test_wrapping_a_denied_command_never_allows(
    ctx: ToolContext,
    base: str,
    stack: list,
    mode: PermissionMode,  # type: ignore[type-arg]
) -> None:
    p = Permissions(
        deny=["Bash(rm:*)", "Bash(git push --force:*)"],
        allow=["Bash(ls:*)", "Bash(echo:*)", "Bash(cat:*)", "Bash(find:*)", "Bash(git:*)"],
    )
    command = base
    for wrap in stack:
        command = wrap(command)
    result = p.check(shell(command), ctx, mode=mode)
    assert result.decision != "allow", (command, mode, result.reason)


@pytest.mark.deep
@settings(
    max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    base=st.sampled_from(DENIED),
    stack=st.lists(st.sampled_from(WRAPPERS), min_size=1, max_size=6),
    mode=st.sampled_from(MODES),
)
def test_wrapping_a_denied_command_never_allows_deep(
    ctx: ToolContext,
    base: str,
    stack: list,
    mode: PermissionMode,  # type: ignore[type-arg]
) -> None:
    test_wrapping_a_denied_command_never_allows.hypothesis.inner_test(ctx, base, stack, mode)  # type: ignore[attr-defined]
