"""The lead's worktree tools through the real tool pipeline (registry, executor, policy)."""

from __future__ import annotations

from actors.tools.worktree import worktree_tools
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolResultBlock, ToolUseBlock
from harness.tools.base import ToolContext
from harness.tools.executor import ToolExecutor
from harness.tools.registry import ToolRegistry
from tests.actors.worktrees.worktree_support import Env, commit_file, env, git

__all__ = ["env"]


def _executor(env: Env, allow: tuple[str, ...] = ()) -> ToolExecutor:
    registry = ToolRegistry(worktree_tools(env.wt))
    return ToolExecutor(registry, HarnessPolicy(Permissions(allow=allow)))


def _call(ex: ToolExecutor, env: Env, tool: str, **args: object) -> ToolResultBlock:
    ctx = ToolContext(agent="lead", root=env.root, cwd=env.root)
    return ex.run_one(ToolUseBlock(id="c1", name=tool, input=dict(args)), ctx)


def _text(block: ToolResultBlock) -> str:
    content = block.content
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") for part in content)


def test_create_is_allowed_and_reports_errors_to_the_model(env: Env) -> None:
    ex = _executor(env)
    tid = env.task()
    ok = _call(ex, env, "create_worktree", name="a", task_id=tid)
    assert not ok.is_error and "wt/a" in _text(ok) and tid in _text(ok)
    bad = _call(ex, env, "create_worktree", name="../a", task_id=tid)
    assert bad.is_error and "invalid worktree name" in _text(bad)
    again = _call(ex, env, "create_worktree", name="b", task_id=tid)
    assert again.is_error and "already bound" in _text(again)
    assert "remove_worktree" not in ToolRegistry(worktree_tools(env.wt))


def test_merge_asks_by_default(env: Env) -> None:
    tid = env.task()
    env.wt.create("a", tid)
    commit_file(env.wt.path("a"), "a.txt", "a\n")
    env.claim(tid)
    env.complete(tid)
    before = git(env.root, "rev-parse", "HEAD")
    denied = _call(_executor(env), env, "merge_worktree", name="a")
    assert denied.is_error and "approval" in _text(denied)
    assert git(env.root, "rev-parse", "HEAD") == before
    dont_ask = ToolExecutor(
        ToolRegistry(worktree_tools(env.wt)),
        HarnessPolicy(Permissions(mode="dontAsk")),
    )
    assert _call(dont_ask, env, "merge_worktree", name="a").is_error
    merged = _call(_executor(env, allow=("merge_worktree",)), env, "merge_worktree", name="a")
    assert not merged.is_error and "fast-forward" in _text(merged)
    assert (env.root / "a.txt").exists()


def test_merge_conflict_lists_files_for_the_lead(env: Env) -> None:
    tid = env.task()
    env.wt.create("a", tid)
    commit_file(env.wt.path("a"), "README.md", "theirs\n")
    env.claim(tid)
    env.complete(tid)
    commit_file(env.root, "README.md", "ours\n")
    result = _call(_executor(env, allow=("merge_worktree",)), env, "merge_worktree", name="a")
    assert result.is_error
    assert "- README.md" in _text(result) and "follow-up task" in _text(result)
