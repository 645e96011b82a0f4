"""read_file, write_file, edit_file, and path confinement of every file tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.ports import ToolResultBlock, ToolUseBlock
from harness.tools.base import ToolContext
from harness.tools.executor import ToolExecutor
from harness.tools.files import (
    EditFileInput,
    EditFileTool,
    ReadFileInput,
    ReadFileTool,
    WriteFileInput,
    WriteFileTool,
    file_tools,
)
from harness.tools.registry import ToolRegistry
from tests.support.fakes import AllowAll


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "repo"
    root.mkdir()
    return ToolContext(agent="a", root=root, cwd=root, outputs_dir=tmp_path / "outputs")


def call(ctx: ToolContext, name: str, **input: Any) -> ToolResultBlock:
    ex = ToolExecutor(ToolRegistry(file_tools()), AllowAll())
    [result] = ex.run_batch([ToolUseBlock(id="t", name=name, input=input)], ctx)
    return result


# --- read_file ---------------------------------------------------------------------------------


def test_read_numbers_lines_and_pages(ctx: ToolContext) -> None:
    (ctx.root / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    r = call(ctx, "read_file", path="f.txt")
    assert r.content.splitlines()[0] == "     1\tline 1"
    assert r.content.splitlines()[-1] == "    10\tline 10"
    page = call(ctx, "read_file", path="f.txt", offset=4, limit=2)
    assert page.content == "     4\tline 4\n     5\tline 5\n(file continues; read on with offset=6)"
    last = call(ctx, "read_file", path=str(ctx.root / "f.txt"), offset=10)
    assert last.content == "    10\tline 10"


def test_read_edge_cases(ctx: ToolContext) -> None:
    (ctx.root / "empty").write_text("")
    (ctx.root / "bin").write_bytes(b"\x7fELF\x00\x01\x02")
    (ctx.root / "crlf").write_bytes(b"a\r\nb\r\n")
    (ctx.root / "long").write_text("z" * 5000)
    (ctx.root / "dir").mkdir()
    assert call(ctx, "read_file", path="empty").content == "(empty file)"
    binary = call(ctx, "read_file", path="bin")
    assert binary.is_error and "binary file (7 bytes)" in binary.content
    assert call(ctx, "read_file", path="crlf").content == "     1\ta\n     2\tb"
    assert call(ctx, "read_file", path="long").content.endswith("z [line truncated]")
    missing = call(ctx, "read_file", path="nope.txt")
    assert missing.is_error and "file not found: nope.txt" in missing.content
    directory = call(ctx, "read_file", path="dir")
    assert directory.is_error and "is a directory" in directory.content
    past = call(ctx, "read_file", path="crlf", offset=9)
    assert past.is_error and "past the end" in past.content


# --- write_file --------------------------------------------------------------------------------


def test_write_creates_parents_and_overwrites(ctx: ToolContext) -> None:
    r = call(ctx, "write_file", path="a/b/c.txt", content="héllo\n")
    assert not r.is_error and r.content == "Created a/b/c.txt (7 bytes)"
    assert (ctx.root / "a/b/c.txt").read_text(encoding="utf-8") == "héllo\n"
    again = call(ctx, "write_file", path="a/b/c.txt", content="bye")  # its own write counts
    assert again.content == "Overwrote a/b/c.txt (3 bytes)"
    assert (ctx.root / "a/b/c.txt").read_text() == "bye"
    onto_dir = call(ctx, "write_file", path="a", content="x")
    assert onto_dir.is_error and "is a directory" in onto_dir.content


# --- edit_file ---------------------------------------------------------------------------------


def test_edit_replaces_exactly_one_match(ctx: ToolContext) -> None:
    f = ctx.root / "m.py"
    f.write_bytes(b"def f():\r\n    return 1\r\n")
    call(ctx, "read_file", path="m.py")
    r = call(ctx, "edit_file", path="m.py", old_string="return 1", new_string="return 2")
    assert not r.is_error and r.content == "Edited m.py: replaced 1 occurrence"
    assert f.read_bytes() == b"def f():\r\n    return 2\r\n"  # line endings kept


def test_edit_errors_for_zero_or_many_matches(ctx: ToolContext) -> None:
    f = ctx.root / "m.txt"
    f.write_text("a x a x a\n")
    call(ctx, "read_file", path="m.txt")
    none = call(ctx, "edit_file", path="m.txt", old_string="b", new_string="c")
    assert none.is_error and "old_string not found in m.txt" in none.content
    many = call(ctx, "edit_file", path="m.txt", old_string="a", new_string="c")
    assert many.is_error and "matches 3 places" in many.content and "replace_all" in many.content
    assert f.read_text() == "a x a x a\n"
    every = call(ctx, "edit_file", path="m.txt", old_string="a", new_string="c", replace_all=True)
    assert every.content == "Edited m.txt: replaced 3 occurrences"
    assert f.read_text() == "c x c x c\n"


def test_edit_refuses_bad_requests(ctx: ToolContext) -> None:
    (ctx.root / "t.txt").write_text("text")
    (ctx.root / "b.bin").write_bytes(b"a\x00b")
    (ctx.root / "latin1.txt").write_bytes("café".encode("latin-1"))
    call(ctx, "read_file", path="t.txt")
    empty = call(ctx, "edit_file", path="t.txt", old_string="", new_string="x")
    assert empty.is_error and "must not be empty" in empty.content
    same = call(ctx, "edit_file", path="t.txt", old_string="t", new_string="t")
    assert same.is_error and "identical" in same.content
    binary = call(ctx, "edit_file", path="b.bin", old_string="a", new_string="c")
    assert binary.is_error and "binary" in binary.content
    latin = call(ctx, "edit_file", path="latin1.txt", old_string="caf", new_string="x")
    assert latin.is_error and "not valid UTF-8" in latin.content
    missing = call(ctx, "edit_file", path="nope", old_string="a", new_string="b")
    assert missing.is_error and "file not found" in missing.content


# --- read before edit, stale files -----------------------------------------------------------


def test_edit_and_overwrite_need_a_read_in_this_session(ctx: ToolContext) -> None:
    f = ctx.root / "m.txt"
    f.write_text("one\n")
    edit = call(ctx, "edit_file", path="m.txt", old_string="one", new_string="two")
    assert edit.is_error and "has not been read" in edit.content and "read_file" in edit.content
    write = call(ctx, "write_file", path="m.txt", content="two\n")
    assert write.is_error and "has not been read" in write.content
    assert f.read_text() == "one\n"
    assert not call(ctx, "read_file", path="m.txt", limit=1).is_error  # a partial read counts
    assert not call(ctx, "edit_file", path="m.txt", old_string="one", new_string="two").is_error
    # consecutive edits and a write after the agent's own edit need no new read
    assert not call(ctx, "edit_file", path="m.txt", old_string="two", new_string="3").is_error
    assert not call(ctx, "write_file", path="m.txt", content="four\n").is_error
    assert f.read_text() == "four\n"


def test_a_change_on_disk_since_the_read_is_refused_until_read_again(ctx: ToolContext) -> None:
    f = ctx.root / "m.txt"
    f.write_text("one\n")
    call(ctx, "read_file", path="m.txt")
    f.write_text("changed by someone else\n")
    edit = call(ctx, "edit_file", path="m.txt", old_string="changed", new_string="x")
    assert edit.is_error and "modified since you read it" in edit.content
    assert "read it again" in edit.content
    write = call(ctx, "write_file", path="m.txt", content="clobber\n")
    assert write.is_error and "modified since you read it" in write.content
    assert f.read_text() == "changed by someone else\n"
    call(ctx, "read_file", path="m.txt")
    assert not call(ctx, "edit_file", path="m.txt", old_string="changed", new_string="x").is_error


def test_same_size_change_is_caught_and_a_touch_is_not_a_change(ctx: ToolContext) -> None:
    import os

    f = ctx.root / "m.txt"
    f.write_text("aaaa\n")
    call(ctx, "read_file", path="m.txt")
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # touched, same bytes
    assert not call(ctx, "edit_file", path="m.txt", old_string="aaaa", new_string="bbbb").is_error
    st = f.stat()
    f.write_text("cccc\n")  # same size, new content, a modification time 1 ns later
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    stale = call(ctx, "edit_file", path="m.txt", old_string="cccc", new_string="dddd")
    assert stale.is_error and "modified since you read it" in stale.content


def test_a_new_file_needs_no_read_and_each_context_has_its_own_reads(
    ctx: ToolContext, tmp_path: Path
) -> None:
    assert not call(ctx, "write_file", path="new.txt", content="n\n").is_error
    assert not call(ctx, "edit_file", path="new.txt", old_string="n", new_string="m").is_error
    other = ToolContext(agent="a.task-1", root=ctx.root, cwd=ctx.root)  # a subagent's
    refused = call(other, "edit_file", path="new.txt", old_string="m", new_string="o")
    assert refused.is_error and "has not been read" in refused.content


# --- permission requests -----------------------------------------------------------------------


def test_permission_requests_carry_resolved_paths(ctx: ToolContext) -> None:
    (ctx.root / "real.txt").write_text("x")
    (ctx.root / "link.txt").symlink_to(ctx.root / "real.txt")
    real = str((ctx.root / "real.txt").resolve())
    read = ReadFileTool().permission_request(ReadFileInput(path="link.txt"), ctx)
    assert (read.kind, read.target, read.paths, read.read_only) == ("read", real, (real,), True)
    write = WriteFileTool().permission_request(
        WriteFileInput(path="sub/../real.txt", content=""), ctx
    )
    assert (write.kind, write.target, write.paths) == ("write", real, (real,))
    edit = EditFileTool().permission_request(
        EditFileInput(path="real.txt", old_string="a", new_string="b"), ctx
    )
    assert (edit.tool, edit.kind, edit.read_only) == ("edit_file", "write", False)


# --- confinement -------------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    return secret


ESCAPES = ["../secret.txt", "sub/../../secret.txt", "{outside}", "link_out", "dirlink/secret.txt"]


@pytest.mark.parametrize("raw", ESCAPES)
def test_file_tools_refuse_paths_outside_the_root(
    ctx: ToolContext, outside: Path, raw: str
) -> None:
    (ctx.root / "link_out").symlink_to(outside)
    (ctx.root / "dirlink").symlink_to(outside.parent)
    path = raw.format(outside=outside)
    reads = [
        call(ctx, "read_file", path=path),
        call(ctx, "write_file", path=path, content="pwned"),
        call(ctx, "edit_file", path=path, old_string="top", new_string="pwned"),
    ]
    for r in reads:
        assert r.is_error and "outside the working root" in r.content, r.content
    assert outside.read_text() == "top secret"


def test_symlink_loops_and_nul_bytes_are_refused(ctx: ToolContext) -> None:
    (ctx.root / "loop_a").symlink_to(ctx.root / "loop_b")
    (ctx.root / "loop_b").symlink_to(ctx.root / "loop_a")
    for name, extra in [("read_file", {}), ("write_file", {"content": "x"})]:
        looped = call(ctx, name, path="loop_a", **extra)
        assert looped.is_error and "symlink loop" in looped.content
        nul = call(ctx, name, path="a\x00b", **extra)
        assert nul.is_error and "NUL byte" in nul.content
    assert not (ctx.root / "a").exists()


def test_symlinks_inside_the_root_are_fine(ctx: ToolContext) -> None:
    (ctx.root / "real").mkdir()
    (ctx.root / "real/f.txt").write_text("inside\n")
    (ctx.root / "alias").symlink_to(ctx.root / "real")
    assert call(ctx, "read_file", path="alias/f.txt").content == "     1\tinside"
    w = call(ctx, "write_file", path="alias/new.txt", content="n")
    assert not w.is_error and (ctx.root / "real/new.txt").read_text() == "n"
