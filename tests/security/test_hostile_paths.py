"""Hostile paths through the real policy stack and the built-in file tools.

Every escape (``..``, absolute, ``~``, symlinks out, loops, NUL, ``/proc`` tricks, very long paths)
is denied or asked in every mode; look-alikes (unicode dots, backslashes, percent-encoding) may be
allowed but never touch anything outside the root; control files keep their hashes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.settings import PermissionMode
from tests.security.support import MODES, stack, tree_hashes

SECRET = "TOP-SECRET-7f3a"
CONTROL = [".team/settings.json", ".git/config", ".git/hooks", ".mcp.json", ".env"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / ".git" / "hooks").mkdir(parents=True)
    (r / ".git" / "config").write_text("[core]\n")
    (r / ".team").mkdir()
    (r / ".team" / "settings.json").write_text('{"permissions": {"deny": ["Bash(curl:*)"]}}')
    (r / ".mcp.json").write_text("{}")
    (r / ".env").write_text("API_KEY=sk-live\n")
    (r / "sub").mkdir()
    (r / "notes.txt").write_text("hello\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    home = tmp_path / "home" / ".ssh"
    home.mkdir(parents=True)
    (home / "id_rsa").write_text(SECRET + "\n")
    (r / "link_out").symlink_to(outside)
    (r / "file_out").symlink_to(outside / "secret.txt")
    (r / "loop_a").symlink_to(r / "loop_b")
    (r / "loop_b").symlink_to(r / "loop_a")
    (r / "team_link").symlink_to(r / ".team")
    (r / "git_link").symlink_to(r / ".git")
    (r / "hooks_link").symlink_to(r / ".git" / "hooks")
    return r


def outside_state(root: Path) -> dict[str, str]:
    base = root.parent
    rels = ["outside", "outside/secret.txt", "home/.ssh", "home/.ssh/id_rsa", "."]
    return tree_hashes(base, rels)


ESCAPES = [
    "../outside/secret.txt",
    "../../../../../../../../etc/passwd",
    "/etc/passwd",
    "{outside}/secret.txt",
    "~/.ssh/id_rsa",
    "~root/.bashrc",
    "link_out/secret.txt",
    "file_out",
    "sub/../../outside/secret.txt",
    "./././../outside/secret.txt",
    "sub/./../link_out/../outside/secret.txt",
    "/proc/self/root/etc/passwd",
    "/proc/self/cwd/../outside/secret.txt",
    "/dev/stdin",
    "loop_a",
    "loop_a/x",
    "notes.txt\x00../../outside/secret.txt",
    "../" * 400 + "etc/passwd",
    "sub/" * 1000 + "../" * 1002 + "outside/secret.txt",
]


def _fmt(raw: str, root: Path) -> str:
    return raw.replace("{outside}", str(root.parent / "outside"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("raw", ESCAPES, ids=lambda r: repr(r[:40]))
def test_escapes_are_never_allowed(root: Path, raw: str, mode: PermissionMode) -> None:
    path = _fmt(raw, root)
    s = stack(root, mode=mode, allow=["Read", "Edit", "Write"])
    before = outside_state(root), tree_hashes(root, CONTROL)
    reads = [
        ("read_file", {"path": path}),
        ("grep", {"pattern": "SECRET", "path": path}),
        ("glob", {"pattern": "*", "path": path}),
    ]
    writes = [
        ("write_file", {"path": path, "content": "pwned"}),
        ("edit_file", {"path": path, "old_string": "SECRET", "new_string": "pwned"}),
    ]
    for tool, args in [*reads, *writes]:
        result = s.run(tool, **args)
        assert result.is_error, (tool, raw, mode, result.content)
        assert SECRET not in str(result.content), (tool, raw, mode)
    assert (outside_state(root), tree_hashes(root, CONTROL)) == before


PROTECTED = [
    ".team/settings.json",
    ".git/config",
    ".git/hooks/pre-commit",
    ".git/hooks/../config",
    ".git//config",
    "./.git/./hooks/post-checkout",
    "sub/../.git/config",
    "team_link/settings.json",
    "git_link/config",
    "hooks_link/pre-push",
    ".mcp.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
    "sub/.git/config",
    ".worktrees/w/.git",
    "{root}/.team/settings.json",
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("raw", PROTECTED)
def test_control_files_are_denied_in_every_mode(root: Path, raw: str, mode: PermissionMode) -> None:
    path = raw.replace("{root}", str(root))
    s = stack(root, mode=mode, allow=["Edit", "Write", "Bash"])
    before = tree_hashes(root, [*CONTROL, ".claude", "sub"])
    assert s.outcome("write_file", path=path, content="[core]\n\thooksPath=/tmp/h\n") == "denied"
    assert s.outcome("edit_file", path=path, old_string="[core]", new_string="[x]") == "denied"
    assert tree_hashes(root, [*CONTROL, ".claude", "sub"]) == before


LOOKALIKES = [
    "\u2024\u2024/outside/secret.txt",  # one-dot leaders
    "\uff0e\uff0e/outside/secret.txt",  # fullwidth full stops
    "..\\outside\\secret.txt",
    "%2e%2e/outside/secret.txt",
    ".\u200b./outside/secret.txt",  # zero-width space between the dots
    "\u202e../outside/secret.txt",  # right-to-left override
    ".git\u200b/config",
    ".te\u0430m/settings.json",  # Cyrillic a
]


@pytest.mark.parametrize("raw", LOOKALIKES)
def test_lookalikes_stay_inside_the_root(root: Path, raw: str) -> None:
    s = stack(root, mode="bypassPermissions")
    before = outside_state(root), tree_hashes(root, CONTROL)
    s.run("write_file", path=raw, content="x")
    read = s.run("read_file", path=raw)
    assert SECRET not in str(read.content)
    assert (outside_state(root), tree_hashes(root, CONTROL)) == before
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            assert Path(os.path.realpath(Path(dirpath) / name)).is_relative_to(root.parent), (
                "a write landed outside"
            )


def test_very_long_names_fail_cleanly(root: Path) -> None:
    s = stack(root, mode="bypassPermissions")
    for raw in ("a" * 10_000, "x/" * 5000 + "y", "\u00e9" * 300):
        result = s.run("write_file", path=raw, content="x")
        assert result.is_error, raw[:20]
        assert "Internal error" not in str(result.content)


def test_searches_do_not_follow_symlinks_out_of_the_root(root: Path) -> None:
    s = stack(root, mode="default")
    for tool, args in [
        ("grep", {"pattern": "SECRET", "path": "."}),
        ("grep", {"pattern": "SECRET", "path": ".", "output_mode": "content"}),
        ("glob", {"pattern": "**/*", "path": "."}),
        ("glob", {"pattern": "link_out/*"}),
    ]:
        result = s.run(tool, **args)
        assert SECRET not in str(result.content), (tool, args)
        assert "secret.txt" not in str(result.content), (tool, args, result.content)


# --- property: any path built from hostile segments either stays inside or is refused --------

SEGMENTS = [
    "..", ".", "sub", "link_out", "file_out", "loop_a", "team_link", "git_link", ".git", ".team",
    "hooks", "config", "settings.json", "new", "~", "", "\u2024\u2024", "..\\", "/proc/self/root",
]  # fmt: skip


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=7),
    absolute=st.booleans(),
    mode=st.sampled_from(["bypassPermissions", "acceptEdits", "default"]),
)
def test_random_paths_never_escape(
    root: Path, parts: list[str], absolute: bool, mode: PermissionMode
) -> None:
    raw = "/".join(parts)
    if absolute:
        raw = f"{root}/{raw}"
    s = stack(root, mode=mode, allow=["Write", "Edit"])
    before = outside_state(root), tree_hashes(root, CONTROL)
    result = s.run("write_file", path=raw, content="pwned")
    read = s.run("read_file", path=raw)
    assert SECRET not in str(read.content), raw
    assert (outside_state(root), tree_hashes(root, CONTROL)) == before, (raw, result.content)
    assert "Internal error" not in str(result.content), raw
