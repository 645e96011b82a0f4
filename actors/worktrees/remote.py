"""Worktree branches across hosts: pushed to the repository's shared remote when their task
completes, fetched by exactly the recorded commit where they are merged (docs/SCALE-OUT.md,
"Code across hosts").

Each host works in its own clone. When a task bound to worktree ``<name>`` completes, the
Worktrees actor of the completing clone pushes ``wt/<name>`` (``--force-with-lease``: the remote's
branch must still be what this clone last saw of it, or absent) and ``task.completed`` records
the branch's commit and the remote. ``teamctl worktree merge`` in a clone without that branch
fetches it and merges exactly the recorded commit.

Whether branches are pushed (``BranchSharing``): on the file backend only when
``team.worktree_remote`` names a remote (one host: nothing to share by default); on a backend
other hosts can join, to that remote, else the remote the main checkout's branch tracks, else
``origin``. With no such remote, claiming a worktree-bound task says in one line that its branch
cannot travel (``BranchSharing.warning``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from actors.board.state import WorktreeRecord
from actors.settings import Settings, team_backend
from actors.worktrees.git import Git, GitError, WorktreeError

PUSH_TIMEOUT_S = 120.0
"""A push or fetch still running after this is killed and reported as failed."""

DEFAULT_REMOTE = "origin"


@dataclass(frozen=True)
class BranchSharing:
    """Whether and where worktree branches are pushed when their task completes."""

    across_hosts: bool = False
    """The team's backend lets other hosts join (it is not the file backend)."""
    remote: str | None = None
    """``team.worktree_remote``: always push there; None = when ``across_hosts``, the remote the
    main checkout's branch tracks, else ``origin`` if this clone has it."""

    @classmethod
    def for_team(cls, settings_path: Path, settings: Settings) -> BranchSharing:
        """The policy of the team whose ``.team/settings.json`` is ``settings_path``."""
        across = team_backend(settings_path) is not None
        return cls(across_hosts=across, remote=settings.team.worktree_remote)

    def target(self, git: Git) -> str | None:
        """The remote to push to (None: branches stay in this clone)."""
        if self.remote is not None:
            return self.remote
        return default_remote(git) if self.across_hosts else None

    def warning(self, git: Git) -> str | None:
        """One line when other hosts may join but this clone's branches cannot reach them."""
        if not self.across_hosts:
            return None
        target = self.target(git)
        if target is None:
            return (
                "worktree branches cannot travel from this clone to other hosts: it has no "
                "shared git remote (none tracked, no origin); merge them here, or add a remote "
                "every host can reach (or set team.worktree_remote)"
            )
        if target not in remotes(git):
            return (
                "worktree branches cannot travel from this clone to other hosts: it has no git "
                f"remote {target!r} (team.worktree_remote)"
            )
        return None


def sharing_warning(root: Path, settings_path: Path, settings: Settings) -> str | None:
    """``BranchSharing.warning`` for the clone at ``root`` without a Worktrees actor (read-only
    git: a claim from the command line)."""
    sharing = BranchSharing.for_team(settings_path, settings)
    if not sharing.across_hosts:
        return None
    git = Git(root)
    try:
        return sharing.warning(git)
    finally:
        git.close()


def remotes(git: Git) -> list[str]:
    """The names of this clone's remotes."""
    return [line.strip() for line in git.out("remote").splitlines() if line.strip()]


def default_remote(git: Git) -> str | None:
    """The remote the main checkout's branch tracks, else ``origin``, else None."""
    names = remotes(git)
    branch = git.current_branch()
    if branch is not None:
        proc = git.run("config", "--get", f"branch.{branch}.remote", check=False)
        tracked = proc.stdout.strip()
        if tracked in names:
            return tracked
    return DEFAULT_REMOTE if DEFAULT_REMOTE in names else None


def push_branch(git: Git, remote: str, branch: str) -> None:
    """Push ``branch`` to the same name on ``remote``, replacing it only if it is still what
    this clone last fetched or pushed there (absent when never seen). ``WorktreeError`` names
    the remote and git's reason."""
    ref = f"refs/heads/{branch}"
    try:
        git.run(
            "push",
            "--quiet",
            "--no-verify",
            "--recurse-submodules=no",
            f"--force-with-lease={ref}",
            remote,
            f"{ref}:{ref}",
            remote=True,
            timeout_s=PUSH_TIMEOUT_S,
        )
    except GitError as exc:
        raise WorktreeError(f"could not push {branch} to remote {remote!r}: {exc}") from None


def _has_commit(git: Git, commit: str) -> bool:
    return git.ok("cat-file", "-e", f"{commit}^{{commit}}")


def fetch_completed(git: Git, record: WorktreeRecord) -> bool:
    """Make ``record``'s branch in this clone hold the commit its task's completion recorded,
    fetching it from the recorded remote when this clone lacks it. True when the branch was
    set from the remote; False when nothing had to be done (the branch already holds the
    commit, or nothing was recorded). ``WorktreeError`` when the commit cannot be had here."""
    commit, remote, branch = record.completed_commit, record.remote, record.branch
    local = git.rev(branch)
    if commit is None:
        if local is None:
            raise WorktreeError(
                f"{branch} is not in this clone and its task's completion recorded no commit "
                "to fetch: merge it in the clone that worked on it"
            )
        return False
    if local is not None and git.is_ancestor(commit, local):
        return False  # this clone's branch has the completed work (the local case)
    if remote is None:
        raise WorktreeError(
            f"{branch} ({commit[:12]}) was not pushed to a shared remote when its task "
            "completed: merge it in the clone that worked on it"
        )
    if remote not in remotes(git):
        raise WorktreeError(
            f"{branch} ({commit[:12]}) was pushed to remote {remote!r}, which this clone does "
            f"not have: add it (git remote add {remote} URL) and merge again"
        )
    ref = f"refs/heads/{branch}"
    try:
        git.run(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-recurse-submodules",
            remote,
            f"+{ref}:refs/remotes/{remote}/{branch}",
            remote=True,
            timeout_s=PUSH_TIMEOUT_S,
        )
    except GitError as exc:
        raise WorktreeError(f"could not fetch {branch} from remote {remote!r}: {exc}") from None
    if not _has_commit(git, commit):  # the branch moved on the remote: ask for the commit itself
        git.run(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-recurse-submodules",
            remote,
            commit,
            remote=True,
            check=False,
            timeout_s=PUSH_TIMEOUT_S,
        )
    if not _has_commit(git, commit):
        raise WorktreeError(
            f"commit {commit[:12]} of {branch} is no longer on remote {remote!r}; "
            "it was recorded when its task completed"
        )
    if any(w.branch == branch for w in git.worktrees()):
        raise WorktreeError(
            f"{branch} is checked out in a worktree of this clone but does not hold "
            f"{commit[:12]}, the commit its task completed with; merge it where it was worked"
        )
    git.run("update-ref", "-m", "teamctl: completed work fetched", ref, commit)
    return True
