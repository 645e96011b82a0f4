"""Build the durable objects of a team (journal, board, mailboxes) for a repository.

The CLI and the runtime go through here so that the wiring lives in one place. Nothing heavy is
imported: no model SDK, pykka, GitPython or watchfiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from actors.board.board import Board
from actors.board.fold import fold_all
from actors.board.projections import Projections
from actors.board.state import EMPTY, TeamState
from actors.repo import Repo, find_repo, find_team
from mailboxes.events import EventDraft, MemberSpawned, TeamCreated, draft
from mailboxes.fsutil import Fsync, atomic_write, fsync_dir
from mailboxes.journal.frame import JournalReport, check_journal
from mailboxes.journal.store import JOURNAL_NAME, FileJournal
from mailboxes.liveness import FlockLiveness
from mailboxes.maildir import Maildir
from mailboxes.messages import check_agent_name

TEAM_FOLDERS = ("mailboxes", "members", "transcripts", "jobs", "outputs")
"""Folders ``teamctl init`` creates inside ``.team/``."""
EXCLUDES = (".team/", ".tasks/", ".worktrees/")
"""Lines ``teamctl init`` adds to ``.git/info/exclude`` (never to the user's ``.gitignore``)."""
LEAD = "lead"


class Team:
    """An open team: close it when done (``with open_team() as team``).

    The board (which folds the whole journal and repairs drifted projections, with a warning
    each) is built on first use, so journal-only commands stay cheap and read-only.
    """

    def __init__(
        self, repo: Repo, journal: FileJournal, *, actor: str = "cli", fsync: Fsync | None = None
    ) -> None:
        self.repo = repo
        self.journal = journal
        box = repo.team_dir / "mailboxes"
        self.mailbox = Maildir(box) if fsync is None else Maildir(box, fsync=fsync)
        self.liveness = FlockLiveness(repo.team_dir / "members")
        self.actor = actor
        self._board: Board | None = None

    @property
    def board(self) -> Board:
        """The task board, caught up with the journal."""
        if self._board is None:
            self._board = Board(
                self.journal,
                projections=Projections(self.repo.root),
                liveness=self.liveness,
                actor=self.actor,
            )
        return self._board

    def state(self) -> TeamState:
        """The team state folded up to the journal's current end."""
        return self.board.refresh()

    def ensure_human(self, name: str) -> None:
        """Make ``name`` a human member (journals ``member.spawned`` kind=human once, decided
        under the journal lock) and give it an inbox."""
        self.mailbox.ensure_inbox(name)

        def decision(state: TeamState) -> list[EventDraft]:
            if name in state.members:
                return []
            body = MemberSpawned(name=name, role="human", kind="human")
            return [draft(body.TYPE, name, body)]

        self.board.execute(decision)

    def inbox_counts(self) -> dict[str, int]:
        """Unread messages per agent."""
        return {agent: self.mailbox.counts(agent)[0] for agent in self.mailbox.agents()}

    def verify_projections(self) -> list[str]:
        """Fold the whole journal afresh (no board, so nothing is repaired first) and list every
        difference between the projections it renders and the files on disk (empty = none)."""
        from actors.board.projections import verify

        fresh = fold_all(EMPTY, self.journal.read_from(1))
        return [str(drift) for drift in verify(fresh, self.repo.root)]

    def close(self) -> None:
        self.journal.close()

    def __enter__(self) -> Team:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_team(start: Path | None = None, *, actor: str = "cli", fsync: Fsync | None = None) -> Team:
    """The team of the repository around ``start`` (default: the current folder); the board
    records its events as caused by ``actor`` (a valid agent name: ``InvalidAgentName``).
    ``fsync`` replaces how the journal and the Maildir make writes durable (a test seam)."""
    check_agent_name(actor)
    return _build(find_team(start), actor, fsync)


def _build(repo: Repo, actor: str = "cli", fsync: Fsync | None = None) -> Team:
    team_dir = repo.team_dir
    journal = FileJournal(team_dir) if fsync is None else FileJournal(team_dir, fsync=fsync)
    try:
        return Team(repo, journal, actor=actor, fsync=fsync)
    except BaseException:
        journal.close()
        raise


def check_team_journal(start: Path | None = None) -> JournalReport:
    """Read-only health report of the team's journal (never repairs anything)."""
    repo = find_team(start)
    return check_journal(repo.team_dir / JOURNAL_NAME)


@dataclass(frozen=True)
class InitReport:
    """What ``init_team`` did."""

    repo: Repo
    name: str
    created: tuple[str, ...] = field(default=())
    """Human-readable list of what was created or added (empty: it was all there)."""


def _add_excludes(repo: Repo) -> list[str]:
    path = repo.exclude_path
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [entry for entry in EXCLUDES if entry not in present]
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        prefix = "" if not text or text.endswith("\n") else "\n"
        body = text + prefix + "# teamctl\n" + "".join(f"{entry}\n" for entry in missing)
        atomic_write(path, body.encode("utf-8"))
    return [f"{entry} in {path}" for entry in missing]


def init_team(start: Path | None = None, *, name: str | None = None) -> InitReport:
    """Create ``.team/`` and friends; idempotent (a second run changes nothing). An existing
    settings file is kept but validated."""
    from actors.settings import default_settings_json, load_settings

    repo = find_repo(start)
    created: list[str] = []
    for folder in (repo.team_dir, *(repo.team_dir / f for f in TEAM_FOLDERS), repo.tasks_dir):
        if not folder.is_dir():
            folder.mkdir(parents=True)
            created.append(str(folder.relative_to(repo.root)) + "/")
            # The new entry must survive a power cut like the journal inside it will.
            fsync_dir(folder.parent)
    if repo.settings_path.exists():
        load_settings(repo.settings_path, environ={})
    else:
        atomic_write(repo.settings_path, default_settings_json().encode("utf-8"))
        created.append(str(repo.settings_path.relative_to(repo.root)))
    created += _add_excludes(repo)
    team = _build(repo)
    try:
        wanted = name or repo.root.name

        def decision(state: TeamState) -> list[EventDraft]:
            if state.name is not None:
                return []
            body = TeamCreated(name=wanted)
            return [draft(body.TYPE, "cli", body, op_id="team.created")]

        state, events = team.board.execute(decision)
        if events:
            created.append("journal with team.created")
        if LEAD not in team.mailbox.agents():
            team.mailbox.ensure_inbox(LEAD)
            created.append(f"inbox for {LEAD}")
    finally:
        team.close()
    return InitReport(repo=repo, name=state.name or wanted, created=tuple(created))
