"""teamctl send / inbox in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.actors.cli.cli_support import fails, git_repo, ok, ok_json, run


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return git_repo(tmp_path, monkeypatch)


def test_send_and_read_in_order_then_ack(repo: Path) -> None:
    first = ok_json(["send", "lead", "one"])
    ok(["send", "lead", "two", "--as", "ann"])
    messages = ok_json(["inbox", "lead"])
    assert [m["body"]["text"] for m in messages] == ["one", "two"]
    assert [m["from"] for m in messages] == ["user", "ann"]
    assert messages[0]["id"] == first[0]["id"]
    table = ok(["inbox", "lead"]).stdout
    assert "one" in table and "ann" in table
    assert len(ok_json(["inbox", "lead"])) == 2  # reading does not consume
    assert "acknowledged 2" in ok(["inbox", "lead", "--ack"]).stdout
    assert ok_json(["inbox", "lead"]) == []
    assert "no unread messages" in ok(["inbox", "lead"]).stdout
    assert len(list((repo / ".team" / "mailboxes" / "lead" / "cur").iterdir())) == 2


def test_message_to_an_unknown_agent_is_refused(repo: Path) -> None:
    line = fails(["send", "nobody", "hi"])
    assert "unknown recipient 'nobody'" in line and "lead" in line
    assert not (repo / ".team" / "mailboxes" / "nobody").exists()
    assert "unknown recipient" in fails(["inbox", "nobody"])


def test_broadcast_reaches_everyone_but_the_sender(repo: Path) -> None:
    ok(["task", "add", "a"])
    ok(["task", "claim", "task_1", "--as", "ann"])  # a human member gets an inbox
    sent = ok_json(["send", "*", "standup", "--as", "ann"])
    assert [m["to"] for m in sent] == ["lead"]
    assert ok_json(["inbox", "lead"])[0]["type"] == "broadcast"
    assert ok_json(["inbox", "ann"]) == []


def test_a_garbage_message_file_is_moved_aside_with_a_warning(repo: Path) -> None:
    ok(["send", "lead", "fine"])
    new = repo / ".team" / "mailboxes" / "lead" / "new"
    (new / "00000000000000000001.0000000001.garbage").write_bytes(b"not json")
    result = run(["inbox", "lead", "--json"])
    assert result.exit_code == 0
    assert "warning:" in result.stderr and "bad" in result.stderr
    assert [m["body"]["text"] for m in json.loads(result.stdout)] == ["fine"]
    assert len(list((new.parent / "bad").iterdir())) == 1


def test_invalid_names_are_one_line_errors(repo: Path) -> None:
    assert "invalid MessageDraft: to:" in fails(["send", "../x", "hi"])
    assert "invalid agent name" in fails(["inbox", "../x"])
    assert "invalid agent name" in fails(["send", "lead", "hi", "--as", "a/b"])
    assert ok_json(["inbox", "lead"]) == []
