"""Code across hosts on a JetStream team (docs/SCALE-OUT.md, "Code across hosts"): two clones of
one repository, each connected to the same team on a real nats-server from the wheel, share only
the journal and a bare git repository as their remote. Clone one makes a worktree and completes
its task with ``complete_task``; ``teamctl worktree merge`` in clone two (which never had that
worktree) fetches the recorded commit and its main then holds clone one's work. Claiming a
worktree-bound task from the command line says in one line when the branch cannot travel."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result

from actors.factory import open_team
from actors.tools.toolsets import NO_HOOKS, lead_tools, teammate_tools
from actors.worktrees.actor import WorktreesHandle
from mailboxes.events import TaskCompleted, payload
from tests.actors.cli.cli_support import run
from tests.actors.team_support import Driver, run_team
from tests.actors.worktrees.test_worktrees_remote import git, shared_remote
from tests.support.nats_server import NatsServer, running_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


@pytest.fixture(autouse=True)
def _no_backend_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAMCTL_BACKEND", raising=False)
    monkeypatch.delenv("TEAMCTL_SETTINGS", raising=False)


def cli_in(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    """``teamctl ARGS`` run in-process in the checkout ``root``."""
    monkeypatch.chdir(root)
    return run(list(args))


def connect(root: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the checkout at the team on the server and run ``teamctl init`` there."""
    (root / ".team").mkdir()
    (root / ".team" / "settings.json").write_text(json.dumps({"backend": backend}))
    result = cli_in(root, monkeypatch, "init")
    assert result.exit_code == 0, result.output


def complete_in_clone_one(one: Path) -> str:
    """In clone one, a real runtime (with its Worktrees actor, the team's branch sharing): the
    lead spawns ann on task_1 (bound to ``cart``); speaking for her, the test commits and
    completes with ``complete_task``. Returns the tool's answer."""
    team = run_team(one, worktrees=True)
    try:
        handle = team.worktrees
        assert isinstance(handle, WorktreesHandle)
        spawned = Driver(lead_tools(team, hooks=NO_HOOKS), "lead", one).ok(
            "spawn_teammate", name="ann", prompt="work", task_id="task_1"
        )
        assert "working on task_1" in spawned and "cannot travel" not in spawned  # has origin
        path = handle.path("cart")
        ann = Driver(teammate_tools(team, "ann", hooks=NO_HOOKS), "ann", path)
        (path / "cart.py").write_text("CART = []\n")
        git(path, "add", "cart.py")
        git(path, "commit", "-q", "-m", "cart, from clone one")
        return ann.ok("complete_task", task_id="task_1", summary="cart added")
    finally:
        team.close()


def test_a_branch_completed_in_one_clone_is_merged_in_another(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare, one, two = shared_remote(tmp_path)
    backend = f"{server.url}/shop"
    connect(one, backend, monkeypatch)
    connect(two, backend, monkeypatch)
    assert cli_in(two, monkeypatch, "task", "add", "add the cart").exit_code == 0
    made = cli_in(one, monkeypatch, "worktree", "add", "cart", "--task", "task_1")
    assert made.exit_code == 0, made.output

    text = complete_in_clone_one(one)
    tip = git(one, "rev-parse", "wt/cart")
    assert f"Pushed wt/cart ({tip[:12]}) to origin." in text
    assert git(bare, "rev-parse", "refs/heads/wt/cart") == tip

    # clone two sees the completion, with the commit and the remote, in the shared journal
    shown = cli_in(two, monkeypatch, "events", "--json")
    assert shown.exit_code == 0, shown.output
    team = open_team(two)
    try:
        [event] = [e for e in team.journal.read_from(1) if e.type == "task.completed"]
        body = payload(event)
        assert isinstance(body, TaskCompleted) and (body.commit, body.remote) == (tip, "origin")
    finally:
        team.close()
    assert not (two / ".worktrees" / "cart").exists()
    assert git(two, "branch", "--list", "wt/cart") == ""

    merged = cli_in(two, monkeypatch, "worktree", "merge", "cart")
    assert merged.exit_code == 0, merged.output + merged.stderr
    assert "cart: merged into main (fast-forward, fetched from origin)" in merged.output
    assert git(two, "rev-parse", "HEAD") == tip
    assert (two / "cart.py").read_text() == "CART = []\n"
    assert "cart, from clone one" in git(two, "log", "--format=%s", "main")

    # the merge is journaled for every clone: clone one sees it merged
    listed = cli_in(one, monkeypatch, "worktree", "list", "--json")
    assert listed.exit_code == 0, listed.output
    [view] = json.loads(listed.output)["worktrees"]
    assert view["merged_commit"] == tip


def test_claiming_from_the_command_line_says_when_the_branch_cannot_travel(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    lonely = tmp_path / "lonely"
    subprocess.run(["git", "init", "-q", "-b", "main", str(lonely)], check=True)
    git(lonely, "config", "user.name", "T")
    git(lonely, "config", "user.email", "t@example.com")
    git(lonely, "commit", "-q", "--allow-empty", "-m", "initial")
    connect(lonely, f"{server.url}/solo", monkeypatch)
    for subject in ("in a worktree", "in the checkout"):
        assert cli_in(lonely, monkeypatch, "task", "add", subject).exit_code == 0
    made = cli_in(lonely, monkeypatch, "worktree", "add", "w", "--task", "task_1")
    assert made.exit_code == 0, made.output

    claimed = cli_in(lonely, monkeypatch, "task", "claim", "task_1", "--as", "bob")
    assert claimed.exit_code == 0, claimed.output
    lines = [line for line in claimed.stderr.splitlines() if "cannot travel" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: worktree branches cannot travel")
    # a task with no worktree: nothing to say
    other = cli_in(lonely, monkeypatch, "task", "claim", "task_2", "--as", "eve")
    assert other.exit_code == 0 and "cannot travel" not in other.stderr


def test_on_the_file_backend_claiming_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lonely = tmp_path / "lonely"
    subprocess.run(["git", "init", "-q", "-b", "main", str(lonely)], check=True)
    git(lonely, "config", "user.name", "T")
    git(lonely, "config", "user.email", "t@example.com")
    git(lonely, "commit", "-q", "--allow-empty", "-m", "initial")
    assert cli_in(lonely, monkeypatch, "init").exit_code == 0
    assert cli_in(lonely, monkeypatch, "task", "add", "work").exit_code == 0
    assert cli_in(lonely, monkeypatch, "worktree", "add", "w", "--task", "task_1").exit_code == 0
    claimed = cli_in(lonely, monkeypatch, "task", "claim", "task_1", "--as", "bob")
    assert claimed.exit_code == 0 and claimed.stderr == "", claimed.stderr
