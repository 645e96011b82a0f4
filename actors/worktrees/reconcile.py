"""Reconcile ``git worktree list --porcelain`` with the journal (on start and on demand).

``compare`` is pure: journaled worktrees vs git's entries under ``.worktrees/``. ``reconcile``
reports, and changes things only when asked: ``prune`` runs ``git worktree prune``; ``repair``
removes a half-created worktree (in git, not in the journal — what a crash between the git step
and the journal step of create leaves) when it holds no work of its own, and journals
``worktree.removed`` for a journaled worktree git no longer has, unless its task is claimed.
One thing is always set right, being the runtime's own bookkeeping: a worktree left
``git worktree lock``ed while its task is not claimed (a runtime that died before unlocking) is
unlocked, and the unlock is listed in ``repaired``.

A worktree whose task's completion was pushed to the shared remote (``WorktreeRecord.remote``)
and that this clone does not have is no drift: it was worked in another clone, and a merge here
fetches it (docs/SCALE-OUT.md, "Code across hosts").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from actors.board.board import Board
from actors.board.state import TeamState, WorktreeRecord
from actors.worktrees.git import BRANCH_PREFIX, WORKTREES_DIR, Git, GitWorktree
from actors.worktrees.messages import Drift, ReconcileReport
from mailboxes.events import EventDraft, WorktreeRemoved, draft


def compare(
    root: Path,
    records: Mapping[str, WorktreeRecord],
    entries: Iterable[GitWorktree],
    *,
    exists: Mapping[Path, bool],
) -> list[Drift]:
    """Differences between the journal's live worktrees and git's entries under
    ``<root>/.worktrees``; ``exists`` tells whether each path is a directory."""
    home = root / WORKTREES_DIR
    by_path = {e.path: e for e in entries}
    drifts: list[Drift] = []
    known: set[Path] = set()
    for record in records.values():
        if record.removed:
            continue
        path = root / record.path
        known.add(path)
        entry = by_path.get(path)
        if entry is None:
            if exists.get(path, False):
                drifts.append(Drift("not_registered", record.name, f"{path} is not a git worktree"))
            elif record.remote is None:  # else its completed work is on the shared remote
                drifts.append(Drift("missing_directory", record.name, f"{path} is gone"))
            continue
        if entry.prunable or not exists.get(path, False):
            drifts.append(
                Drift("missing_directory", record.name, f"{path} is gone (git: prunable)")
            )
        if entry.branch != record.branch:
            actual = entry.branch or "a detached HEAD"
            drifts.append(
                Drift("wrong_branch", record.name, f"on {actual}, expected {record.branch}")
            )
        if record.task_id is None:
            drifts.append(Drift("unbound", record.name, "created but bound to no task"))
    for entry in by_path.values():
        if entry.path.parent == home and entry.path not in known:
            what = entry.branch or "detached"
            drifts.append(
                Drift("unknown", entry.path.name, f"{entry.path} ({what}) is not in the journal")
            )
    return drifts


def _exists(paths: Iterable[Path]) -> dict[Path, bool]:
    return {p: p.is_dir() for p in paths}


def reconcile(git: Git, board: Board, *, prune: bool, repair: bool) -> ReconcileReport:
    """Report drift; prune and repair only when asked (see the module docstring)."""
    state = board.refresh()
    root = git.root
    entries = git.worktrees()
    paths = [root / r.path for r in state.worktrees.values()] + [e.path for e in entries]
    drifts = compare(root, state.worktrees, entries, exists=_exists(paths))
    repaired = _unlock_stale(git, state, entries)
    if prune:
        git.run("worktree", "prune")
    if repair:
        repaired += _remove_half_created(git, [d for d in drifts if d.kind == "unknown"], entries)
        if not prune:
            git.run("worktree", "prune")
        repaired += _forget_missing(git, board, state, drifts)
    if prune or repair:
        after = board.refresh()
        entries = git.worktrees()
        paths = [root / r.path for r in after.worktrees.values()] + [e.path for e in entries]
        drifts = compare(root, after.worktrees, entries, exists=_exists(paths))
    return ReconcileReport(tuple(drifts), pruned=prune, repaired=tuple(repaired))


def _remove_half_created(
    git: Git, unknown: Sequence[Drift], entries: Sequence[GitWorktree]
) -> list[str]:
    done = []
    by_name = {e.path.name: e for e in entries}
    for drift in unknown:
        entry = by_name.get(drift.name)
        branch = BRANCH_PREFIX + drift.name
        if entry is None or entry.branch != branch or entry.head is None:
            continue
        has_work = entry.path.is_dir() and bool(git.dirty(entry.path))
        # The branch was made by create at its base: any commit of its own is someone's work.
        others = git.out("for-each-ref", "--format=%(refname)", "refs/heads/")
        elsewhere = [
            ref.removeprefix("refs/heads/")
            for ref in others.splitlines()
            if ref and ref != f"refs/heads/{branch}"
        ]
        merged_somewhere = any(git.is_ancestor(entry.head, ref) for ref in elsewhere)
        if has_work or not merged_somewhere:
            continue
        git.run("worktree", "remove", "--force", "--force", str(entry.path))
        git.run("branch", "-D", branch)
        done.append(f"removed half-created worktree {drift.name} and branch {branch}")
    return done


def _forget_missing(git: Git, board: Board, state: TeamState, drifts: Sequence[Drift]) -> list[str]:
    names = {d.name for d in drifts if d.kind == "missing_directory"}
    listed = {e.path for e in git.worktrees()}
    gone = []
    for name in sorted(names):
        record = state.worktrees[name]
        task = state.tasks.get(record.task_id) if record.task_id else None
        if git.root / record.path in listed or (task is not None and task.status == "in_progress"):
            continue
        gone.append(name)
    if not gone:
        return []

    def decision(st: TeamState) -> Sequence[EventDraft]:
        drafts = []
        for name in gone:
            current = st.worktrees.get(name)
            if current is not None and not current.removed:
                body = WorktreeRemoved(name=name, branch_deleted=False)
                drafts.append(draft(body.TYPE, board.actor, body))
        return drafts

    board.execute(decision)
    return [f"journaled worktree.removed for {name} (its directory is gone)" for name in gone]


def _unlock_stale(git: Git, state: TeamState, entries: Sequence[GitWorktree]) -> list[str]:
    """Unlock journaled worktrees git has locked while their task is not claimed."""
    locked = {e.path for e in entries if e.locked}
    done = []
    for record in state.worktrees.values():
        path = git.root / record.path
        if record.removed or path not in locked:
            continue
        task = state.tasks.get(record.task_id) if record.task_id else None
        if task is not None and task.status == "in_progress":
            continue
        git.run("worktree", "unlock", str(path), check=False)
        done.append(f"unlocked worktree {record.name} (its task is not claimed)")
    return done
