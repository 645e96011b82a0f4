"""The live view as an append-only log (``change_lines``), and agent text on a real terminal
console (``render`` through ``SafeTable``): escaped, never markup."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from actors.live.changes import ChangeLog, change_lines
from actors.live.load import LiveSource
from actors.live.render import render
from mailboxes.messages import MessageDraft
from tests.actors.live.live_support import new_team, populate, spawn

HOSTILE = "x \x1b[2J\x1b]0;PWNED\x07 [red]red[/red] [link=https://evil.example]click[/link]\r\x9b"
_SGR = re.compile(rb"\x1b\[[0-9;]*m")


def test_first_snapshot_is_told_as_a_list_then_only_changes(tmp_path: Path) -> None:
    with new_team(tmp_path) as team:
        populate(team)
        source = LiveSource(team)
        first = source.load()
        lines = change_lines(None, first)
        assert re.fullmatch(r"\d\d:\d\d:\d\d team demo at journal seq \d+: tasks .*", lines[0])
        text = "\n".join(lines)
        for part in (
            "member alice working (no process) on task_2 in wt-api (joined as worker)",
            "task_5 [ready]: release notes",
            "task_3 [in progress] (carol, human): docs",
            "waiting for an answer: permission perm-1 from bob about bash",
            "job job_run of alice running: pytest -q",
            "worktree wt-api on wt/wt-api for task_2",
        ):
            assert part in text, text
        assert change_lines(first, source.load()) == []  # nothing changed, nothing said

        team.board.claim("task_5", "erin", human=True).unwrap()
        team.board.create("a new one")
        team.mailbox.deliver("cli", MessageDraft.text("alice", "hi"))
        spawn(team, "frank", "idle")
        after = [line[9:] for line in change_lines(first, source.load())]
        assert after == [
            "member erin active (human) on task_5 (joined as human)",
            "member frank idle (no process) (joined as worker)",
            "task_5 ready -> in progress (erin, human): release notes",
            "task_6 added [ready]: a new one",
            "inbox alice: 2 unread",
        ]


def test_change_log_writes_each_line_once_and_escapes_agent_text(tmp_path: Path) -> None:
    written: list[str] = []
    log = ChangeLog(written.append)
    with new_team(tmp_path) as team:
        source = LiveSource(team)
        log(source.load())
        team.board.create(HOSTILE + "y" * 400)
        log(source.load())
        log(source.load())
    added = [line for line in written if "task_1 added" in line]
    assert len(added) == 1
    assert "\x1b" not in added[0] and "\r" not in added[0] and "\x07" not in added[0]
    assert "\\x1b[2J" in added[0] and added[0].endswith("…") and len(added[0]) < 130


def test_render_on_a_terminal_escapes_agent_text_and_ignores_markup(tmp_path: Path) -> None:
    with new_team(tmp_path) as team:
        populate(team)
        team.board.create(HOSTILE)
        spawn(team, "zed", "idle", role=HOSTILE)
        snap = LiveSource(team).load()
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="truecolor", width=400).print(render(snap))
    raw = out.getvalue().encode()
    # The view's own colours are SGR sequences; nothing else reaches the terminal.
    rest = _SGR.sub(b"", raw)
    assert b"\x1b" not in rest and b"\x07" not in rest and b"\r" not in rest
    assert "\x9b" not in out.getvalue()
    plain = _SGR.sub(b"", raw).decode()
    assert "[red]red[/red] [link=https://evil" in plain
    assert "\\x1b[2J\\x1b]0;PWNED\\x07" in plain
