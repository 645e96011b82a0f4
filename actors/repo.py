"""Find the repository a command runs in, from any folder inside it.

The team lives in the main working tree of a git repository: ``.team/``, ``.tasks/`` and
``.worktrees/`` sit beside its ``.git``. A command started inside a linked worktree (for example
``.worktrees/<name>/src``) belongs to the same team, so discovery follows the worktree's ``.git``
file back to the main repository.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from actors.errors import TeamError
from mailboxes.errors import UnsafeFilesystem

MOUNTINFO = Path("/proc/self/mountinfo")

# Filesystems on which flock and rename(2) are not safe to build a journal on.
_NETWORK_FSTYPES = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb",
        "smb2",
        "smb3",
        "smbfs",
        "ncpfs",
        "9p",
        "afs",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "davfs",
        "coda",
    }
)
_NETWORK_FUSE = frozenset(
    {"sshfs", "s3fs", "rclone", "davfs2", "glusterfs", "gcsfuse", "goofys", "juicefs"}
)


class NotAGitRepository(TeamError):
    """The command was run outside any git repository."""

    def __init__(self, start: Path) -> None:
        super().__init__(f"not a git repository (or any parent folder): {start}")
        self.start = start


class TeamMissing(TeamError):
    """The repository has no ``.team/`` folder yet."""

    def __init__(self, root: Path) -> None:
        super().__init__(f"`.team/` missing in {root} — run `teamctl init`")
        self.root = root


class JournalMissing(TeamError):
    """``.team/`` exists but its journal does not: the team's history is gone, and starting a
    new team on top of its leftovers would reuse its task ids (docs/RELIABILITY.md)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"the team journal {path} is missing: restore it from a backup, or move `.team/` "
            "away and run `teamctl init` to start a new team"
        )
        self.path = path


@dataclass(frozen=True)
class Repo:
    """A repository and the team folders inside its main working tree."""

    root: Path
    """The main working tree (absolute, symlinks resolved)."""
    git_dir: Path
    """The common git directory (``<root>/.git`` for a normal clone)."""

    @property
    def team_dir(self) -> Path:
        return self.root / ".team"

    @property
    def tasks_dir(self) -> Path:
        return self.root / ".tasks"

    @property
    def worktrees_dir(self) -> Path:
        return self.root / ".worktrees"

    @property
    def settings_path(self) -> Path:
        return self.team_dir / "settings.json"

    @property
    def exclude_path(self) -> Path:
        return self.git_dir / "info" / "exclude"

    def has_team(self) -> bool:
        """True once ``teamctl init`` has created ``.team/``."""
        return self.team_dir.is_dir()


def _read_gitfile(path: Path) -> Path | None:
    """The target of a ``.git`` file (``gitdir: <path>``), or None if it is not one."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    if not target.is_absolute():
        target = path.parent / target
    return target.resolve()


def _common_dir(git_dir: Path) -> Path:
    """The repository's shared git dir: a linked worktree's gitdir names it in ``commondir``."""
    commondir = git_dir / "commondir"
    try:
        rel = commondir.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return git_dir
    common = Path(rel)
    if not common.is_absolute():
        common = git_dir / common
    return common.resolve()


def _repo_at(folder: Path) -> Repo | None:
    dot_git = folder / ".git"
    if dot_git.is_dir():
        return Repo(root=folder, git_dir=dot_git)
    if dot_git.is_file():
        target = _read_gitfile(dot_git)
        if target is None or not target.is_dir():
            return None
        common = _common_dir(target)
        # A linked worktree of a normal clone: the team lives in the main working tree.
        if common != target and common.name == ".git" and common.is_dir():
            return Repo(root=common.parent, git_dir=common)
        return Repo(root=folder, git_dir=common)
    return None


def find_repo(start: Path | None = None, *, mountinfo: Path = MOUNTINFO) -> Repo:
    """The repository containing ``start`` (default: the current folder).

    Raises ``NotAGitRepository`` outside a repository and ``UnsafeFilesystem`` when the
    repository is on a network filesystem.
    """
    begin = (start or Path.cwd()).resolve()
    for folder in (begin, *begin.parents):
        repo = _repo_at(folder)
        if repo is not None:
            check_local_filesystem(repo.root, mountinfo=mountinfo)
            return repo
    raise NotAGitRepository(begin)


def find_team(start: Path | None = None, *, mountinfo: Path = MOUNTINFO) -> Repo:
    """Like ``find_repo`` but also requires ``.team/`` (raises ``TeamMissing``)."""
    repo = find_repo(start, mountinfo=mountinfo)
    if not repo.has_team():
        raise TeamMissing(repo.root)
    return repo


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out = []
    i = 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_fstype(path: Path, mountinfo_text: str) -> str | None:
    """The filesystem type of the mount holding ``path`` (an absolute, resolved path)."""
    best: tuple[int, str] | None = None
    target = str(path)
    for line in mountinfo_text.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        point = _unescape(fields[4])
        inside = target == point or point == "/" or target.startswith(point.rstrip("/") + "/")
        # ``>=``: a later entry for the same mount point is mounted over the earlier one.
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), right.split()[0])
    return None if best is None else best[1]


def is_network_fstype(fstype: str) -> bool:
    """True for filesystems where flock/rename are not safe (NFS, SMB, sshfs, 9p, …)."""
    if fstype in _NETWORK_FSTYPES or fstype.startswith(("nfs", "smb")):
        return True
    if fstype.startswith("fuse."):
        return fstype[len("fuse.") :] in _NETWORK_FUSE
    return False


def check_local_filesystem(path: Path, *, mountinfo: Path = MOUNTINFO) -> None:
    """Refuse a network filesystem. Where ``mountinfo`` cannot be read (not Linux), allow."""
    try:
        text = mountinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    fstype = mount_fstype(Path(os.path.realpath(path)), text)
    if fstype is not None and is_network_fstype(fstype):
        raise UnsafeFilesystem(
            f"{path} is on a network filesystem ({fstype}): file locks and atomic renames are "
            "not safe there; use a local clone"
        )
