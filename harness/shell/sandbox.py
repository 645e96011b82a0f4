"""Run ``bash`` commands under bubblewrap (``bwrap``) where the machine allows it.

What a sandboxed command gets:

- its own PID namespace (``--unshare-pid``, ``--die-with-parent``): when the command's shell
  exits, or the harness kills it, every process it started dies with the namespace, including
  detached grandchildren (``setsid cmd &``, double forks);
- a read-only view of ``/``; writable only: the agent's root, a private ``/tmp`` (a tmpfs that
  vanishes with the command) and ``extra_writable`` paths; inside the root, the control files
  (``.team``, ``.git/config``, ``.git/hooks``, ``.mcp.json``, ``.claude/settings*.json``) are
  bound read-only again. In a git worktree (``.git`` is a file) the worktree's git dir and the
  shared ``objects``/``refs``/``logs`` are writable so ``git add``/``commit`` work, but the shared
  config and hooks are not;
- no network (``--unshare-net``: only a private loopback) unless ``network`` is allowed;
- fresh ``/proc`` and a minimal ``/dev``; a new session (no terminal to inject keystrokes into);
  no capabilities (``--cap-drop ALL``, which matters when the harness runs as root).

Detection happens at run time: ``bwrap`` on ``PATH`` and a probe run (user namespaces may be
disabled in a container). The probe result is cached per ``bwrap`` path for the process. When it
cannot run, ``enabled="auto"`` falls back to running unsandboxed: the reason is logged once per
process and shown once per ``Sandbox`` (one agent) at the head of a tool result.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.settings import SandboxSettings
from harness.tools.base import ToolError

log = logging.getLogger(__name__)

SANDBOX_KEY = "sandbox"
"""``ToolContext.extra`` key under which the runtime may put the agent's ``Sandbox``."""

PROBE_TIMEOUT_S = 10.0

READ_ONLY_IN_ROOT: tuple[str, ...] = (
    ".team",
    ".git/config",
    ".git/hooks",
    ".mcp.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
)
"""Control files re-bound read-only inside the writable root (when they exist)."""

WRITABLE_IN_PROTECTED: tuple[str, ...] = (".team/memory",)
"""Holes in the read-only set: the shared memory files agents are meant to edit."""


class SandboxUnavailable(ToolError):
    """The sandbox is required (``enabled: true``) but bubblewrap cannot run here."""


@dataclass(frozen=True)
class Probe:
    """Whether bubblewrap can run on this machine, and why not."""

    available: bool
    reason: str
    bwrap: str | None = None


def base_args(*, network: bool) -> list[str]:
    """The namespace and mount flags every sandboxed command gets (before the binds)."""
    # --cap-drop ALL: bwrap run by root keeps every capability otherwise, and a command with
    # CAP_SYS_ADMIN could simply unmount the read-only binds.
    args = ["--die-with-parent", "--unshare-pid", "--unshare-ipc", "--new-session"]
    args += ["--cap-drop", "ALL"]
    if not network:
        args.append("--unshare-net")
    return [*args, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]


@lru_cache(maxsize=8)
def probe_bwrap(bwrap: str | None = None) -> Probe:
    """Find ``bwrap`` (``None``: on ``PATH``) and run ``true`` in a full sandbox once."""
    path = shutil.which(bwrap or "bwrap")
    if path is None:
        probe = Probe(False, f"{bwrap or 'bwrap'} was not found (install the bubblewrap package)")
    else:
        probe = _run_probe(path)
    if not probe.available:
        log.warning("bash sandbox unavailable: %s; commands run without a sandbox", probe.reason)
    return probe


