"""Names mean someone, from a terminal: who a person may be with ``--as``, what a person may do
to a live agent's work and mail (``--force``, journaled), the validation gaps of ``task edit``
and ``cron add``, and the one ``error: `` prefix."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from actors.factory import open_team
from mailboxes.events import Event, MemberSpawned
from mailboxes.journal.store import FileJournal
from mailboxes.liveness import FlockLiveness
from tests.actors.cli.cli_support import fails, git_repo, ok, ok_json, run

TEXT: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 60}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return git_repo(tmp_path, monkeypatch)


def events(root: Path) -> list[Event]:
    journal = FileJournal(root / ".team")
    try:
        return list(journal.read_from(1))
    finally:
        journal.close()


@pytest.fixture
def live_alice(repo: Path) -> Iterator[Path]:
    """``alice``, an agent holding task_1 whose liveness lock is held (as by a running teamctl
    hosting it); task_2 is ready. Mail waits in her inbox."""
    with open_team(repo, actor="runtime") as team:
        team.board.create("one")
        team.board.create("two")
        team.board.add_member(MemberSpawned(name="alice", role="general"))
        assert team.board.claim("task_1", "alice").ok
        team.mailbox.ensure_inbox("alice")
    ok(["send", "alice", "please look at the tests"])
    with ExitStack() as stack:
        stack.enter_context(FlockLiveness(repo / ".team" / "members").hold("alice"))
        yield repo


@pytest.mark.parametrize("name", ["lead", "user", "runtime", "cli", "all", "-rf", "Lead"])
def test_reserved_and_unsafe_names_are_no_persons(repo: Path, name: str) -> None:
    ok(["task", "add", "one"])
    before = len(events(repo))
    line = fails(["task", "claim", "task_1", "--as", name])
    assert line.startswith(f"error: invalid member name '{name}': ")
    assert len(events(repo)) == before, "nothing is journaled"
    assert fails(["task", "complete", "task_1", "--as", name]).startswith("error: invalid member")


def test_two_people_cannot_differ_only_in_case(repo: Path) -> None:
    ok(["task", "add", "one"])
    ok(["task", "add", "two"])
    ok(["task", "claim", "task_1", "--as", "Alice"])
    line = fails(["task", "claim", "task_2", "--as", "alice"])
    assert line == (
        "error: team member 'Alice' already exists (names are case-insensitive): "
        "pick another name than 'alice'"
    )
    assert ok_json(["task", "show", "task_2"])["owner"] is None


def test_a_person_cannot_finish_a_live_agents_task_without_force(live_alice: Path) -> None:
    for verb in ("complete", "release"):
        line = fails(["task", verb, "task_1", "--as", "alice"])
        assert line.startswith("error: alice is a live agent hosted by a running teamctl: ")
        assert f"{verb} its task task_1" in line and "--force" in line
    assert ok_json(["task", "show", "task_1"])["status"] == "in_progress"
    done = ok(["task", "complete", "task_1", "--as", "alice", "--force", "--by", "carol"])
    assert done.stdout.strip() == "alice completed task_1 (forced by carol)"
    last = events(live_alice)[-1]
    assert (last.type, last.actor, last.v) == ("task.completed", "carol", 3)
    assert (last.data["owner"], last.data["forced_by"]) == ("alice", "carol")


def test_a_forced_release_records_who_forced_it(live_alice: Path) -> None:
    ok(["task", "release", "task_1", "--as", "alice", "--force"])
    last = events(live_alice)[-1]
    assert (last.type, last.data["forced_by"], last.data["reason"]) == (
        "task.released",
        "user",
        "released by hand",
    )


def test_an_agent_no_process_hosts_needs_no_force(repo: Path) -> None:
    with open_team(repo, actor="runtime") as team:
        team.board.create("one")
        team.board.add_member(MemberSpawned(name="bob", role="general"))
        team.board.claim("task_1", "bob")
    ok(["task", "complete", "task_1", "--as", "bob"])
    assert events(repo)[-1].data["forced_by"] is None


def test_a_person_cannot_read_away_a_live_agents_mail_without_force(live_alice: Path) -> None:
    line = fails(["inbox", "alice", "--ack"])
    assert line.startswith("error: alice is a live agent") and "mark its mail as read" in line
    assert len(ok_json(["inbox", "alice"])) == 1, "peeking is fine and the mail is still unread"
    assert "acknowledged 1 message(s)" in ok(["inbox", "alice", "--ack", "--force"]).stdout
    assert ok_json(["inbox", "alice"]) == []
    last = events(live_alice)[-1]
    assert (last.type, last.data["agent"], last.data["forced_by"]) == (
        "inbox.acknowledged",
        "alice",
        "user",
    )
    assert len(last.data["message_ids"]) == 1


def test_acking_the_mail_of_a_stopped_lead_needs_no_force(repo: Path) -> None:
    ok(["send", "lead", "hello"])
    assert "acknowledged 1 message(s)" in ok(["inbox", "lead", "--ack"]).stdout
    assert all(e.type != "inbox.acknowledged" for e in events(repo))


def test_task_edit_refuses_an_empty_subject_and_a_missing_dependency(repo: Path) -> None:
    ok(["task", "add", "one"])
    ok(["task", "add", "two", "--blocked-by", "task_1"])
    ok(["task", "add", "three"])
    before = len(events(repo))
    assert fails(["task", "edit", "task_2", "--subject", ""]) == "error: a task needs a subject"
    assert fails(["task", "edit", "task_2", "--subject", "  "]) == "error: a task needs a subject"
    line = fails(["task", "edit", "task_2", "--remove-blocked-by", "task_3"])
    assert line == "error: task task_2 is not blocked by task_3"
    assert len(events(repo)) == before
    assert ok(["task", "edit", "task_2", "--remove-blocked-by", "task_1"]).stdout == (
        "updated task_2\n"
    )
    assert ok_json(["task", "show", "task_2"])["blocked_by"] == []


def test_cron_add_needs_an_agent_of_the_team(repo: Path) -> None:
    assert fails(["cron", "add", "* * * * *", "p", "--owner", "nobody"]) == (
        "error: unknown team member 'nobody'"
    )
    ok(["task", "add", "one"])
    ok(["task", "claim", "task_1", "--as", "carol"])
    assert "unknown team member 'carol'" in fails(
        ["cron", "add", "* * * * *", "p", "--owner", "carol"]
    ), "a person is never woken by cron"
    with open_team(repo, actor="runtime") as team:
        team.board.add_member(MemberSpawned(name="w1", role="general"))
    assert ok_json(["cron", "add", "* * * * *", "p", "--owner", "w1"])["owner"] == "w1"
    assert ok_json(["cron", "add", "* * * * *", "p"])["owner"] == "lead"
    assert all(e.data.get("owner") != "nobody" for e in events(repo))


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (["--bogus"], " [OPTIONS] COMMAND [ARGS]..."),
        (["nosuch"], " [OPTIONS] COMMAND [ARGS]..."),
        (["task", "add"], " task add [OPTIONS] SUBJECT"),
        (["task", "edit", "task_1"], " task edit [OPTIONS] TASK_ID"),
        (["inbox", "lead", "--limit", "0"], " inbox [OPTIONS] AGENT"),
    ],
)
def test_usage_errors_keep_clicks_usage_and_the_one_prefix(
    repo: Path, args: list[str], usage: str
) -> None:
    result = run(args)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Usage: ") and lines[0].endswith(usage)
    assert lines[-1].startswith("error: ")
    assert "Error" not in result.stderr


def test_the_installed_command_says_error_too(repo: Path) -> None:
    teamctl = Path(sys.executable).parent / "teamctl"
    bad = subprocess.run([teamctl, "task", "claim", "task_1", "--as", "-rf"], **TEXT)
    assert (bad.returncode, bad.stdout) == (1, "")
    assert bad.stderr.startswith("error: invalid member name '-rf': ")
    usage = subprocess.run([teamctl, "--bogus"], **TEXT)
    assert usage.returncode == 2
    assert usage.stderr.splitlines()[0] == "Usage: teamctl [OPTIONS] COMMAND [ARGS]..."
    assert usage.stderr.splitlines()[-1] == "error: No such option '--bogus'."


def test_every_error_line_starts_with_the_one_prefix(repo: Path) -> None:
    ok(["task", "add", "one"])
    ok(["task", "claim", "task_1", "--as", "ann"])
    assert fails(["task", "claim", "task_1", "--as", "bob"]) == (
        "error: bob cannot claim task_1: already claimed by ann"
    )
    assert fails(["task", "show", "task_9"]) == "error: unknown task 'task_9'"
