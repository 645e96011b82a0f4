"""Worktree branches across clones (docs/SCALE-OUT.md, "Code across hosts"), with real git: a
bare repository is the shared remote of two clones. ``complete_task`` in clone one pushes
``wt/<name>`` and records its commit and the remote in ``task.completed``; a merge in clone two,
which never had the worktree, fetches exactly that commit. Both clones' Worktrees actors read one
board here (the shared journal); tests/actors/worktrees/test_worktrees_remote_nats.py runs the
same on a JetStream team with the real CLI."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pykka
import pytest

from actors.settings import parse_settings
from actors.tools.toolsets import NO_HOOKS, lead_tools, teammate_tools
from actors.worktrees.actor import WorktreesHandle
from actors.worktrees.git import WorktreeError
from actors.worktrees.remote import BranchSharing, sharing_warning
from mailboxes.events import Event, TaskCompleted, payload
from tests.actors.team_support import Driver, RealTeam, real_team


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def clone(bare: Path, path: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(bare), str(path)], check=True)
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.com")
    return path.resolve()


def shared_remote(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(bare remote, clone one, clone two), ``main`` with one commit on the remote."""
    bare = tmp_path / "shared.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    one = clone(bare, tmp_path / "one")
    (one / "README.md").write_text("hello\n")
    git(one, "add", "README.md")
    git(one, "commit", "-q", "-m", "initial")
    git(one, "push", "-q", "-u", "origin", "main")
    two = clone(bare, tmp_path / "two")
    return bare, one, two


@dataclass
class Clones:
    bare: Path
    one: Path
    two: Path
    team: RealTeam
    wt_one: WorktreesHandle

    def worked_and_claimed(self) -> Driver:
        """task_1 bound to worktree ``cart`` in clone one, claimed by ann, with one commit of
        hers and one uncommitted file."""
        lead = Driver(lead_tools(self.team, hooks=NO_HOOKS), "lead", self.one)
        lead.ok("spawn_teammate", name="ann", prompt="work")  # first: it would claim a ready task
        lead.ok("create_task", subject="add the cart")
        lead.ok("create_worktree", name="cart", task_id="task_1")
        path = self.wt_one.path("cart")
        ann = Driver(teammate_tools(self.team, "ann", hooks=NO_HOOKS), "ann", path)
        ann.ok("claim_task", task_id="task_1")
        (path / "cart.py").write_text("CART = []\n")
        git(path, "add", "cart.py")
        git(path, "commit", "-q", "-m", "cart")
        (path / "notes.txt").write_text("left uncommitted\n")
        return ann

    def completion(self) -> TaskCompleted:
        events: list[Event] = self.team.events("task.completed")
        body = payload(events[-1])
        assert isinstance(body, TaskCompleted)
        return body


def _clones(
    tmp_path: Path,
    settings: dict[str, object] | None = None,
    sharing: BranchSharing | None = None,
) -> Clones:
    """A real runtime in clone one with its own Worktrees actor (the team's branch sharing), or
    with one started here with ``sharing`` (across hosts needs a backend other hosts join)."""
    bare, one, two = shared_remote(tmp_path)
    team = real_team(one, settings, worktrees=sharing is None)
    if sharing is not None:
        team.worktrees = WorktreesHandle.start(one, team.board, sharing=sharing)
    handle = team.worktrees
    assert isinstance(handle, WorktreesHandle)
    return Clones(bare, one, two, team, handle)


@pytest.fixture
def pushed(tmp_path: Path) -> Iterator[Clones]:
    """Branches pushed to ``origin`` (``team.worktree_remote``)."""
    clones = _clones(tmp_path, {"team": {"worktree_remote": "origin"}})
    yield clones
    clones.team.close()
    pykka.ActorRegistry.stop_all()  # the other clones' Worktrees actors


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Clones]:
    """The file backend's default: branches stay in their clone."""
    clones = _clones(tmp_path)
    yield clones
    clones.team.close()
    pykka.ActorRegistry.stop_all()


