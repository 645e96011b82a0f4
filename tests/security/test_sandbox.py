"""The bubblewrap sandbox of the bash tool: real bwrap, real processes, real sockets.

Tests that need bwrap carry the ``sandbox`` marker: skipped loudly on a developer machine where
bwrap cannot run, failed under ``TEAMCTL_REQUIRE_SANDBOX=1`` (``.ci/run`` sets it).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.settings import SandboxSettings
from harness.shell.sandbox import SANDBOX_KEY, Probe, Sandbox, probe_bwrap
from harness.tools.base import ToolContext
from harness.tools.bash import BashInput, BashTool
from tests.security.support import sha256, wait_gone

needs_bwrap = pytest.mark.sandbox


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / ".git" / "hooks").mkdir(parents=True)
    (r / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (r / ".team").mkdir()
    (r / ".team" / "settings.json").write_text('{"permissions": {"allow": []}}\n')
    (r / ".team" / "memory").mkdir()
    return r


def run(root: Path, command: str, sandbox: Sandbox | None = None, **kw: object) -> tuple[str, bool]:
    ctx = ToolContext(agent="ann", root=root, cwd=root, outputs_dir=root.parent / "outputs")
    tool = BashTool(sandbox=sandbox or Sandbox())
    out = tool.run(BashInput(command=command, **kw), ctx)  # type: ignore[arg-type]
    return out.content, out.is_error


def pids_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


SPAWN_DETACHED = (
    "setsid sh -c 'echo up > started; exec sleep 1000.{token}' </dev/null >/dev/null 2>&1 & "
    "while [ ! -s started ]; do :; done; echo spawned"
)


@needs_bwrap
def test_detached_grandchild_dies_with_the_namespace(root: Path) -> None:
    token = str(secrets.randbelow(10**9))
    text, failed = run(root, SPAWN_DETACHED.format(token=token))
    assert not failed and "spawned" in text, text
    for pid in pids_with(token):
        assert wait_gone(pid), f"sandboxed grandchild {pid} outlived the command"


def test_without_sandbox_a_detached_grandchild_escapes_the_group(root: Path) -> None:
    # The control: the same command unsandboxed leaves the setsid'd grandchild running (this is
    # what the PID namespace is for). The test cleans it up itself.
    token = str(secrets.randbelow(10**9))
    off = Sandbox(SandboxSettings(enabled=False))
    text, failed = run(root, SPAWN_DETACHED.format(token=token), off)
    assert not failed, text
    survivors = pids_with(token)
    try:
        assert survivors, "expected the unsandboxed grandchild to survive"
    finally:
        for pid in survivors:
            os.kill(pid, 9)
            wait_gone(pid)


@pytest.fixture
def outside_dir() -> Iterator[Path]:
    """A directory outside the root and outside /tmp (the sandbox's /tmp is private)."""
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    d = Path(tempfile.mkdtemp(prefix="sandbox-outside-", dir=base))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@needs_bwrap
def test_writes_outside_root_and_tmp_fail(root: Path, outside_dir: Path, tmp_path: Path) -> None:
    target = outside_dir / "escaped"
    sibling = tmp_path / "sibling"
    text, _ = run(root, f"echo x > {target}; echo x > {sibling}; mkdir -p {sibling}d; true")
    assert "Read-only file system" in text, text
    assert not target.exists()
    assert not sibling.exists() and not (tmp_path / "siblingd").exists()


@needs_bwrap
def test_agent_root_and_private_tmp_are_writable(root: Path) -> None:
    name = f"sandbox-private-{secrets.token_hex(4)}"
    text, failed = run(
        root, f"echo hi > made && mkdir -p sub/dir && echo t > /tmp/{name} && cat made"
    )
    assert not failed, text
    assert (root / "made").read_text() == "hi\n" and (root / "sub" / "dir").is_dir()
    assert not (Path("/tmp") / name).exists(), "the sandbox's /tmp must be private"


@needs_bwrap
def test_memory_is_writable_inside_the_protected_team_dir(root: Path) -> None:
    text, failed = run(root, "echo note > .team/memory/topic.md")
    assert not failed, text
    assert (root / ".team" / "memory" / "topic.md").read_text() == "note\n"


ATTACKS = [
    "echo '[core] hooksPath=/tmp' >> .git/config",
    "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    "git config core.fsmonitor 'touch /tmp/pwned'",
    'echo \'{"permissions":{"allow":["Bash"]}}\' > .team/settings.json',
    "mv .git/config .git/config.old; echo evil > .git/config",
    "rm -rf .git/hooks; mkdir .git/hooks",
    "umount .git/config; echo evil > .git/config",
    "umount -l .team; echo evil > .team/settings.json",
    "unshare -rm sh -c 'umount .git/config; echo evil > .git/config'",
    "ln -sf /tmp/evil .git/hooks/post-checkout",
]


@needs_bwrap
@pytest.mark.parametrize("attack", ATTACKS)
def test_control_files_keep_their_hashes(root: Path, attack: str) -> None:
    files = [root / ".git" / "config", root / ".team" / "settings.json"]
    before = [sha256(f) for f in files]
    hooks = sorted(p.name for p in (root / ".git" / "hooks").iterdir())
    run(root, attack)
    assert [sha256(f) for f in files] == before, attack
    assert sorted(p.name for p in (root / ".git" / "hooks").iterdir()) == hooks, attack


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(10)
    yield srv
    srv.close()


CONNECT = "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected >&3 && echo CONNECTED"


@needs_bwrap
def test_network_is_off(root: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    text, failed = run(root, CONNECT.format(port=port))
    assert failed and "CONNECTED" not in text, text
    listener.settimeout(0)
    with pytest.raises(BlockingIOError):
        listener.accept()


@needs_bwrap
def test_network_namespace_is_private(root: Path) -> None:
    text, failed = run(root, "readlink /proc/self/ns/net")
    assert not failed, text
    assert text.strip().startswith("net:[")
    assert text.strip() != os.readlink("/proc/self/ns/net"), "the command shares our network"


@needs_bwrap
def test_commands_hold_no_capabilities(root: Path) -> None:
    # Matters when the harness runs as root (CI does): without --cap-drop ALL a sandboxed
    # command keeps every capability and can undo its own mounts.
    text, failed = run(root, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status")
    assert not failed, text
    sets = dict(re.findall(r"^(Cap[A-Za-z]+):\s+([0-9a-f]+)$", text, re.MULTILINE))
    held = {name: int(sets[name], 16) for name in ("CapInh", "CapPrm", "CapEff", "CapAmb")}
    assert held == dict.fromkeys(held, 0), text


@needs_bwrap
def test_network_can_be_allowed(root: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    sandbox = Sandbox(SandboxSettings(network=True))
    text, failed = run(root, CONNECT.format(port=port), sandbox)
    assert not failed and "CONNECTED" in text, text
    conn, _ = listener.accept()
    conn.close()


@needs_bwrap
def test_extra_writable(root: Path, outside_dir: Path) -> None:
    sandbox = Sandbox(SandboxSettings(extra_writable=(str(outside_dir),)))
    text, failed = run(root, f"echo ok > {outside_dir}/f", sandbox)
    assert not failed, text
    assert (outside_dir / "f").read_text() == "ok\n"


@needs_bwrap
def test_timeout_kills_the_sandbox(root: Path) -> None:
    token = str(secrets.randbelow(10**9))
    text, failed = run(root, f"(setsid sleep 1000.{token} &) ; sleep 1000", timeout_s=0.5)
    assert failed and "timed out" in text, text
    for pid in pids_with(token):
        assert wait_gone(pid)


@needs_bwrap
def test_worktree_git_works_but_shared_config_stays_read_only(tmp_path: Path) -> None:
    repo = tmp_path / "main"
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    (repo / "a").write_text("a\n")
    subprocess.run([*git, "-C", str(repo), "add", "a"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "a"], check=True)
    wt = repo / ".worktrees" / "w"
    subprocess.run(
        [*git, "-C", str(repo), "worktree", "add", "-q", "-b", "wt/w", str(wt)], check=True
    )
    config = repo / ".git" / "config"
    before = sha256(config)
    text, _ = run(
        wt,
        "echo b > b && git add b && git -c user.email=t@t -c user.name=t commit -qm b && "
        "echo COMMITTED; git config core.hooksPath /tmp/h; echo x > ../../.git/config",
    )
    assert "COMMITTED" in text, text
    assert sha256(config) == before
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%s", "wt/w"], capture_output=True, text=True
    )
    assert log.stdout.split() == ["b", "a"]


# --- detection and fallback (no bwrap needed) -----------------------------------------------


def fake_bwrap(tmp_path: Path, body: str) -> str:
    path = tmp_path / "bwrap"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_probe_reports_a_missing_bwrap(tmp_path: Path) -> None:
    probe = probe_bwrap(str(tmp_path / "no-such-bwrap"))
    assert not probe.available and "not found" in probe.reason


def test_probe_reports_namespaces_refused(tmp_path: Path) -> None:
    bwrap = fake_bwrap(tmp_path, "echo 'bwrap: No permissions to create new namespace' >&2; exit 1")
    probe = probe_bwrap(bwrap)
    assert not probe.available
    assert "No permissions to create new namespace" in probe.reason


def test_auto_falls_back_with_a_one_time_notice(root: Path, tmp_path: Path) -> None:
    sandbox = Sandbox(bwrap=str(tmp_path / "missing"))
    first, failed = run(root, "echo one", sandbox)
    second, _ = run(root, "echo two", sandbox)
    assert not failed
    assert first.startswith("[sandbox unavailable:") and "without a sandbox" in first
    assert "one" in first
    assert "sandbox" not in second and "two" in second


def test_required_sandbox_refuses_to_run_unsandboxed(root: Path, tmp_path: Path) -> None:
    sandbox = Sandbox(SandboxSettings(enabled=True), bwrap=str(tmp_path / "missing"))
    ctx = ToolContext(agent="ann", root=root, cwd=root, extra={SANDBOX_KEY: sandbox})
    from harness.tools.executor import ToolExecutor
    from harness.tools.registry import ToolRegistry
    from tests.security.support import call
    from tests.support.fakes import AllowAll

    ex = ToolExecutor(ToolRegistry([BashTool()]), AllowAll())
    [result] = ex.run_batch([call("bash", command="touch should-not-exist")], ctx)
    assert result.is_error and "sandbox is required" in str(result.content)
    assert not (root / "should-not-exist").exists()


def test_disabled_sandbox_is_silent(root: Path) -> None:
    def probe(_: str | None) -> Probe:
        raise AssertionError("a disabled sandbox must not probe")

    sandbox = Sandbox(SandboxSettings(enabled=False), probe=probe)
    text, failed = run(root, "echo hi", sandbox)
    assert not failed and text.startswith("hi")
    assert not sandbox.status().available


def test_settings_forbid_unknown_keys() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        SandboxSettings.model_validate({"enabled": "auto", "netwrok": True})
    assert SandboxSettings.model_validate({"enabled": True}).enabled is True
    assert SandboxSettings().enabled == "auto" and SandboxSettings().network is False


def test_team_settings_carry_the_sandbox_section() -> None:
    from actors.settings import SettingsError, parse_settings

    s = parse_settings({"bash_sandbox": {"enabled": False, "extra_writable": ["build"]}}, "t")
    assert s.bash_sandbox == SandboxSettings(enabled=False, extra_writable=("build",))
    with pytest.raises(SettingsError, match=r"bash_sandbox\.enabeld"):
        parse_settings({"bash_sandbox": {"enabeld": True}}, "t")


@needs_bwrap
def test_worktree_git_file_is_pinned_when_cwd_is_a_worktree(tmp_path: Path) -> None:
    repo = tmp_path / "main"
    wt = repo / ".worktrees" / "w"
    wt.mkdir(parents=True)
    (wt / ".git").write_text(f"gitdir: {repo}/.git/worktrees/w\n")
    (repo / ".git" / "worktrees" / "w").mkdir(parents=True)
    before = sha256(wt / ".git")
    ctx = ToolContext(agent="ann", root=repo, cwd=wt)
    out = BashTool(sandbox=Sandbox()).run(
        BashInput(command="echo 'gitdir: /tmp/evil' > .git; echo ok > f"), ctx
    )
    assert "Read-only file system" in out.content, out.content
    assert sha256(wt / ".git") == before and (wt / "f").read_text() == "ok\n"