def _run_probe(path: str) -> Probe:
    argv = [path, *base_args(network=False), "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(False, f"{path} could not be run ({exc})")
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        detail = err[-1] if err else f"exit code {done.returncode}"
        return Probe(False, f"{path} cannot create namespaces here: {detail}")
    return Probe(True, "bubblewrap works", path)


class Sandbox:
    """One agent's sandbox policy: settings plus the (cached) machine probe. Thread-safe."""

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        *,
        bwrap: str | None = None,
        probe: Callable[[str | None], Probe] = probe_bwrap,
    ) -> None:
        self.settings = settings or SandboxSettings()
        self._bwrap = bwrap
        self._probe = probe
        self._lock = threading.Lock()
        self._noticed = False

    def status(self) -> Probe:
        """The probe result (``available=False`` with a reason when disabled in settings)."""
        if self.settings.enabled is False:
            return Probe(False, "disabled in settings (bash_sandbox.enabled is false)")
        return self._probe(self._bwrap)

    def prefix(self, *, root: Path, cwd: Path) -> tuple[list[str], str | None]:
        """The ``bwrap ... --`` argv to put before the shell, and a one-time notice.

        Returns ``([], notice)`` when running unsandboxed (``notice`` is ``None`` after the first
        call, or when the sandbox is off in settings); raises ``SandboxUnavailable`` when the
        sandbox is required and cannot run.
        """
        if self.settings.enabled is False:
            return [], None
        probe = self._probe(self._bwrap)
        if not probe.available or probe.bwrap is None:
            if self.settings.enabled is True:
                raise SandboxUnavailable(
                    f"the bash sandbox is required (bash_sandbox.enabled is true) but {probe.reason}; "
                    "no command can run until bubblewrap works or the setting is changed"
                )
            return [], self._notice_once(probe.reason)
        args = [probe.bwrap, *base_args(network=self.settings.network)]
        args += mount_args(root, self.settings.extra_writable, cwd=cwd)
        return [*args, "--chdir", str(cwd), "--"], None

    def _notice_once(self, reason: str) -> str | None:
        with self._lock:
            if self._noticed:
                return None
            self._noticed = True
        return f"[sandbox unavailable: {reason}; bash commands run without a sandbox]"


def mount_args(
    root: Path, extra_writable: Sequence[str] = (), *, cwd: Path | None = None
) -> list[str]:
    """Binds after ``base_args``: the root and extras writable, then control files read-only
    (also the ``.git`` file of a worktree ``cwd`` inside the root)."""
    real = Path(os.path.realpath(root))
    args = ["--bind", str(real), str(real)]
    for raw in extra_writable:
        path = Path(os.path.realpath(real / Path(raw).expanduser()))
        if path.exists():
            args += ["--bind", str(path), str(path)]
    writable, read_only = _git_paths(real)
    if cwd is not None and Path(os.path.realpath(cwd)) != real:
        read_only += _git_paths(Path(os.path.realpath(cwd)))[1]
    for path in writable:
        args += ["--bind", str(path), str(path)]
    for rel in READ_ONLY_IN_ROOT:
        path = Path(os.path.realpath(real / rel))
        if path.exists() and path.is_relative_to(real):
            args += ["--ro-bind", str(path), str(path)]
    for rel in WRITABLE_IN_PROTECTED:
        path = real / rel
        if path.is_dir() and not path.is_symlink():
            args += ["--bind", str(path), str(path)]
    for path in read_only:
        args += ["--ro-bind", str(path), str(path)]
    return args


def _git_paths(root: Path) -> tuple[list[Path], list[Path]]:
    """For a worktree checkout: the git dirs ``git add``/``commit`` write, and the files that say
    where the repository is (which must not be redirected). Nothing for a plain checkout."""
    dotgit = root / ".git"
    if not dotgit.is_file() or dotgit.is_symlink():
        return [], []
    try:
        text = dotgit.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return [], [dotgit]
    if not text.startswith("gitdir:"):
        return [], [dotgit]
    gitdir = Path(os.path.realpath(root / text.removeprefix("gitdir:").strip()))
    common = gitdir.parent.parent
    commondir = gitdir / "commondir"
    if commondir.is_file():
        common = Path(os.path.realpath(gitdir / commondir.read_text(encoding="utf-8").strip()))
    writable = [gitdir, *(common / name for name in ("objects", "refs", "logs"))]
    pinned = [dotgit, commondir, gitdir / "gitdir", gitdir / "config.worktree"]
    return [p for p in writable if p.is_dir()], [p for p in pinned if p.exists()]
