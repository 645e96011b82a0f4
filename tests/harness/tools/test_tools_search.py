"""glob and grep over real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.ports import ToolResultBlock, ToolUseBlock
from harness.tools.base import ToolContext
from harness.tools.executor import ToolExecutor
from harness.tools.paths import glob_to_regex
from harness.tools.registry import ToolRegistry
from harness.tools.search import GlobTool, GrepInput, GrepTool
from tests.support.fakes import AllowAll


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "repo"
    files = {
        "main.py": "import os\nprint('hello')\n",
        "README.md": "Hello world\n",
        "src/app.py": "def hello():\n    return 'HELLO'\n\n\n\nx = 1\nhello()\n",
        "src/ui/view.ts": "const hello = 1;\n",
        "src/ui/view.tsx": "export {};\n",
        ".git/config": "hello = yes\n",
        "src/.git/HEAD": "hello\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "logo.png").write_bytes(b"\x89PNG\x00hello")
    (tmp_path / "outside.py").write_text("hello = 'outside'\n")
    (root / "out_link.py").symlink_to(tmp_path / "outside.py")
    (root / "out_dir").symlink_to(tmp_path)
    return ToolContext(agent="a", root=root, cwd=root)


def call(ctx: ToolContext, name: str, **input: Any) -> ToolResultBlock:
    ex = ToolExecutor(ToolRegistry([GlobTool(), GrepTool()]), AllowAll())
    [result] = ex.run_batch([ToolUseBlock(id="t", name=name, input=input)], ctx)
    return result


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.py", None, ["main.py", "src/app.py"]),
        ("*.py", None, ["main.py"]),
        ("src/**/*.{ts,tsx}", None, ["src/ui/view.ts", "src/ui/view.tsx"]),
        ("*.ts?", "src/ui", ["src/ui/view.tsx"]),
        ("**/HEAD", None, []),  # .git is never searched
        ("[Rm]*", None, ["README.md", "main.py"]),
    ],
)
def test_glob(ctx: ToolContext, pattern: str, path: str | None, expected: list[str]) -> None:
    r = call(ctx, "glob", pattern=pattern, **({"path": path} if path else {}))
    assert not r.is_error
    assert r.content == ("\n".join(expected) if expected else f"No files match {pattern!r}")


def test_glob_refuses_bad_input(ctx: ToolContext) -> None:
    absolute = call(ctx, "glob", pattern="/etc/*")
    assert absolute.is_error and "relative" in absolute.content
    outside = call(ctx, "glob", pattern="*", path="..")
    assert outside.is_error and "outside the working root" in outside.content
    unbalanced = call(ctx, "glob", pattern="*.{py")
    assert unbalanced.is_error and "unbalanced" in unbalanced.content


def test_glob_truncates(ctx: ToolContext) -> None:
    tool = GlobTool()
    tool.max_results = 2
    ex = ToolExecutor(ToolRegistry([tool]), AllowAll())
    [r] = ex.run_batch([ToolUseBlock(id="t", name="glob", input={"pattern": "**"})], ctx)
    lines = r.content.splitlines()
    assert len(lines) == 3 and lines[2].startswith("(truncated: ")


def test_grep_modes(ctx: ToolContext) -> None:
    files = call(ctx, "grep", pattern="hello")
    assert files.content == "main.py\nsrc/app.py\nsrc/ui/view.ts"  # no .git, binary, links out
    count = call(ctx, "grep", pattern="hello", output_mode="count", case_insensitive=True)
    assert count.content == "README.md:1\nmain.py:1\nsrc/app.py:3\nsrc/ui/view.ts:1"
    content = call(ctx, "grep", pattern=r"^hello\(\)|^def", path="src", output_mode="content")
    assert content.content == "src/app.py:1:def hello():\nsrc/app.py:7:hello()"


def test_grep_context_lines(ctx: ToolContext) -> None:
    r = call(ctx, "grep", pattern="def|x = 1", path="src/app.py", output_mode="content", context=1)
    assert r.content.splitlines() == [
        "src/app.py:1:def hello():",
        "src/app.py-2-    return 'HELLO'",
        "--",
        "src/app.py-5-",
        "src/app.py:6:x = 1",
        "src/app.py-7-hello()",
    ]


def test_grep_glob_filter_and_head_limit(ctx: ToolContext) -> None:
    assert call(ctx, "grep", pattern="hello", glob="*.ts").content == "src/ui/view.ts"
    assert call(ctx, "grep", pattern=".", glob="src/*.py").content == "src/app.py"
    limited = call(ctx, "grep", pattern=".", head_limit=2)
    assert limited.content.splitlines() == [
        "README.md",
        "main.py",
        "(stopped at head_limit=2; narrow the search)",
    ]


def test_grep_errors(ctx: ToolContext) -> None:
    bad = call(ctx, "grep", pattern="(unclosed")
    assert bad.is_error and "invalid regular expression" in bad.content
    assert call(ctx, "grep", pattern="zzz").content == "No matches for 'zzz'"
    missing = call(ctx, "grep", pattern="x", path="nope")
    assert missing.is_error and "path not found" in missing.content
    outside = call(ctx, "grep", pattern="hello", path="out_link.py")
    assert outside.is_error and "outside the working root" in outside.content


def test_search_permission_request(ctx: ToolContext) -> None:
    req = GrepTool().permission_request(GrepInput(pattern="x", path="src"), ctx)
    src = str((ctx.root / "src").resolve())
    assert (req.kind, req.target, req.paths, req.read_only) == ("read", src, (src,), True)


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/y/a.py", True),
        ("*.py", "x/a.py", False),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("[!a]b", "cb", True),
        ("[!a]b", "ab", False),
        ("{x,y}/*", "y/z", True),
        ("a.b", "aXb", False),
    ],
)
def test_glob_to_regex(glob: str, path: str, matches: bool) -> None:
    assert bool(glob_to_regex(glob).match(path)) is matches
