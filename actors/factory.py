"""Build the durable objects of a team (journal, board, mailboxes) for a repository.

The CLI and the runtime go through here so that the wiring lives in one place. Nothing heavy is
imported: no model SDK, pykka, GitPython or watchfiles.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from actors.backend import on_files
from actors.board.board import Board, acting_as
from actors.board.fold import fold_all
from actors.board.projections import Projections
from actors.board.snapshot import REMOTE_SNAPSHOT_EVERY, SNAPSHOT_EVERY
from actors.board.state import EMPTY, TeamState
from actors.errors import TeamError
from actors.repo import JournalMissing, Repo, find_repo, find_team
from mailboxes.blobs import FileBlobs
from mailboxes.errors import JournalCorrupt, MailboxesError
from mailboxes.events import Event, EventDraft, draft
from mailboxes.fsutil import Fsync, atomic_write, fsync_dir
from mailboxes.journal.frame import JournalReport, check_journal
from mailboxes.journal.store import JOURNAL_NAME, FileJournal
from mailboxes.liveness import FlockLiveness
from mailboxes.maildir import Maildir
from mailboxes.names import check_agent_name

if TYPE_CHECKING:
    from actors.settings import NatsBackend, Settings
    from mailboxes.journal.salvage import SalvageReport
    from mailboxes.nats_mailbox import NatsMailbox
    from mailboxes.ports import (
        BlobStore,
        EventStore,
        Liveness,
        OnHints,
        TranscriptStore,
        Watcher,
    )

    TeamMailbox = Maildir | NatsMailbox
    """The mailbox of a ``Team``: the ``Mailbox`` protocol plus housekeeping (``counts``,
    ``prune``, ``recover``) that both backends have."""

log = logging.getLogger(__name__)

TEAM_FOLDERS = ("mailboxes", "members", "transcripts", "jobs", "outputs")
"""Folders ``teamctl init`` creates inside ``.team/``."""
EXCLUDES = (".team/", ".tasks/", ".worktrees/")
"""Lines ``teamctl init`` adds to ``.git/info/exclude`` (never to the user's ``.gitignore``)."""
LEAD = "lead"
SNAPSHOTS = "snapshots"
"""``.team/snapshots/``: state snapshots (``actors.board.snapshot``), a cache of the fold."""
RUNTIME_LOCK = "runtime.lock"
"""``.team/runtime.lock``: held (flock) by the process running the team."""


MIXED_NOTICE = (
    "backend {url}: journal, mailboxes, liveness, wake-ups and state snapshots on JetStream; "
    "transcripts are files of the hosting checkout, copied to JetStream; job output stays "
    "files under .team/ of the host that ran the job"
)
"""The one-line notice (info) a team on the JetStream backend logs when opened."""

WatcherFactory = Callable[["OnHints", float, bool], "Watcher"]
"""``(on_hints, rescan_s, inboxes)``: a new, not started ``Watcher`` of a team's journal and,
with ``inboxes``, its mailboxes."""


@dataclass
class Stores:
    """A team's journal, liveness, mailboxes, wake-ups, blobs and transcripts on the chosen
    backend (``open_stores``; the ports: docs/ARCHITECTURE.md, "Backends and seams")."""

    journal: EventStore
    liveness: Liveness
    backend: NatsBackend | None = None
    """None: the file backend."""
    mailbox: TeamMailbox | None = None
    """None: ``Team`` opens the file backend's Maildir in ``.team/mailboxes``."""
    watcher: WatcherFactory | None = None
    """None: ``Team.watch`` watches the journal file and the Maildir (``HintWatcher``)."""
    blobs: BlobStore | None = None
    """State snapshots (``actors/board/snapshot.py``); None: ``FileBlobs`` in
    ``.team/snapshots``."""
    transcripts: TranscriptStore | None = None
    """Agents' transcripts and job output, to read; None: ``FileTranscripts`` under ``.team/``."""

    def close(self) -> None:
        # NatsLiveness stops refreshing, NatsMailbox gives held messages back, the other
        # JetStream stores close their connections; the file ones hold nothing.
        stores = (self.journal, self.liveness, self.mailbox, self.blobs, self.transcripts)
        closers = [store.close for store in stores if store is not None]
        failure: BaseException | None = None
        for close in closers:
            try:
                close()
            except BaseException as exc:  # close the rest, then raise the first
                failure = failure or exc
        if failure is not None:
            raise failure


def _team_backend(repo: Repo, environ: Mapping[str, str] | None = None) -> NatsBackend | None:
    """``actors.settings.team_backend`` of ``repo``, without importing the settings models when
    the team is on files (docs/ARCHITECTURE.md, "Start-up and benchmarks")."""
    if on_files(repo.settings_path, environ):
        return None
    from actors.settings import team_backend

    return team_backend(repo.settings_path, environ)


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
    ``FlockLiveness`` in ``.team/members/`` (the Maildir and the file watcher come from
    ``Team``). ``nats://…/TEAM``: ``NatsEventStore``, ``NatsLiveness``, ``NatsMailbox`` and
    ``NatsWatcher``s of team TEAM (a notice says what stays in files). A bad value is a
    ``SettingsError`` naming the setting and its file; an unreachable server a
    ``MailboxesError``."""
    backend = _team_backend(repo, environ)
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
        return Stores(
            journal,
            FlockLiveness(repo.team_dir / "members"),
            blobs=FileBlobs(repo.team_dir / SNAPSHOTS),
            transcripts=_file_transcripts(repo),
        )
    from mailboxes.journal.nats import NatsEventStore
    from mailboxes.nats_blobs import NatsBlobs
    from mailboxes.nats_liveness import NatsLiveness
    from mailboxes.nats_mailbox import NatsMailbox
    from mailboxes.nats_transcripts import NatsTranscripts

    url = f"nats://{','.join(s.removeprefix('nats://') for s in backend.servers)}/{backend.team}"
    log.info(MIXED_NOTICE.format(url=url))
    servers, team = backend.servers, backend.team

    def watcher(on_hints: OnHints, rescan_s: float, inboxes: bool) -> Watcher:
        from mailboxes.nats_watch import NatsWatcher

        return NatsWatcher(servers, team, on_hints, rescan_s=rescan_s, inboxes=inboxes)

    # The mailbox first: its connection attempt is bounded, so an unreachable server is one
    # MailboxUnavailable within seconds.
    mailbox = NatsMailbox(servers, team)
    stream: NatsEventStore | None = None
    liveness: NatsLiveness | None = None
    blobs: NatsBlobs | None = None
    try:
        stream = NatsEventStore(servers, team)
        liveness = NatsLiveness(servers, team)
        blobs = NatsBlobs(servers, team)
        transcripts = NatsTranscripts(servers, team, _file_transcripts(repo))
    except BaseException:
        mailbox.close()
        for store in (stream, liveness, blobs):
            if store is not None:
                store.close()
        raise
    return Stores(
        stream,
        liveness,
        backend,
        mailbox=mailbox,
        watcher=watcher,
        blobs=blobs,
        # Written as files by the hosting process and copied to the stream (docs/SCALE-OUT.md,
        # "Transcripts and job output").
        transcripts=transcripts,
    )


def _file_transcripts(repo: Repo) -> TranscriptStore:
    from mailboxes.transcripts import FileTranscripts

    return FileTranscripts(repo.team_dir / "transcripts", repo.team_dir / "jobs")


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
        self.mailbox: TeamMailbox
        if stores.mailbox is not None:
            self.mailbox = stores.mailbox
        else:
            box = repo.team_dir / "mailboxes"
            self.mailbox = Maildir(box) if fsync is None else Maildir(box, fsync=fsync)
        self.liveness = stores.liveness
        self.blobs: BlobStore = (
            stores.blobs if stores.blobs is not None else FileBlobs(repo.team_dir / SNAPSHOTS)
        )
        self.transcripts: TranscriptStore = (
            stores.transcripts if stores.transcripts is not None else _file_transcripts(repo)
        )
        self.actor = actor
        self._board: Board | None = None

    @property
    def board(self) -> Board:
        """The task board, caught up with the journal."""
        if self._board is None:
            projections = None if self.read_only else Projections(self.repo.root)
            if projections is not None:
                # The look for hand-edited task files runs while the board loads its snapshot.
                projections.prefetch()
            try:
                self._board = Board(
                    self.journal,
                    projections=projections,
                    liveness=self.liveness,
                    actor=self.actor,
                    snapshots=self.blobs,
                    # Read-only: start from a snapshot, never write one.
                    snapshot_every=sys.maxsize
                    if self.read_only
                    else SNAPSHOT_EVERY
                    if isinstance(self.blobs, FileBlobs)
                    else REMOTE_SNAPSHOT_EVERY,
                )
            finally:
                if projections is not None:
                    projections.drop_prefetch()  # used by then, unless the board failed
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
        from mailboxes.payloads import MemberSpawned

        with acting_as(name):
            self.board.add_member(MemberSpawned(name=name, role="human", kind="human"))
        self.mailbox.ensure_inbox(name)

    @property
    def mailbox_path(self) -> Path | None:
        """The Maildir root (None: the mailboxes are not files, as on the JetStream backend)."""
        return self.mailbox.root if isinstance(self.mailbox, Maildir) else None

    def inbox_counts(self) -> dict[str, int]:
        """Unread messages per agent."""
        return {agent: self.mailbox.unread(agent) for agent in self.mailbox.agents()}

    def watch(self, on_hints: OnHints, rescan_s: float = 2.0, *, inboxes: bool = True) -> Watcher:
        """A (not yet started) ``Watcher`` of this team's journal and, with ``inboxes``, its
        inboxes: ``on_hints`` gets ``JournalAdvanced``, ``InboxChanged(agent)`` and a ``Tick``
        at least every ``rescan_s`` (docs/ARCHITECTURE.md, "Backends and seams"). On JetStream
        a ``NatsWatcher`` (subscriptions: a change on any host wakes this one)."""
        if self.stores.watcher is not None:
            return self.stores.watcher(on_hints, rescan_s, inboxes)
        from mailboxes.watch import HintWatcher  # watchfiles: not for every command

        return HintWatcher(
            on_hints,
            journal=self.journal_path,
            mailboxes=self.mailbox_path if inboxes else None,
            rescan_s=rescan_s,
        )

    def verify_projections(self) -> list[str]:
        """Fold the whole journal afresh (no board, so nothing is repaired first) and list every
        difference between the projections it renders and the files on disk (empty = none).
        A state snapshot that checks out must equal the fold up to its seq (a line if not)."""
        from actors.board import snapshot
        from actors.board.projections import verify

        problems: list[str] = []
        snap = snapshot.load(self.blobs, self.journal)
        fresh = EMPTY
        if snap is not None:
            upto = itertools.takewhile(lambda e: e.seq <= snap.seq, self.journal.read_from(1))
            fresh = fold_all(EMPTY, upto)
            if fresh != snap:
                where = (
                    self.repo.team_dir / SNAPSHOTS
                    if isinstance(self.blobs, FileBlobs)
                    else f"blob {snapshot.SNAPSHOT_BLOB} on JetStream"
                )
                problems.append(
                    f"{where}: the state snapshot at seq {snap.seq} differs from the fold of "
                    "the journal (delete it; the next open rebuilds it)"
                )
        fresh = fold_all(fresh, self.journal.read_from(fresh.seq + 1))
        return problems + [str(drift) for drift in verify(fresh, self.repo.root)]

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
    path = repo.team_dir / JOURNAL_NAME
    if _team_backend(repo) is None and not create and not path.exists():
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
    if _team_backend(repo) is not None:
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
    messages older than ``mailbox.cur_retention_days`` from every ``cur/`` (on JetStream: acked
    messages that old leave the stream; nothing is orphaned). Returns (removed, pruned).
    Housekeeping only: a failure is logged, never raised."""
    removed = pruned = 0
    max_age_s = settings.mailbox.cur_retention_days * 86_400
    try:
        removed = team.mailbox.recover()
        for agent in team.mailbox.agents():
            pruned += team.mailbox.prune(agent, max_age_s=max_age_s)
    except (OSError, MailboxesError) as exc:  # MailboxUnavailable: JetStream unreachable
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
    backend: str = "file"
    """The backend this checkout uses now (as recorded in ``.team/settings.json``)."""
    joined: int | None = None
    """The team already existed on the cluster with this many events, and this checkout
    connected to it (None: not a join)."""
    imported: int | None = None
    """Events moved from ``import_from`` (None: no import)."""


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


def init_team(
    start: Path | None = None,
    *,
    name: str | None = None,
    backend: str | None = None,
    import_from: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> InitReport:
    """Create ``.team/`` and friends; idempotent (a second run changes nothing). An existing
    settings file is kept but validated.

    ``backend`` (else ``$TEAMCTL_BACKEND``, else the settings file's; docs/SCALE-OUT.md,
    "Creating and joining a team") is recorded as the top-level ``backend`` of
    ``.team/settings.json``, other keys kept. On ``nats://…/TEAM`` the servers are checked first
    (unreachable, older than 2.12: one-line ``MailboxesError``); a team already on the cluster is
    joined (no second ``team.created``: ``InitReport.joined``). ``import_from`` (a
    ``journal.jsonl``, such as ``teamctl journal export`` writes) becomes the team's journal,
    events unchanged, refused when the team already has events. Moving this checkout's file team
    to another backend without ``import_from`` is refused (its events would be left behind)."""
    from actors.settings import default_settings_json, load_settings, parse_backend, team_backend

    repo = find_repo(start)
    env = os.environ if environ is None else environ
    recorded = team_backend(repo.settings_path, environ={})
    if backend is not None:
        from actors.settings import BACKEND_ENV

        try:
            chosen = parse_backend(backend)
        except ValueError as exc:
            raise TeamError(f"--backend: {exc}") from None
        if env.get(BACKEND_ENV) and team_backend(repo.settings_path, env) != chosen:
            raise TeamError(f"--backend {backend} differs from ${BACKEND_ENV}: unset one of them")
    else:
        chosen = team_backend(repo.settings_path, env)
    value = backend if backend is not None else _backend_value(chosen)
    events = read_journal_file(import_from) if import_from is not None else None
    file_journal = repo.team_dir / JOURNAL_NAME
    has_file_team = file_journal.exists() and file_journal.stat().st_size > 0
    if chosen != recorded and events is None:
        if recorded is None and has_file_team:
            raise TeamError(
                f"this checkout's team is in {file_journal}: to move it to {value}, run "
                f"`teamctl init --backend {value} --import {file_journal}`"
            )
        if recorded is not None and chosen is None:
            raise TeamError(
                f"this checkout's team is on {_backend_value(recorded)}: to move it to files, "
                "run `teamctl journal export FILE`, then `teamctl init --backend file --import "
                "FILE`"
            )
    if chosen is None and events is not None and has_file_team:
        raise TeamError(f"{file_journal} already has events: import only into a new team")
    if chosen is not None:
        _check_cluster(chosen, importing=events is not None)

    created: list[str] = []
    for folder in (repo.team_dir, *(repo.team_dir / f for f in TEAM_FOLDERS), repo.tasks_dir):
        if not folder.is_dir():
            folder.mkdir(parents=True)
            created.append(str(folder.relative_to(repo.root)) + "/")
            # The new entry must survive a power cut like the journal inside it will.
            fsync_dir(folder.parent)
    if repo.settings_path.exists():
        load_settings(repo.settings_path, environ={})
        if _record_backend(repo.settings_path, value):
            created.append(f"backend {value} in {repo.settings_path.relative_to(repo.root)}")
    else:
        default = default_settings_json()
        atomic_write(repo.settings_path, default.encode("utf-8"))
        _record_backend(repo.settings_path, value)
        created.append(str(repo.settings_path.relative_to(repo.root)))
    created += _add_excludes(repo)
    if events is not None:
        _import_events(repo, chosen, events)
        created.append(f"journal with {len(events)} events from {import_from}")
    new_journal = not file_journal.exists()
    team = _build(repo, create=True)
    try:
        joined = None
        if chosen is not None and events is None:
            joined = team.journal.last_seq() or None
        wanted = name or (chosen.team if chosen is not None else repo.root.name)

        def decision(state: TeamState) -> list[EventDraft]:
            from mailboxes.payloads import TeamCreated

            if state.name is not None:
                return []
            body = TeamCreated(name=wanted)
            return [draft(body.TYPE, "cli", body, op_id="team.created")]

        state, appended = team.board.execute(decision)
        if appended:
            created.append("journal with team.created")
        if LEAD not in team.mailbox.agents():
            team.mailbox.ensure_inbox(LEAD)
            created.append(f"inbox for {LEAD}")
    except BaseException:
        # A journal this call created but could not write (disk full) is not left at 0 bytes.
        if new_journal and file_journal.exists() and file_journal.stat().st_size == 0:
            file_journal.unlink()
        raise
    finally:
        team.close()
    return InitReport(
        repo=repo,
        name=state.name or wanted,
        created=tuple(created),
        backend=value,
        joined=joined,
        imported=None if events is None else len(events),
    )


def _backend_value(backend: NatsBackend | None) -> str:
    """The settings value of ``backend``."""
    if backend is None:
        return "file"
    hosts = ",".join(s.removeprefix("nats://") for s in backend.servers)
    return f"nats://{hosts}/{backend.team}"


def _record_backend(path: Path, value: str) -> bool:
    """Set the top-level ``backend`` of the settings file ``path`` to ``value``, every other
    key kept as it is; False when it already was."""
    import json

    raw = json.loads(path.read_text(encoding="utf-8"))
    if raw.get("backend", "file") == value and ("backend" in raw or value == "file"):
        return False
    raw["backend"] = value
    atomic_write(path, (json.dumps(raw, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return True


def _check_cluster(backend: NatsBackend, *, importing: bool) -> None:
    """Refuse a cluster that cannot be reached or is too old, and (``importing``) a team on it
    that already has events."""
    from mailboxes.nats_info import NatsTooOld, probe

    report = probe(backend.servers, backend.team)
    if report.too_old:
        raise NatsTooOld(report.too_old_message())
    if importing and report.journal_events:
        raise TeamError(
            f"team {backend.team} on the cluster already has {report.journal_events} journal "
            "message(s): import only into a team that has none"
        )


def read_journal_file(path: Path) -> list[Event]:
    """Every event of the ``journal.jsonl`` at ``path`` (CRC-framed lines, seqs 1, 2, …);
    ``TeamError`` naming the first bad line when it is not sound."""
    from mailboxes.journal.frame import decode_event

    report = check_journal(path)
    if not report.ok:
        raise TeamError(
            f"{path} is not a sound journal: line {report.problem_line}: {report.problem} "
            f"({report.last_seq} good events before it)"
        )
    if report.last_seq == 0:
        raise TeamError(f"{path} holds no events")
    lines = path.read_bytes().split(b"\n")[:-1]
    return [decode_event(raw, seq) for seq, raw in enumerate(lines, start=1)]


def _import_events(repo: Repo, backend: NatsBackend | None, events: list[Event]) -> None:
    """Make ``events`` the journal of the (new, empty) team on ``backend``."""
    from mailboxes.journal.frame import encode

    if backend is None:
        atomic_write(repo.team_dir / JOURNAL_NAME, b"".join(encode(e) for e in events))
        return
    from mailboxes.journal.nats import NatsEventStore
    from mailboxes.nats_info import import_journal

    store = NatsEventStore(backend.servers, backend.team)  # creates the stream as usual
    try:
        if store.last_seq():
            raise TeamError(
                f"team {backend.team} on the cluster already has events: import only into a "
                "team that has none"
            )
    finally:
        store.close()
    import_journal(backend.servers, backend.team, events)


def export_journal(dest: Path, start: Path | None = None, *, force: bool = False) -> int:
    """``teamctl journal export``: write every event of the team's journal (either backend) to
    ``dest`` as an ordinary ``journal.jsonl`` (the same CRC-framed lines), atomically; returns
    how many. An existing ``dest`` is refused unless ``force``."""
    from mailboxes.journal.frame import encode

    if dest.exists() and not force:
        raise TeamError(f"{dest} exists: remove it or choose another file (or --force)")
    with open_team(start) as team:
        body = b"".join(encode(event) for event in team.journal.read_from(1))
    atomic_write(dest, body)
    return body.count(b"\n")
