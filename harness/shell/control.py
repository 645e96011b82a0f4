"""Shell commands that would change the files which make the next process run code.

Agents may never write the protected control files (``harness.permissions.paths.PROTECTED_PATTERNS``: ``.git``
config and hooks, ``.team``, ``.mcp.json``, ``.claude`` settings) nor rewrite git's configuration.
Redirections are checked as file writes elsewhere; this module checks the arguments of commands
that are not read-only (``cp x .git/hooks/y``, ``sed -i .git/config``, ``tar -C .git/hooks``) and
git subcommands that write configuration (``git config k v``, ``git remote add``, ``git init``).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from harness.permissions.paths import PathDenied, protected_reason, resolve
from harness.shell.words import SimpleCommand, Word


def touches_control_files(
    home: Path | None, cmd: SimpleCommand, root: Path, cwd: Path
) -> str | None:
    """Why a command that is not read-only is refused for naming a protected control file (or
    for rewriting git's configuration), or None. Found by tests/security: ``cp x .git/hooks/y``,
    ``sed -i .git/config``, ``git config core.fsmonitor ...`` passed with an allow rule or in
    ``bypassPermissions`` although agents may never write these files."""
    if cmd.name == "git":
        why = _git_writes_config(cmd.argv[1:])
        if why is not None:
            return why
    for w in cmd.argv[1:]:
        if w.dynamic:
            continue
        values = [w.text, w.text.split("=", 1)[1]] if "=" in w.text else [w.text]
        for value in values:
            for path in _expand(value, w.glob, cwd):
                try:
                    rp = resolve(path, cwd=cwd, home=home)
                except PathDenied:
                    continue
                why = protected_reason(rp, root)
                if why is not None:
                    return f"`{cmd.display()}`: {why}"
    return None


def _expand(text: str, is_glob: bool, cwd: Path) -> list[str]:
    if not is_glob:
        return [text] if text and not text.startswith("-") else []
    # What it matches now, and what it would name once its last part exists (`.gi?/hooks/new`).
    head, tail = os.path.split(text)
    later = [os.path.join(m, tail) for m in glob.glob(head, root_dir=cwd)] if head else []
    return [*glob.glob(text, root_dir=cwd), *later]


_GIT_CONFIG_READS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool",
     "--list", "-l", "get", "list"}
)  # fmt: skip
_GIT_CONFIG_WRITERS = {
    "remote": frozenset({"add", "set-url", "rename", "remove", "rm", "set-branches"}),
    "submodule": frozenset({"add", "init", "sync", "update", "deinit", "set-url", "set-branch"}),
}


def _git_writes_config(args: tuple[Word, ...]) -> str | None:
    """Why a git command line rewrites the repository's (or the user's) git configuration."""
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        i += 2 if args[i].text in ("-C", "-c", "--git-dir", "--work-tree") else 1
    if i >= len(args):
        return None
    sub, rest = args[i].text, [w.text for w in args[i + 1 :]]
    why = "rewrites git configuration, which agents may not change (it can run commands later)"
    if sub == "config":
        return None if any(r.split("=", 1)[0] in _GIT_CONFIG_READS for r in rest) else why
    if sub in _GIT_CONFIG_WRITERS and rest and rest[0] in _GIT_CONFIG_WRITERS[sub]:
        return f"git {sub}: {why}"
    if sub == "branch" and any(
        r.split("=", 1)[0] in ("-u", "--set-upstream-to", "--unset-upstream") for r in rest
    ):
        return f"git branch: {why}"
    if sub == "worktree" and rest[:1] != ["list"]:
        return f"git worktree is run by the team runtime only ({why})"
    if sub in ("init", "clone") and (
        sub == "init" or any(r.split("=", 1)[0] in ("-c", "--config", "--template") for r in rest)
    ):
        return f"git {sub}: {why}"
    return None
