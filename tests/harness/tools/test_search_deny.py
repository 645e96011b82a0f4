"""glob and grep skip what a permission deny rule forbids reading, through the real executor and
policy, in every mode: no content and no name of a denied file reaches the output, which says how
many paths were skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ToolResultBlock, ToolUseBlock
from harness.settings import PermissionMode
from harness.tools.base import ToolContext
from harness.tools.executor import ToolExecutor
from harness.tools.files import ReadFileTool
from harness.tools.registry import ToolRegistry
from harness.tools.search import GlobTool, GrepTool

MODES: list[PermissionMode] = ["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"]
DENY = ["Read(./.env)", "Read(**/*.pem)", "Read(./secrets/**)"]


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "repo"
    files = {
        ".env": "SECRET_KEY=hunter2\n",
        "app.py": "SECRET_KEY = read_key()\n",
        "certs/prod-signing.pem": "SECRET_KEY pem body\n",
        "secrets/vault.txt": "SECRET_KEY=vault\n",
        "docs/notes.md": "nothing here\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "env_link").symlink_to(root / ".env")
    return ToolContext(agent="a", root=root, cwd=root)


def call(ctx: ToolContext, mode: PermissionMode, name: str, **input: Any) -> ToolResultBlock:
    policy = HarnessPolicy(Permissions(deny=DENY), mode=mode)
    ex = ToolExecutor(ToolRegistry([GlobTool(), GrepTool(), ReadFileTool()]), policy)
    [result] = ex.run_batch([ToolUseBlock(id="t", name=name, input=input)], ctx)
    return result


SECRETS = ("hunter2", "vault", "pem body", ".env", "prod-signing", "vault.txt", "env_link")


@pytest.mark.parametrize("mode", MODES)
def test_grep_skips_denied_files_and_says_so(ctx: ToolContext, mode: PermissionMode) -> None:
    r = call(ctx, mode, "grep", pattern="SECRET_KEY", output_mode="content")
    assert not r.is_error
    assert "app.py:1:SECRET_KEY = read_key()" in r.content
    assert not any(s in r.content for s in SECRETS), r.content
    # .env, its symlink, the .pem file and the secrets directory (pruned whole)
    assert "(4 paths skipped: permission deny rules forbid reading them)" in r.content


@pytest.mark.parametrize("mode", MODES)
def test_glob_skips_denied_names(ctx: ToolContext, mode: PermissionMode) -> None:
    r = call(ctx, mode, "glob", pattern="**/*")
    assert not r.is_error
    assert "app.py" in r.content and "docs/notes.md" in r.content
    assert not any(s in r.content for s in SECRETS), r.content
    assert "paths skipped: permission deny rules" in r.content


def test_a_search_with_nothing_left_still_says_what_was_skipped(ctx: ToolContext) -> None:
    r = call(ctx, "default", "grep", pattern="hunter2")
    assert r.content.startswith("No matches for 'hunter2'")
    assert "skipped" in r.content and "hunter2\n" not in r.content
    g = call(ctx, "default", "glob", pattern="**/*.pem")
    assert g.content == (
        "No files match '**/*.pem'\n(1 path skipped: permission deny rules forbid reading them)"
    )


def test_searching_a_denied_path_directly_is_refused(ctx: ToolContext) -> None:
    for name, inp in (
        ("grep", {"pattern": "S", "path": ".env"}),
        ("grep", {"pattern": "S", "path": "secrets"}),
        ("glob", {"pattern": "*", "path": "secrets"}),
        ("read_file", {"path": ".env"}),
        ("read_file", {"path": "env_link"}),
    ):
        r = call(ctx, "bypassPermissions", name, **inp)
        assert r.is_error and "Permission denied" in r.content, (name, inp)
        assert "hunter2" not in r.content


def test_without_deny_rules_nothing_is_skipped(ctx: ToolContext) -> None:
    ex = ToolExecutor(ToolRegistry([GrepTool()]), HarnessPolicy(Permissions()))
    [r] = ex.run_batch([ToolUseBlock(id="t", name="grep", input={"pattern": "hunter2"})], ctx)
    assert ".env" in r.content and "skipped" not in r.content