def test_completion_pushes_the_branch_and_records_its_commit(pushed: Clones) -> None:
    ann = pushed.worked_and_claimed()
    text = ann.ok("complete_task", task_id="task_1", summary="cart added")
    tip = git(pushed.one, "rev-parse", "wt/cart")
    assert f"Pushed wt/cart ({tip[:12]}) to origin." in text
    body = pushed.completion()
    assert (body.commit, body.remote) == (tip, "origin")
    # the branch on the remote is exactly that commit, with the uncommitted file committed
    assert git(pushed.bare, "rev-parse", "refs/heads/wt/cart") == tip
    assert "notes.txt" in git(pushed.bare, "ls-tree", "--name-only", tip)
    record = pushed.team.board.refresh().worktrees["cart"]
    assert (record.completed_commit, record.remote) == (tip, "origin")


def test_another_clone_merges_exactly_the_recorded_commit(pushed: Clones) -> None:
    ann = pushed.worked_and_claimed()
    ann.ok("complete_task", task_id="task_1", summary="cart added")
    recorded = pushed.completion().commit
    assert recorded is not None
    # the branch moves on the remote after the completion: not part of the completed work
    later = pushed.wt_one.path("cart")
    (later / "late.txt").write_text("after completion\n")
    git(later, "add", "late.txt")
    git(later, "commit", "-q", "-m", "late")
    git(pushed.one, "push", "-q", "origin", "wt/cart")

    two = WorktreesHandle.start(pushed.two, pushed.team.board)
    assert not two.path("cart").exists()
    result = two.merge("cart")
    assert result.ok and result.fetched_from == "origin", result
    assert git(pushed.two, "rev-parse", "HEAD") == recorded  # a fast-forward to exactly it
    assert (pushed.two / "cart.py").read_text() == "CART = []\n"
    assert not (pushed.two / "late.txt").exists()
    merged = pushed.team.board.refresh().worktrees["cart"].merged_commit
    assert merged == recorded
    # merging again changes nothing
    again = two.merge("cart")
    assert again.already_merged


def test_another_clone_merges_with_a_merge_commit_when_its_main_moved(pushed: Clones) -> None:
    ann = pushed.worked_and_claimed()
    ann.ok("complete_task", task_id="task_1", summary="cart added")
    recorded = pushed.completion().commit
    assert recorded is not None
    (pushed.two / "other.txt").write_text("clone two's own work\n")
    git(pushed.two, "add", "other.txt")
    git(pushed.two, "commit", "-q", "-m", "other")
    two = WorktreesHandle.start(pushed.two, pushed.team.board)
    result = two.merge("cart")
    assert result.ok and not result.fast_forward
    assert git(pushed.two, "rev-parse", "HEAD^2") == recorded
    assert (pushed.two / "cart.py").exists() and (pushed.two / "other.txt").exists()


def test_a_failed_push_refuses_the_completion_clearly(pushed: Clones) -> None:
    ann = pushed.worked_and_claimed()
    # someone else's wt/cart is already on the remote: the lease (absent) does not hold
    git(pushed.two, "push", "-q", "origin", "main:refs/heads/wt/cart")
    refused = ann.error("complete_task", task_id="task_1", summary="cart added")
    assert "Completion of task_1 refused: could not push wt/cart to remote 'origin'" in refused
    assert "stale info" in refused or "rejected" in refused
    assert "The task is still yours" in refused
    assert pushed.team.board.refresh().task("task_1").status == "in_progress"
    assert pushed.team.events("task.completed") == []
    # once the stray branch is gone, completing again pushes
    git(pushed.two, "push", "-q", "origin", ":refs/heads/wt/cart")
    ann.ok("complete_task", task_id="task_1", summary="cart added")
    assert git(pushed.bare, "rev-parse", "refs/heads/wt/cart") == pushed.completion().commit


