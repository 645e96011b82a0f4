"""Plain git for the Worktrees actor: every call hardened, no GitPython
(docs/ARCHITECTURE.md, "Worktrees").

Only the Worktrees actor calls these for writes, one at a time (concurrent ``git worktree add``
collides on ``.git/config.lock``). Every git process runs:

- with ``core.hooksPath`` pointing at a private empty directory and ``core.fsmonitor=false``
  given on the command line, which outranks system, global, repository and per-worktree
  configuration, so a hook or fsmonitor command planted by an agent never runs;
- with ``GIT_CONFIG_NOSYSTEM=1``, no pager, no editor, no terminal prompt, no signing, and every
  other ``GIT_*`` variable of the caller's environment dropped (a stray ``GIT_DIR`` or
  ``GIT_WORK_TREE`` must not redirect the runtime's git), except the author/committer identity.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from actors.errors import TeamError

BRANCH_PREFIX = "wt/"
WORKTREES_DIR = ".worktrees"
MAX_NAME = 64
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_KEEP_ENV = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
    }
)
REMOTE_PROTOCOLS = ("file", "ssh", "https", "http", "git")
"""Transports a push or fetch of a worktree branch may use (every other one, ``ext::`` above all,
stays forbidden by ``protocol.allow=never``)."""
FALLBACK_IDENTITY = ("teamctl", "teamctl@localhost")
"""Used for runtime commits only when the repository configures no ``user.name``/``email``."""


class WorktreeError(TeamError):
    """A worktree command that could not be carried out. ``exists`` lists what is left on disk
    or in the journal after a failure part-way (empty: nothing was left behind)."""

    def __init__(self, message: str, *, exists: Sequence[str] = ()) -> None:
        text = message if not exists else f"{message} (left behind: {', '.join(exists)})"
        super().__init__(text)
        self.exists = tuple(exists)


class GitError(WorktreeError):
    """A git command that failed: its arguments, exit code and stderr."""

    def __init__(self, args: Sequence[str], code: int, stderr: str) -> None:
        detail = " ".join(line.strip() for line in stderr.strip().splitlines()[-3:])
        super().__init__(f"git {' '.join(args)} failed ({code}): {detail or 'no message'}")
        self.git_args = tuple(args)
        self.code = code
        self.stderr = stderr


def check_name(name: str) -> str:
    """``name`` if it may name a worktree (and its branch ``wt/<name>``), else ``WorktreeError``."""
    why = None
    if not name:
        why = "it is empty"
    elif len(name) > MAX_NAME:
        why = f"it is longer than {MAX_NAME} characters"
    elif name == ".git" or name.startswith("."):
        why = "it starts with '.'"
    elif "/" in name or "\\" in name:
        why = "it contains a path separator"
    elif ".." in name:
        why = "it contains '..'"
    elif name.endswith(".lock"):
        why = "it ends with '.lock'"
    elif not _NAME.fullmatch(name):
        why = "use letters, digits, '.', '_' and '-' only (starting with a letter or digit)"
    if why is not None:
        raise WorktreeError(f"invalid worktree name {name!r}: {why}")
    return name


def branch_of(name: str) -> str:
    """The branch a worktree works on."""
    return BRANCH_PREFIX + name


@dataclass(frozen=True)
class GitWorktree:
    """One entry of ``git worktree list --porcelain``."""

    path: Path
    head: str | None = None
    branch: str | None = None
    """Short branch name (``wt/x``), or None when detached or bare."""
    locked: bool = False
    prunable: bool = False


def parse_worktree_list(text: str) -> list[GitWorktree]:
    """Parse ``git worktree list --porcelain`` output."""
    out: list[GitWorktree] = []
    fields: dict[str, str] = {}

    def flush() -> None:
        if "worktree" in fields:
            ref = fields.get("branch")
            out.append(
                GitWorktree(
                    path=Path(fields["worktree"]),
                    head=fields.get("HEAD"),
                    branch=ref.removeprefix("refs/heads/") if ref else None,
                    locked="locked" in fields,
                    prunable="prunable" in fields,
                )
            )
        fields.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
            continue
        key, _, value = line.partition(" ")
        fields[key] = value
    flush()
    return out


class Git:
    """Hardened git for one repository (its main checkout ``root``). Close it when done."""

    def __init__(self, root: Path, *, environ: Mapping[str, str] | None = None) -> None:
        self.root = Path(os.path.realpath(root))
        source = os.environ if environ is None else environ
        env = {k: v for k, v in source.items() if not k.startswith("GIT_") or k in _KEEP_ENV}
        env.update(
            GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0",
            GIT_PAGER="cat",
            PAGER="cat",
            GIT_EDITOR="true",
            GIT_SEQUENCE_EDITOR="true",
            LC_ALL="C",
        )
        env.pop("GIT_ASKPASS", None)
        env.pop("SSH_ASKPASS", None)
        self._env = env
        self._hooks = Path(tempfile.mkdtemp(prefix="teamctl-nohooks-"))
        self._identity: tuple[str, ...] | None = None

    @property
    def hooks_dir(self) -> Path:
        """The empty directory every call uses as ``core.hooksPath``."""
        return self._hooks

    def close(self) -> None:
        shutil.rmtree(self._hooks, ignore_errors=True)

    def base_args(self) -> list[str]:
        return [
            "git",
            "-c",
            f"core.hooksPath={self._hooks}",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.pager=cat",
            "-c",
            "core.editor=true",
            "-c",
            "commit.gpgSign=false",
            "-c",
            "tag.gpgSign=false",
            "-c",
            "protocol.allow=never",
            "--no-pager",
        ]

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        check: bool = True,
        remote: bool = False,
        timeout_s: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``git <args>`` in ``cwd`` (default: the main checkout). ``remote``: a push or
        fetch, allowed the transports a shared remote uses (``REMOTE_PROTOCOLS``; ``ext::``
        stays forbidden). ``timeout_s``: a git still running then is killed (a ``GitError``)."""
        allow = [f"protocol.{name}.allow=always" for name in REMOTE_PROTOCOLS] if remote else []
        argv = [*self.base_args(), *(part for kv in allow for part in ("-c", kv)), *args]
        try:
            proc = subprocess.run(
                argv,
                cwd=cwd or self.root,
                env=self._env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise GitError(args, -1, f"timed out after {timeout_s:g} s") from None
        if check and proc.returncode != 0:
            raise GitError(args, proc.returncode, proc.stderr)
        return proc

    def out(self, *args: str, cwd: Path | None = None) -> str:
        """Stdout of a successful call, stripped."""
        return self.run(*args, cwd=cwd).stdout.strip()

    def ok(self, *args: str, cwd: Path | None = None) -> bool:
        """True when the call exits 0."""
        return self.run(*args, cwd=cwd, check=False).returncode == 0

    # --- queries -------------------------------------------------------------------------------

    def rev(self, ref: str) -> str | None:
        """The commit ``ref`` names, or None."""
        proc = self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return proc.stdout.strip() or None if proc.returncode == 0 else None

    def current_branch(self, cwd: Path | None = None) -> str | None:
        """The branch checked out in ``cwd`` (None when detached)."""
        proc = self.run("symbolic-ref", "--quiet", "--short", "HEAD", cwd=cwd, check=False)
        return proc.stdout.strip() or None if proc.returncode == 0 else None

    def branch_exists(self, branch: str) -> bool:
        return self.ok("show-ref", "--verify", "--quiet", f"refs/heads/{branch}")

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.ok("merge-base", "--is-ancestor", older, newer)

    def dirty(self, cwd: Path | None = None, *, untracked: bool = True) -> list[str]:
        """``git status --porcelain`` lines (untracked files too unless ``untracked=False``)."""
        mode = "--untracked-files=all" if untracked else "--untracked-files=no"
        text = self.run("status", "--porcelain", mode, cwd=cwd).stdout
        return [line for line in text.splitlines() if line.strip()]

    def worktrees(self) -> list[GitWorktree]:
        return parse_worktree_list(self.run("worktree", "list", "--porcelain").stdout)

    def merge_tree(self, ours: str, theirs: str) -> tuple[str | None, list[str]]:
        """Merge in memory (``git merge-tree --write-tree``), touching no checkout: the tree id
        when clean, else ``(None, conflicting files)``."""
        proc = self.run(
            "merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs, check=False
        )
        lines = proc.stdout.splitlines()
        if proc.returncode == 0:
            return lines[0].strip(), []
        if proc.returncode == 1:
            return None, sorted({line for line in lines[1:] if line.strip()})
        raise GitError(("merge-tree", ours, theirs), proc.returncode, proc.stderr)

    def contains_changes(self, base: str, branch: str) -> bool:
        """True when merging ``branch`` into ``base`` would change nothing: it is an ancestor,
        or (after a squash merge) its changes are already there."""
        if self.is_ancestor(branch, base):
            return True
        tree, _ = self.merge_tree(base, branch)
        return tree is not None and tree == self.out("rev-parse", f"{base}^{{tree}}")

    # --- identity ------------------------------------------------------------------------------

    def identity_args(self) -> tuple[str, ...]:
        """``-c user.name=… -c user.email=…`` when the repository configures no identity."""
        if self._identity is None:
            extra: list[str] = []
            have_env = "GIT_AUTHOR_NAME" in self._env and "GIT_COMMITTER_NAME" in self._env
            if not have_env and not self.run("config", "user.name", check=False).stdout.strip():
                extra += ["-c", f"user.name={FALLBACK_IDENTITY[0]}"]
            have_mail = "GIT_AUTHOR_EMAIL" in self._env and "GIT_COMMITTER_EMAIL" in self._env
            if not have_mail and not self.run("config", "user.email", check=False).stdout.strip():
                extra += ["-c", f"user.email={FALLBACK_IDENTITY[1]}"]
            self._identity = tuple(extra)
        return self._identity

    def commit(self, message: str, *, cwd: Path | None = None) -> str:
        """Commit what is staged in ``cwd``; returns the new commit id."""
        self.run(*self.identity_args(), "commit", "--no-verify", "-q", "-m", message, cwd=cwd)
        return self.out("rev-parse", "HEAD", cwd=cwd)
