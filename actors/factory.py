"""Build the durable objects of a team (journal, board, mailboxes) for a repository.

The CLI and the runtime go through here so that the wiring lives in one place. Nothing heavy is
imported: no model SDK, pykka, GitPython or watchfiles.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from actors.board.board import Board, acting_as
from actors.board.fold import fold_all
from actors.board.projections import Projections
from actors.board.state import EMPTY, TeamState
from actors.errors import TeamError
from actors.repo import JournalMissing, Repo, find_repo, find_team
from mailboxes.errors import JournalCorrupt
from mailboxes.events import EventDraft, MemberSpawned, TeamCreated, draft
from mailboxes.fsutil import Fsync, atomic_write, fsync_dir
from mailboxes.journal.frame import JournalReport, check_journal
from mailboxes.journal.store import JOURNAL_NAME, FileJournal
from mailboxes.liveness import FlockLiveness
from mailboxes.maildir import Maildir
from mailboxes.messages import check_agent_name

if TYPE_CHECKING:
    from actors.settings import NatsBackend, Settings
    from mailboxes.journal.salvage import SalvageReport
    from mailboxes.ports import EventStore, Liveness, OnHints, Watcher

log = logging.getLogger(__name__)

TEAM_FOLDERS = ("mailboxes", "members", "transcripts", "jobs", "outputs")
"""Folders ``teamctl init`` creates inside ``.team/``."""
EXCLUDES = (".team/", ".tasks/", ".worktrees/")
"""Lines ``teamctl init`` adds to ``.git/info/exclude`` (never to the user's ``.gitignore``)."""
LEAD = "lead"
RUNTIME_LOCK = "runtime.lock"
"""``.team/runtime.lock``: held (flock) by the process running the team."""


MIXED_NOTICE = (
    "backend {url}: journal and liveness on JetStream; mailboxes and wake-ups stay files under "
    ".team/ (journal changes are seen at the rescan tick)"
)
"""The one-line notice a team on the JetStream backend logs when opened."""


@dataclass
class Stores:
    """A team's journal and liveness on the chosen backend (``open_stores``)."""

    journal: EventStore
    liveness: Liveness
    backend: NatsBackend | None = None
    """None: the file backend."""

    def close(self) -> None:
        try:
            self.journal.close()
        finally:
            close = getattr(self.liveness, "close", None)  # NatsLiveness: stop its refreshes
            if close is not None:
                close()


def open_stores(
    repo: Repo,
    *,
    fsync: Fsync | None = None,
    read_only: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Stores:
    """The journal and liveness of the team in ``repo`` on the backend of its settings
    (``actors.settings.team_backend``: ``$TEAMCTL_BACKEND``, else the top-level ``backend`` of
    ``.team/settings.json``; docs/ARCHITECTURE.md, "Backends and seams"). ``"file"``: a
    ``FileJournal`` in ``.team/`` (``fsync``, ``read_only`` as ``open_team`` says) and
    ``FlockLiveness`` in ``.team/members/``. ``nats://…/TEAM``: ``NatsEventStore`` and
    ``NatsLiveness`` of team TEAM (a notice says the mailboxes stay files). A bad value is a
    ``SettingsError`` naming the setting and its file."""
    from actors.settings import team_backend

    backend = team_backend(repo.settings_path, environ)
    if backend is None:
        journal: EventStore
        if read_only:
            journal = FileJournal(repo.team_dir, read_only=True)
        else:
            journal = (
                FileJournal(repo.team_dir)
                if fsync is None
                else FileJournal(repo.team_dir, fsync=fsync)
            )
        return Stores(journal, FlockLiveness(repo.team_dir / "members"))
    from mailboxes.journal.nats import NatsEventStore
    from mailboxes.nats_liveness import NatsLiveness

    url = f"nats://{','.join(s.removeprefix('nats://') for s in backend.servers)}/{backend.team}"
    log.warning(MIXED_NOTICE.format(url=url))
    journal = NatsEventStore(backend.servers, backend.team)
    try:
        liveness = NatsLiveness(backend.servers, backend.team)
    except BaseException:
        journal.close()
        raise
    return Stores(journal, liveness, backend)


class Team:
    """An open team: close it when done (``with open_team() as team``).

    The board (which folds the whole journal and repairs drifted projections, with a warning
    each) is built on first use, so journal-only commands stay cheap and read-only. A team opened
    ``read_only`` (its journal too) never writes: its board repairs nothing and refuses commands.
    """

    def __init__(
        self,
        repo: Repo,
        stores: Stores,
        *,
        actor: str = "cli",
        fsync: Fsync | None = None,
        read_only: bool = False,
    ) -> None:
        self.repo = repo
        self.stores = stores
        self.journal = stores.journal
        self.read_only = read_only
        box = repo.team_dir / "mailboxes"
        self.mailbox = Maildir(box) if fsync is None else Maildir(box, fsync=fsync)
        self.liveness = stores.liveness
        self.actor = actor
        self._board: Board | None = None

    @property
    def board(self) -> Board:
        """The task board, caught up with the journal."""
        if self._board is None:
            self._board = Board(
                self.journal,
                projections=None if self.read_only else Projections(self.repo.root),
                liveness=self.liveness,
                actor=self.actor,
            )
        return self._board

    @property
    def damage(self) -> JournalCorrupt | None:
        """Read-only: the bad line the journal's events stop before (None: the file is sound)."""
        return self.journal.damage if isinstance(self.journal, FileJournal) else None

    @property
    def journal_path(self) -> Path | None:
        """The journal file (None: the journal is not a file, as on the JetStream backend)."""
        return self.journal.path if isinstance(self.journal, FileJournal) else None

    def state(self) -> TeamState:
        """The team state folded up to the journal's current end."""
        return self.board.refresh()

    def ensure_human(self, name: str) -> None:
        """Make ``name`` a human member (journals ``member.spawned`` kind=human once, decided
        under the journal lock by ``Board.add_member``, which enforces the name rules) and give
        it an inbox."""
        with acting_as(name):
            self.board.add_member(MemberSpawned(name=name, role="human", kind="human"))
        self.mailbox.ensure_inbox(name)

    def inbox_counts(self) -> dict[str, int]:
        """Unread messages per agent."""
        return {agent: self.mailbox.unread(agent) for agent in self.mailbox.agents()}

    def watch(self, on_hints: OnHints, rescan_s: float = 2.0, *, inboxes: bool = True) -> Watcher:
        """A (not yet started) ``Watcher`` of this team's journal and, with ``inboxes``, its
        inboxes: ``on_hints`` gets ``JournalAdvanced``, ``InboxChanged(agent)`` and a ``Tick``
        at least every ``rescan_s`` (docs/ARCHITECTURE.md, "Backends and seams")."""
        from mailboxes.watch import HintWatcher  # watchfiles: not for every command

        return HintWatcher(
            on_hints,
            journal=self.journal_path,
            mailboxes=self.mailbox.root if inboxes else None,
            rescan_s=rescan_s,
        )

    def verify_projections(self) -> list[str]:
        """Fold the whole journal afresh (no board, so nothing is repaired first) and list every
        difference between the projections it renders and the files on disk (empty = none)."""
        from actors.board.projections import verify

        fresh = fold_all(EMPTY, self.journal.read_from(1))
        return [str(drift) for drift in verify(fresh, self.repo.root)]

    def close(self) -> None:
        self.stores.close()

    def __enter__(self) -> Team:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_team(
    start: Path | None = None,
    *,
    actor: str = "cli",
    fsync: Fsync | None = None,
    read_only: bool = False,
) -> Team:
    """The team of the repository around ``start`` (default: the current folder); the board
    records its events as caused by ``actor`` (a valid agent name: ``InvalidAgentName``).
    ``fsync`` replaces how the journal and the Maildir make writes durable (a test seam).

    ``.team/`` without a journal is ``JournalMissing`` and a journal without events a
    ``TeamError``: only ``init_team`` starts a team. ``read_only`` writes nothing at all (a full
    disk does not matter) and opens a journal damaged mid-file up to its first bad line
    (``Team.damage``); otherwise such a journal is ``JournalCorrupt``."""
    check_agent_name(actor)
    return _build(find_team(start), actor, fsync, read_only=read_only)


def open_team_to_read(start: Path | None = None, *, actor: str = "cli") -> Team:
    """The team for a command that only shows things: opened as usual (a torn last line and
    drifted projections are repaired on the way; a projection that cannot be written is a
    warning), or, when that cannot be done, read-only: a journal damaged mid-file shows the
    events before its first bad line (``Team.damage``), and a repair that fails (disk full, a
    read-only file system) is a warning. ``JournalMissing`` and an empty journal still raise."""
    try:
        team = open_team(start, actor=actor)
    except JournalCorrupt:
        return open_team(start, actor=actor, read_only=True)
    except OSError as exc:
        log.warning("%s; showing the team without repairing anything", exc)
        return open_team(start, actor=actor, read_only=True)
    try:
        team.board  # noqa: B018 - builds the board: folds, repairs projections
    except BaseException:
        team.close()
        raise
    return team


def _build(
    repo: Repo,
    actor: str = "cli",
    fsync: Fsync | None = None,
    *,
    create: bool = False,
    read_only: bool = False,
) -> Team:
    from actors.settings import team_backend

    path = repo.team_dir / JOURNAL_NAME
    if team_backend(repo.settings_path) is None and not create and not path.exists():
        raise JournalMissing(path)  # before FileJournal, which would create the file
    stores = open_stores(repo, fsync=fsync, read_only=read_only)
    try:
        journal = stores.journal
        if isinstance(journal, FileJournal):
            if not create and journal.last_seq() == 0 and journal.damage is None:
                raise TeamError(f"the team journal {path} is empty: run `teamctl init`")
        elif not create and journal.last_seq() == 0:
            raise TeamError(
                f"the team's JetStream journal is empty: run `teamctl init` in {repo.root}"
            )
        return Team(repo, stores, actor=actor, fsync=fsync, read_only=read_only)
    except BaseException:
        stores.close()
        raise


def _file_only(repo: Repo, what: str) -> None:
    """Refuse ``what`` (a command on the journal file) when the team's journal is not a file."""
    from actors.settings import team_backend

    if team_backend(repo.settings_path) is not None:
        raise TeamError(
            f"{what} works on the file journal only; this team's journal is on JetStream"
        )


def check_team_journal(start: Path | None = None) -> JournalReport:
    """Read-only health report of the team's journal (never repairs anything)."""
    repo = find_team(start)
    _file_only(repo, "checking the journal")
    path = repo.team_dir / JOURNAL_NAME
    if not path.exists():
        raise JournalMissing(path)
    return check_journal(path)


@contextmanager
def _quiet_team(repo: Repo) -> Iterator[None]:
    """Hold ``.team/runtime.lock`` so no runtime starts meanwhile; ``TeamError`` if a runtime,
    or a process hosting a member (``teamctl join``), is running this team now."""
    fd = os.open(repo.team_dir / RUNTIME_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise TeamError(
                f"a teamctl runtime (pid {holder}) is running this team: stop it first"
            ) from None
        hosted = FlockLiveness(repo.team_dir / "members").alive()
        if hosted:
            raise TeamError(
                f"members are hosted by live processes ({', '.join(hosted)}): stop them first"
            )
        yield
    finally:
        os.close(fd)  # releases the flock


def salvage_team(start: Path | None = None) -> SalvageReport:
    """``teamctl journal salvage``: keep the events before the journal's first bad line, the
    original as a backup beside it (``mailboxes.journal.salvage``), then rebuild the projections
    from what was kept. Refused while a runtime or a hosted member runs the team."""
    from mailboxes.journal.salvage import salvage_journal

    repo = find_team(start)
    _file_only(repo, "`teamctl journal salvage`")
    path = repo.team_dir / JOURNAL_NAME
    if not path.exists():
        raise JournalMissing(path)
    with _quiet_team(repo):
        report = salvage_journal(repo.team_dir)
        if report.backup is not None:
            with _build(repo) as team:
                team.board.repair_projections()
    return report


def tidy_mailboxes(team: Team, settings: Settings) -> tuple[int, int]:
    """At runtime start: remove ``tmp/`` files of senders that died mid-delivery and prune acked
    messages older than ``mailbox.cur_retention_days`` from every ``cur/``. Returns (removed,
    pruned). Housekeeping only: a failure is logged, never raised."""
    removed = pruned = 0
    max_age_s = settings.mailbox.cur_retention_days * 86_400
    try:
        removed = team.mailbox.recover()
        for agent in team.mailbox.agents():
            pruned += team.mailbox.prune(agent, max_age_s=max_age_s)
    except OSError as exc:
        log.warning("mailbox housekeeping failed: %s", exc)
    if removed or pruned:
        log.info(
            "mailboxes: removed %d orphaned tmp/ files, pruned %d acked messages", removed, pruned
        )
    return removed, pruned


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


def exclude_team_files(root: Path) -> Path:
    """Add the lines of ``EXCLUDES`` to ``.git/info/exclude`` when ``root`` is in a repository
    (``teamctl ask`` writes its transcript under ``.team/`` even without ``init``, and git
    must not pick it up); returns ``root``. Outside a repository, or when the file cannot be
    written (logged), nothing happens."""
    from mailboxes.errors import MailboxesError

    try:
        _add_excludes(find_repo(root))
    except (TeamError, MailboxesError):
        pass
    except OSError as exc:
        log.warning("could not add .team/ to .git/info/exclude: %s", exc)
    return root


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
    journal = repo.team_dir / JOURNAL_NAME
    new_journal = not journal.exists()
    team = _build(repo, create=True)
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
    except BaseException:
        # A journal this call created but could not write (disk full) is not left at 0 bytes.
        if new_journal and journal.exists() and journal.stat().st_size == 0:
            journal.unlink()
        raise
    finally:
        team.close()
    return InitReport(repo=repo, name=state.name or wanted, created=tuple(created))
