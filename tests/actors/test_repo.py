"""Repository discovery from any folder, team folder checks, and the network-filesystem guard."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from actors.repo import (
    NotAGitRepository,
    TeamMissing,
    check_local_filesystem,
    find_repo,
    find_team,
    is_network_fstype,
    mount_fstype,
)
from mailboxes.errors import UnsafeFilesystem

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:35 / /home rw,relatime shared:2 - xfs /dev/sda2 rw
41 40 0:36 / /home/me/nfs rw,relatime shared:3 - nfs4 server:/export rw,vers=4.2
42 22 0:37 / /mnt/with\\040space rw - fuse.sshfs me@host:/ rw
43 22 0:38 / /mnt/over rw - cifs //srv/share rw
44 22 0:39 / /mnt/over rw - tmpfs tmpfs rw
"""


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path.resolve()


def test_finds_root_from_a_sub_folder(tmp_path: Path) -> None:
    root = git_init(tmp_path / "repo")
    deep = root / "a" / "b"
    deep.mkdir(parents=True)
    repo = find_repo(deep)
    assert repo.root == root
    assert repo.git_dir == root / ".git"
    assert repo.exclude_path == root / ".git" / "info" / "exclude"


def test_outside_a_repository(tmp_path: Path) -> None:
    with pytest.raises(NotAGitRepository, match="not a git repository"):
        find_repo(tmp_path)


def test_team_missing_says_init(tmp_path: Path) -> None:
    root = git_init(tmp_path / "repo")
    with pytest.raises(TeamMissing, match="teamctl init"):
        find_team(root)
    (root / ".team").mkdir()
    assert find_team(root).root == root


def test_linked_worktree_belongs_to_the_main_repository(tmp_path: Path) -> None:
    root = git_init(tmp_path / "repo")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    worktree = root / ".worktrees" / "one"
    subprocess.run([*git, "worktree", "add", "-q", "-b", "wt/one", str(worktree)], check=True)
    (worktree / "src").mkdir()
    repo = find_repo(worktree / "src")
    assert repo.root == root
    assert repo.git_dir == root / ".git"


def test_mount_type_picks_the_deepest_and_latest_mount() -> None:
    assert mount_fstype(Path("/home/me/code"), MOUNTINFO) == "xfs"
    assert mount_fstype(Path("/home/me/nfs/repo"), MOUNTINFO) == "nfs4"
    assert mount_fstype(Path("/home/me/nfsish"), MOUNTINFO) == "xfs"
    assert mount_fstype(Path("/mnt/with space/r"), MOUNTINFO) == "fuse.sshfs"
    assert mount_fstype(Path("/mnt/over/r"), MOUNTINFO) == "tmpfs"
    assert mount_fstype(Path("/srv"), MOUNTINFO) == "ext4"


@pytest.mark.parametrize(
    ("fstype", "network"),
    [
        ("nfs", True),
        ("nfs4", True),
        ("cifs", True),
        ("smb3", True),
        ("fuse.sshfs", True),
        ("9p", True),
        ("ext4", False),
        ("tmpfs", False),
        ("overlay", False),
        ("fuse.portal", False),
    ],
)
def test_network_filesystems(fstype: str, network: bool) -> None:
    assert is_network_fstype(fstype) is network


def test_refuses_a_repository_on_a_network_mount(tmp_path: Path) -> None:
    root = git_init(tmp_path / "repo")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        f"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n41 22 0:36 / {root} rw - nfs s:/x rw\n"
    )
    with pytest.raises(UnsafeFilesystem, match="network filesystem \\(nfs\\)"):
        find_repo(root / "sub", mountinfo=mountinfo)
    with pytest.raises(UnsafeFilesystem):
        check_local_filesystem(root, mountinfo=mountinfo)


def test_real_mountinfo_accepts_tmp_path(tmp_path: Path) -> None:
    root = git_init(tmp_path / "repo")
    assert find_repo(root).root == root


def test_missing_mountinfo_is_allowed(tmp_path: Path) -> None:
    """Where the mount table cannot be read (not Linux), the repository is used; the same
    repository listed on NFS is refused."""
    root = git_init(tmp_path / "repo")
    nfs = tmp_path / "mountinfo"
    nfs.write_text(f"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n41 22 0:36 / {root} rw - nfs s:/x rw\n")
    with pytest.raises(UnsafeFilesystem):
        find_repo(root, mountinfo=nfs)
    absent = tmp_path / "absent"
    assert check_local_filesystem(root, mountinfo=absent) is None
    assert find_repo(root / "sub", mountinfo=absent).root == root
