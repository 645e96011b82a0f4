"""What a finished scenario run left behind, gathered once for the checks: the journal, the board
folded from it, every delivered message (``new`` and ``cur``), the agents' transcripts, and the
"nothing lost" findings (docs/RELIABILITY.md, "How the evidence is produced")."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from actors.board.state import TeamState
from actors.scenarios.model import EventMatch
from mailboxes.events import Event
from mailboxes.messages import Envelope

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


def _read_inboxes(root: Path, agents: Sequence[str], mailbox: Any) -> list[Envelope]:
    from mailboxes.messages import parse_envelope

    found: list[Envelope] = []
    for agent in agents:
        box = Path(mailbox.inbox(agent))
        for sub in ("new", "cur"):
            folder = box / sub
            if folder.is_dir():
                found += [parse_envelope(p.read_bytes()) for p in sorted(folder.iterdir())]
    return found


def _lost(root: Path, team: Any, messages: Sequence[Envelope]) -> list[str]:
    """Nothing lost after the run: journal sound, no projection drift, each message id in one
    place, at most one live task per owner, no process left in the repository."""
    from mailboxes.journal.frame import check_journal

    problems: list[str] = []
    report = check_journal(root / ".team" / "journal.jsonl")
    if not report.ok:
        problems.append(f"journal: {report}")
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
    from harness.transcript import load_transcript

    with open_team(root) as team:
        events = list(team.journal.read_from(1))
        state = team.state()
        agents = team.mailbox.agents()
        messages = _read_inboxes(root, agents, team.mailbox)
        lost = _lost(root, team, messages)
    transcripts: dict[str, list[Any]] = {}
    folder = root / ".team" / "transcripts"
    if folder.is_dir():
        for path in sorted(folder.glob("*.jsonl")):
            transcripts[path.stem] = list(load_transcript(path).messages)
    return Facts(root, events, state, messages, transcripts, lost)
