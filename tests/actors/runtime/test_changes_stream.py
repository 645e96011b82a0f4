"""The runtime's journal follower (``actors/runtime/changes.py`` ``Changes``) sends every journal
event out once as a ``team_event``, also when its read of the journal runs past the state it
refreshed (another process appended in between)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.board.state import TeamState
from actors.factory import Team, open_team
from actors.runtime.changes import Changes
from tests.actors.cli.cli_support import git_repo, ok


class _Sink:
    wanted = True

    def __init__(self) -> None:
        self.seqs: list[int] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.seqs.append(int(event["seq"]))


class _Members:
    def member_done(self, name: str, why: str) -> None:
        pass

    def board_changed(self) -> None:
        pass

    def hosts(self, name: str) -> bool:
        return False


class _Decisions:
    def scan(self) -> None:
        pass


def test_events_read_past_a_stale_refresh_go_out_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch)
    team: Team = open_team()
    try:
        start = team.state().seq
        ok(["task", "add", "one"])
        stale: TeamState = team.board.refresh()  # the state as of "one"
        ok(["task", "add", "two"])
        ok(["task", "add", "three"])
        sink = _Sink()
        changes = Changes(
            team,
            _Members(),  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            events=sink,  # type: ignore[arg-type]
            decisions=_Decisions(),  # type: ignore[arg-type]
            rescan_s=60.0,
        )
        changes._seen_seq = changes._emitted_seq = start
        real_refresh = team.board.refresh
        # The first look refreshes to "one" while the journal already holds "two" and "three".
        monkeypatch.setattr(team.board, "refresh", lambda: stale)
        changes._on_journal()
        monkeypatch.setattr(team.board, "refresh", real_refresh)
        changes._on_journal()
        changes._emit_unseen()
        last = team.journal.last_seq()
        assert sink.seqs == list(range(start + 1, last + 1))
    finally:
        team.close()
