"""The team layer: a lead and teammates sharing a task board, mailboxes and a journal.

Subpackages (lower ones never import higher ones; ``tests/test_package.py`` holds the order):

- ``board``: team state folded from the journal, the task board's commands, the protocols'
  journal commands, projections on disk.
- ``jobs``: background commands (the Jobs actor), cron (the Scheduler actor), their tables.
- ``worktrees``: the Worktrees actor (every git write), git plumbing, confinement, merge.
- ``tools``: the team tools agents call (lead, teammate, worktree tools).
- ``runtime``: ``TeamRuntime`` and the actors hosting the lead and the teammates.
- ``live``: the live view (snapshot, incremental loading, rendering).
- ``scenarios``: scripted team scenarios, their runner and checker, ``teamctl demo``.
- ``cli``: the ``teamctl`` command line.

Modules:

- ``errors``: ``TeamError`` and its family.
- ``messages``: the actors' messages (one discriminated union).
- ``repo``: ``find_repo``/``find_team``: the repository a command runs in.
- ``settings``: ``Settings``: ``.team/settings.json`` (and ``TEAMCTL_SETTINGS``).
- ``factory``: ``open_team``/``init_team``: the durable objects of a team (journal, board, inboxes).
- ``services``: ``TeamServices``: the seam between the runtime and the team tools.
- ``protocols``: plan approval and shutdown between members (journal first, then mail).

Like every ``__init__`` of the project, this file imports nothing: import the modules themselves
(``from actors.board.board import Board``), so that ``teamctl --help`` stays fast.
"""

__all__ = [
    "board",
    "cli",
    "errors",
    "factory",
    "jobs",
    "live",
    "messages",
    "protocols",
    "repo",
    "runtime",
    "scenarios",
    "services",
    "settings",
    "tools",
    "worktrees",
]
