"""What a finished scenario run left behind, gathered once for the checks: the journal, the board
folded from it, every delivered message (acked or not), the agents' transcripts, and the
"nothing lost" findings (docs/RELIABILITY.md, "How the evidence is produced"). Everything is read
through the team's ports (docs/ARCHITECTURE.md, "Backends and seams"), so the checks work on
either backend."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.board.state import TeamState
from actors.scenarios.model import EventMatch
from mailboxes.events import Event
from mailboxes.messages import Envelope

if TYPE_CHECKING:
    from actors.factory import Team
    from mailboxes.ports import MailArchive

__all__ = ["Facts", "gather"]


class Facts:
    """What the checks read, gathered once after the run."""

    def __init__(
        self,
        root: Path,
        events: Sequence[Event],
        state: TeamState,
        messages: Sequence[Envelope],
        transcripts: dict[str, list[Any]],
        lost: Sequence[str],
    ) -> None:
        self.root = root
        self.events = list(events)
        self.state = state
        self.messages = list(messages)
        self.transcripts = transcripts
        """Agent name → its message list (``harness.ports.Message``)."""
        self.lost = list(lost)
        """Violations of the nothing-lost oracle."""

    def task_id(self, name: str) -> str | None:
        """A task id from an id or an exact subject (None: unknown or ambiguous)."""
        if name in self.state.tasks:
            return name
        found = [t.id for t in self.state.tasks.values() if t.subject == name]
        return found[0] if len(found) == 1 else None

    def read_file(self, path: str, branch: str | None = None) -> str | None:
        """The text of ``path`` in the working tree, or on ``branch`` (None: there is no such
        file)."""
        if branch is None:
            file = self.root / path
            return file.read_text(encoding="utf-8", errors="replace") if file.is_file() else None
        shown = subprocess.run(
            ["git", "show", f"{branch}:{path}"],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return shown.stdout if shown.returncode == 0 else None

    def select(self, match: EventMatch) -> list[Event] | str:
        """Events matching ``match``, or a reason it cannot be resolved."""
        tid = None
        if match.task is not None:
            tid = self.task_id(match.task)
            if tid is None:
                return f"no single task named {match.task!r}"
        return [
            e
            for e in self.events
            if e.type == match.type
            and (match.actor is None or e.actor == match.actor)
            and (tid is None or e.data.get("task_id") == tid)
            and all(e.data.get(k) == v for k, v in match.data.items())
        ]


def _read_inboxes(agents: Sequence[str], mailbox: MailArchive) -> list[Envelope]:
    """Every message still stored for ``agents`` (acked or not; a copy stored twice twice)."""
    found: list[Envelope] = []
    for agent in agents:
        found += mailbox.history(agent)
    return found


def _lost(root: Path, team: Team, messages: Sequence[Envelope]) -> list[str]:
    """Nothing lost after the run: journal sound, no projection drift, each message id in one
    place, at most one live task per owner, no process left in the repository."""
    from mailboxes.journal.frame import check_journal

    problems: list[str] = []
    if team.journal_path is not None:  # JetStream stores whole commits: nothing to check
        report = check_journal(team.journal_path)
        if not report.ok:
            problems.append(f"journal {report.path} line {report.problem_line}: {report.problem}")
    problems += [f"projection drift: {d}" for d in team.verify_projections()]
    seen: set[tuple[str, str]] = set()
    for env in messages:
        key = (env.to, env.id)
        if key in seen:
            problems.append(f"message {env.id} to {env.to} stored twice")
        seen.add(key)
    holders = [t.owner for t in team.state().tasks.values() if t.status == "in_progress"]
    if len(holders) != len(set(holders)):
        problems.append(f"an owner holds several tasks: {holders}")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == str(root) or cwd.startswith(str(root) + os.sep):
            problems.append(f"process {pid} still runs in the repository")
    return problems


def gather(root: Path) -> Facts:
    """Read the journal, board, mailboxes and transcripts of a stopped team."""
    from actors.factory import open_team
    from harness.transcript import fold_transcript

    # Read-only: opening for writing would repair what the oracle must see (drifted projections
    # rewritten, a torn journal tail cut) and refuse a journal damaged mid-file.
    with open_team(root, read_only=True) as team:
        events = list(team.journal.read_from(1))
        state = team.state()
        agents = team.mailbox.agents()
        messages = _read_inboxes(agents, team.mailbox)
        lost = _lost(root, team, messages)
        transcripts: dict[str, list[Any]] = {}
        for agent in team.transcripts.agents():
            raw = team.transcripts.transcript(agent)
            if raw is not None:
                text = raw.decode("utf-8", errors="replace")
                transcripts[agent] = list(fold_transcript(text, f"transcript of {agent}").messages)
    return Facts(root, events, state, messages, transcripts, lost)
