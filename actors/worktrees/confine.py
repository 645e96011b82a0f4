"""Confinement of a teammate working in a worktree
(docs/ARCHITECTURE.md, "Worktrees").

The harness already confines file tools to ``ToolContext.root`` (writes outside are denied;
reads outside are denied unless an allow rule names them) and asks about shell commands that
leave the root or point git elsewhere. A teammate in a worktree gets stricter, deny-only checks
on top, before its normal policy (hooks, rules, approver) is consulted, so no hook or approval
can let it through:

- any path (file tool argument, shell argument or redirection) that resolves into the main
  checkout or another worktree, i.e. inside the repository but outside its own worktree;
- ``cd``/``pushd``/``popd`` leaving the worktree, or to a place known only at run time;
- git redirection: ``git -C``, ``--git-dir``, ``--work-tree``, ``-c``, ``--exec-path``,
  ``--namespace``, and any ``GIT_*=`` assignment or export;
- ``git config`` writes (a config key such as ``core.fsmonitor`` or a hook path would run
  commands in the next git process, the human's included) and ``git worktree``.

The runtime builds the policy with ``confine_policy`` and runs the teammate with
``ToolContext(root=worktree, cwd=worktree)`` (``confined_context``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.permissions.paths import PathDenied, inside, real_root, resolve
from harness.permissions.rules import SHELL_TOOL
from harness.ports import ToolUseBlock
from harness.shell.parse import analyse
from harness.shell.words import SimpleCommand, Word
from harness.tools.base import (
    JobRunner,
    PermissionRequest,
    PolicyVerdict,
    ToolContext,
    ToolOutput,
    ToolPolicy,
)

_CD = frozenset({"cd", "pushd", "popd"})
_GIT_CONFIG_READS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--show-origin",
     "--show-scope", "--name-only", "--null", "-z", "--default", "--type", "--bool", "--int",
     "--path", "--local", "--global", "--worktree", "--file", "-f", "--includes"}
)  # fmt: skip
_GIT_VALUED = frozenset({"-C", "--git-dir", "--work-tree", "-c", "--exec-path", "--namespace"})


@dataclass(frozen=True)
class Confinement:
    """A worktree ``root`` inside the repository whose main checkout is ``repo``."""

    root: Path
    repo: Path

    @classmethod
    def of(cls, worktree: Path, repo_root: Path) -> Confinement:
        return cls(real_root(worktree), real_root(repo_root))

    def why_denied(self, request: PermissionRequest, ctx: ToolContext) -> str | None:
        """The reason ``request`` is denied by confinement, or None (the normal policy decides)."""
        if request.tool == SHELL_TOOL:
            return self.shell(request.target or "", ctx.cwd)
        paths = request.paths
        if not paths and request.target and request.kind in ("read", "write"):
            paths = (request.target,)
        for raw in paths:
            why = self.path(raw, ctx.cwd)
            if why:
                return why
        return None

    def path(self, raw: str, cwd: Path) -> str | None:
        """Why ``raw`` (resolved against ``cwd``) is out of bounds, or None."""
        try:
            rp = resolve(raw, cwd=cwd)
        except PathDenied as exc:
            return str(exc)
        for form in rp.forms():
            if inside(form, self.repo) and not inside(form, self.root):
                return (
                    f"{raw!r} is {self._where(form)}; you are confined to your worktree {self.root}"
                )
        return None

    def _where(self, path: Path) -> str:
        home = self.repo / ".worktrees"
        if inside(path, home) and path != home:
            return f"in another worktree ({path.relative_to(home).parts[0]})"
        return "in the main checkout"

    def shell(self, command: str, cwd: Path) -> str | None:
        """Why the shell ``command`` run in ``cwd`` breaks confinement, or None."""
        analysis = analyse(command)
        if analysis.git_overrides:
            return f"{analysis.git_overrides[0]}: git may not be pointed outside your worktree"
        here: Path | None = cwd
        for cmd in analysis.commands:
            why, here = self._command(cmd, here)
            if why:
                return why
        for red in analysis.redirects:
            if not red.target.dynamic:
                why = self.path(_glob_head(red.target), here or cwd)
                if why:
                    return why
        return None

    def _command(self, cmd: SimpleCommand, cwd: Path | None) -> tuple[str | None, Path | None]:
        for layer in cmd.layers or (cmd.argv,):
            for word in layer:
                if word.text.startswith("GIT_") and "=" in word.text:
                    return f"{word.text.split('=', 1)[0]}= changes where git looks", cwd
        name = cmd.name
        args = cmd.argv[1:]
        if name in _CD:
            return self._cd(name, args, cwd)
        if name == "git":
            why = _git(args)
            if why:
                return why, cwd
        for word in (*args, *(r.target for r in cmd.redirects)):
            if word.dynamic or not _looks_like_path(word.text):
                continue
            value = word.text.split("=", 1)[1] if word.text.startswith("-") else word.text
            if cwd is None and not value.startswith(("/", "~")):
                continue
            why = self.path(_glob_head(Word(value, glob=word.glob)), cwd or self.root)
            if why:
                return why, cwd
        return None, cwd

    def _cd(
        self, name: str, args: tuple[Word, ...], cwd: Path | None
    ) -> tuple[str | None, Path | None]:
        if name == "popd" or (args and args[0].text == "-"):
            return f"`{name}` returns to a directory known only at run time", None
        operands = [w for w in args if w.dynamic or not w.text.startswith("-")]
        if not operands:
            return f"`{name}` without a directory goes home, outside your worktree", None
        target = operands[0]
        if target.dynamic:
            return f"`{name} {target.text}`: a directory known only at run time", None
        if cwd is None and not target.text.startswith(("/", "~")):
            return f"`{name} {target.text}`: from a directory known only at run time", None
        try:
            rp = resolve(target.text, cwd=cwd or self.root)
        except PathDenied as exc:
            return str(exc), None
        if not inside(rp.real, self.root):
            return f"`{name} {target.text}` leaves your worktree {self.root}", None
        return None, rp.real


def _git(args: tuple[Word, ...]) -> str | None:
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        opt = args[i].text.split("=", 1)[0]
        if opt in _GIT_VALUED:
            return f"git {opt}: git may not be pointed outside your worktree"
        i += 1
    if i >= len(args):
        return None
    sub, rest = args[i].text, args[i + 1 :]
    if sub == "worktree":
        return "git worktree is run by the team runtime only"
    if sub == "config":
        flags = [w.text.split("=", 1)[0] for w in rest if w.text.startswith("-")]
        values = [w for w in rest if not w.text.startswith("-")]
        reading = any(f.startswith("--get") or f in ("--list", "-l") for f in flags)
        only_reads = all(f in _GIT_CONFIG_READS for f in flags)
        if not (only_reads and (reading or len(values) <= 1)):
            return "git config changes are not allowed in a worktree (they reach every checkout)"
    return None


def _looks_like_path(text: str) -> bool:
    value = text.split("=", 1)[1] if text.startswith("-") and "=" in text else text
    return "/" in value or value in ("..", "~") or value.startswith("~")


def _glob_head(word: Word) -> str:
    """The fixed directory part of a glob word (the word itself when it has no glob)."""
    text = word.text
    if not word.glob:
        return text
    cut = min((i for i, c in enumerate(text) if c in "*?[{"), default=len(text))
    head = text[:cut]
    return head.rsplit("/", 1)[0] if "/" in head else "."


class ConfinedPolicy:
    """A ``ToolPolicy`` that applies ``Confinement`` first, then defers to ``inner``."""

    def __init__(self, inner: ToolPolicy, confinement: Confinement) -> None:
        self.inner = inner
        self.confinement = confinement

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        why = self.confinement.why_denied(request, ctx)
        if why is not None:
            return PolicyVerdict("deny", why)
        return self.inner.before(call, request, ctx)

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        return self.inner.after(call, output, ctx)


def confine_policy(inner: ToolPolicy, worktree: Path, repo_root: Path) -> ConfinedPolicy:
    """The policy of a teammate working in ``worktree``: confinement, then ``inner``."""
    return ConfinedPolicy(inner, Confinement.of(worktree, repo_root))


def confined_context(
    agent: str,
    worktree: Path,
    *,
    session_id: str = "",
    outputs_dir: Path | None = None,
    job_runner: JobRunner | None = None,
) -> ToolContext:
    """A ``ToolContext`` rooted at the worktree (its cwd, and the root every path is held to)."""
    root = real_root(worktree)
    return ToolContext(
        agent=agent,
        root=root,
        cwd=root,
        session_id=session_id,
        outputs_dir=outputs_dir,
        job_runner=job_runner,
    )