def test_an_unreachable_remote_refuses_the_completion(pushed: Clones, tmp_path: Path) -> None:
    ann = pushed.worked_and_claimed()
    git(pushed.one, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    refused = ann.error("complete_task", task_id="task_1", summary="cart added")
    assert "could not push wt/cart to remote 'origin'" in refused
    assert pushed.team.board.refresh().task("task_1").status == "in_progress"


def test_the_file_backend_keeps_branches_in_their_clone(local: Clones) -> None:
    ann = local.worked_and_claimed()
    text = ann.ok("complete_task", task_id="task_1", summary="cart added")
    assert "Pushed" not in text
    body = local.completion()
    assert body.commit == git(local.one, "rev-parse", "wt/cart") and body.remote is None
    assert git(local.bare, "for-each-ref", "refs/heads/wt/") == ""  # nothing pushed
    # the local merge is unchanged
    result = local.wt_one.merge("cart")
    assert result.ok and result.fetched_from is None
    # another clone cannot get it, and says why
    two = WorktreesHandle.start(local.two, local.team.board)
    with pytest.raises(WorktreeError, match="was not pushed to a shared remote"):
        two.merge("cart")


def test_a_clone_without_the_recorded_remote_says_so(pushed: Clones) -> None:
    ann = pushed.worked_and_claimed()
    ann.ok("complete_task", task_id="task_1", summary="cart added")
    git(pushed.two, "remote", "rename", "origin", "upstream")
    two = WorktreesHandle.start(pushed.two, pushed.team.board)
    with pytest.raises(WorktreeError, match="pushed to remote 'origin', which this clone does not"):
        two.merge("cart")


def test_claiming_says_when_the_branch_cannot_travel(tmp_path: Path) -> None:
    # a repository with no remote at all; across hosts needs a backend other hosts join, so its
    # Worktrees actor is started here with that policy (the team is the real runtime's)
    lonely = real_team(tmp_path / "lonely", initial_commit=True)
    try:
        for sharing, warned in ((BranchSharing(across_hosts=True), True), (BranchSharing(), False)):
            handle = WorktreesHandle.start(lonely.root, lonely.board, sharing=sharing)
            lonely.worktrees = handle
            lead = Driver(lead_tools(lonely, hooks=NO_HOOKS), "lead", lonely.root)
            member = f"m{len(lonely.board.refresh().tasks) + 1}"
            lead.ok("spawn_teammate", name=member, prompt="work")  # first: it would claim one
            tid = lead.ok("create_task", subject="work").split()[1].rstrip(":")
            name = f"w{tid}"
            lead.ok("create_worktree", name=name, task_id=tid)
            who = Driver(teammate_tools(lonely, member, hooks=NO_HOOKS), member, lonely.root)
            text = who.ok("claim_task", task_id=tid)
            lines = [line for line in text.splitlines() if "cannot travel" in line]
            assert len(lines) == (1 if warned else 0), text
            if warned:
                assert lines[0].startswith("warning: worktree branches cannot travel")
                assert "no shared git remote" in lines[0]
            handle.stop()
    finally:
        lonely.close()
        pykka.ActorRegistry.stop_all()


def test_with_a_shared_remote_claiming_says_nothing(tmp_path: Path) -> None:
    clones = _clones(tmp_path, sharing=BranchSharing(across_hosts=True))
    try:
        ann = clones.worked_and_claimed()  # claim_task inside
        text = ann.ok("get_task", task_id="task_1")
        assert "cannot travel" not in text
        assert clones.wt_one.sharing_warning() is None
        # across hosts with no setting: the remote the checkout tracks
        ann.ok("complete_task", task_id="task_1", summary="done")
        assert clones.completion().remote == "origin"
    finally:
        clones.team.close()
        pykka.ActorRegistry.stop_all()


def test_the_policy_follows_the_backend_and_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAMCTL_BACKEND", raising=False)
    settings_path = tmp_path / "settings.json"
    settings_path.write_text(json.dumps({"backend": "file"}))
    plain = parse_settings({}, "test")
    assert BranchSharing.for_team(settings_path, plain) == BranchSharing()
    named = parse_settings({"team": {"worktree_remote": "shared"}}, "test")
    assert BranchSharing.for_team(settings_path, named) == BranchSharing(remote="shared")
    monkeypatch.setenv("TEAMCTL_BACKEND", "nats://127.0.0.1:4222/demo")
    assert BranchSharing.for_team(settings_path, plain) == BranchSharing(across_hosts=True)
    # the command line's check: a repository without remotes on a backend other hosts join
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    warning = sharing_warning(repo, settings_path, plain)
    assert warning is not None and "cannot travel" in warning
    warning = sharing_warning(repo, settings_path, named)
    assert warning is not None and "no git remote 'shared'" in warning
    monkeypatch.delenv("TEAMCTL_BACKEND")
    assert sharing_warning(repo, settings_path, plain) is None


def test_a_v2_completion_loads_without_a_commit() -> None:
    old = Event(
        seq=3,
        ts=0.0,
        type="task.completed",
        actor="ann",
        data={"task_id": "task_1", "owner": "ann", "epoch": 1, "forced_by": None},
        v=2,
    )
    body = payload(old)
    assert isinstance(body, TaskCompleted)
    assert (body.commit, body.remote) == (None, None)


def test_another_clone_sees_no_drift_for_a_pushed_worktree(pushed: Clones) -> None:
    two = WorktreesHandle.start(pushed.two, pushed.team.board)
    ann = pushed.worked_and_claimed()
    # claimed in clone one: clone two has no such directory, and says so
    assert [d.kind for d in two.reconcile().drifts] == ["missing_directory"]
    ann.ok("complete_task", task_id="task_1", summary="cart added")
    # completed and pushed: its work is on the remote, nothing is missing; repair keeps it
    report = two.reconcile(repair=True)
    assert report.clean and report.repaired == ()
    assert not pushed.team.board.refresh().worktrees["cart"].removed


def test_a_completion_without_a_commit_is_merged_where_it_was_worked(pushed: Clones) -> None:
    """``teamctl task complete`` (a person) records no commit: another clone says where to go."""
    pushed.worked_and_claimed()
    task = pushed.team.board.refresh().task("task_1")
    pushed.team.board.complete("task_1", "ann", task.epoch, "by hand")
    assert pushed.completion().commit is None
    two = WorktreesHandle.start(pushed.two, pushed.team.board)
    with pytest.raises(WorktreeError, match="recorded no commit to fetch"):
        two.merge("cart")


def test_the_recorded_commit_is_fetched_even_when_the_branch_was_rewritten(
    pushed: Clones,
) -> None:
    ann = pushed.worked_and_claimed()
    ann.ok("complete_task", task_id="task_1", summary="cart added")
    recorded = pushed.completion().commit
    assert recorded is not None
    git(pushed.one, "push", "-q", "--force", "origin", "main:refs/heads/wt/cart")
    two = WorktreesHandle.start(pushed.two, pushed.team.board)
    result = two.merge("cart")
    assert result.ok and git(pushed.two, "rev-parse", "HEAD") == recorded
    assert (pushed.two / "cart.py").exists()


def test_a_runtime_says_once_at_start_when_branches_cannot_travel(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from actors.runtime.services import TaskWorktrees

    lonely = real_team(tmp_path / "lonely")  # no remote
    try:
        for sharing, lines in ((BranchSharing(across_hosts=True), 1), (BranchSharing(), 0)):
            caplog.clear()
            worktrees = TaskWorktrees(lonely.root, lonely.board, lonely.settings, sharing=sharing)
            with caplog.at_level(logging.WARNING, logger="actors.runtime.services"):
                worktrees.start()
            worktrees.stop()
            said = [r.message for r in caplog.records if "cannot travel" in r.message]
            assert len(said) == lines, said
    finally:
        lonely.close()
        pykka.ActorRegistry.stop_all()
