"""Project instructions: ``CLAUDE.md``, ``.claude/CLAUDE.md``, ``AGENTS.md``, ``CLAUDE.local.md``.

Read once when an agent is built and placed in the static (cached) part of its system prompt, as
Claude Code loads its memory files at session start. Order, lowest precedence first (later text
comes later in the prompt, where the model weighs it more):

1. user: ``~/.claude/CLAUDE.md`` (``home`` from the caller, ``$HOME`` by default);
2. for each directory from the repository root down to the agent's working directory:
   ``CLAUDE.md``, ``.claude/CLAUDE.md``, ``AGENTS.md``, ``CLAUDE.local.md``.

Differences from Claude Code, on purpose: directories above the repository root are not read (an
agent is confined to its root); ``AGENTS.md`` is read as well (Claude Code reads it only through an
``@AGENTS.md`` import — a file reached both ways is loaded once); the managed policy file,
``.claude/rules/`` and the on-demand ``CLAUDE.md`` of subdirectories below the working directory
are not read.

``@path`` imports (Claude Code syntax): ``@`` at the start of a line or after whitespace, a path
relative to the importing file, absolute, or ``~/``-relative; never inside a code span or a fenced
code block; up to ``MAX_IMPORT_DEPTH`` hops; each imported file is added after the file that
imports it. Claude Code asks before following an import outside the project; we have no one to ask
at start-up, so a project file may import only files inside the repository or Markdown files under
``~/.claude/``, and files of the user scope may import anything. A file a permission deny rule
covers (``Read(...)``, via ``denied``) is never loaded. Each file is capped at
``MAX_FILE_CHARS`` and all of them at ``MAX_TOTAL_CHARS``, with a note saying what was cut.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.permissions.policy import harness_policy
from harness.settings import claude_user_dir
from harness.tools.base import PermissionRequest, ToolContext

Kind = Literal["user", "project", "agents", "local", "import"]

MAX_IMPORT_DEPTH = 5
MAX_FILE_CHARS = 40_000
MAX_TOTAL_CHARS = 100_000

PROJECT_FILES: tuple[tuple[str, Kind], ...] = (
    ("CLAUDE.md", "project"),
    (".claude/CLAUDE.md", "project"),
    ("AGENTS.md", "agents"),
    ("CLAUDE.local.md", "local"),
)

_LABEL: dict[Kind, str] = {
    "user": "user's private global instructions for all projects",
    "project": "project instructions, checked into the codebase",
    "agents": "project instructions for coding agents (AGENTS.md)",
    "local": "user's private project instructions, not checked in",
    "import": "imported by {parent}",
}

HEADER = (
    "Codebase and user instructions are shown below. Follow them: they take precedence over the "
    "general guidance above (but never over permission rules, which are enforced)."
)

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_IMPORT = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\]|\\ )+)")
_TRAILING = ".,;:!?)]}'\""

Denied = Callable[[Path], str | None]
"""Returns why reading a path is denied (a permission deny rule), or ``None``."""


@dataclass(frozen=True)
class InstructionFile:
    path: Path
    kind: Kind
    text: str
    imported_by: Path | None = None
    truncated_from: int | None = None
    """The file's full length when ``text`` was cut to the cap."""


@dataclass
class Instructions:
    """The files loaded, in prompt order, and notes on what was skipped or cut."""

    files: list[InstructionFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The prompt section ("" when no file was found)."""
        if not self.files:
            return ""
        parts = [HEADER]
        for f in self.files:
            label = _LABEL[f.kind].format(parent=f.imported_by)
            body = f.text.rstrip("\n")
            if f.truncated_from is not None:
                body += (
                    f"\n\n[Truncated: {f.path} has {f.truncated_from} characters, only the first "
                    f"{len(f.text)} are shown here. Read the file for the rest.]"
                )
            parts.append(f"Contents of {f.path} ({label}):\n\n{body}")
        cut = [n for n in self.notes if n.startswith("not loaded")]
        if cut:
            parts.append("\n".join(cut))
        return "\n\n".join(parts)


def import_paths(text: str) -> list[str]:
    """The ``@path`` imports of a Markdown text, outside code spans and fenced code blocks."""
    found: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        line = _SPAN.sub(" ", line)
        found += [p.replace("\\ ", " ") for p in _IMPORT.findall(line)]
    return found


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


class _Loader:
    def __init__(
        self,
        root: Path,
        home: Path,
        user_dir: Path,
        denied: Denied | None,
        max_file_chars: int,
        max_total_chars: int,
    ) -> None:
        self.root, self.home = root.resolve(), home
        self.user_dir = user_dir.resolve()
        self.denied = denied
        self.max_file, self.max_total = max_file_chars, max_total_chars
        self.out = Instructions()
        self.seen: set[Path] = set()
        self.total = 0

    def add(
        self, path: Path, kind: Kind, *, user: bool, parent: Path | None = None, depth: int = 0
    ) -> None:
        try:
            real = path.resolve()
        except (OSError, RuntimeError):
            return
        if real in self.seen or not real.is_file():
            return
        self.seen.add(real)
        why = self.denied(path) if self.denied is not None else None
        if why is not None:
            self.out.notes.append(f"skipped {path}: {why}")
            return
        try:
            full = real.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            self.out.notes.append(f"skipped {path}: {exc}")
            return
        room = min(self.max_file, self.max_total - self.total)
        if room <= 0:
            self.out.notes.append(f"not loaded (instructions size cap reached): {path}")
            return
        text, truncated = full, None
        if len(full) > room:
            text, truncated = full[:room], len(full)
        self.total += len(text)
        self.out.files.append(InstructionFile(path, kind, text, parent, truncated))
        for raw in import_paths(full):
            self._import(raw, path, user=user, depth=depth + 1)

    def _import(self, raw: str, importer: Path, *, user: bool, depth: int) -> None:
        target = self._resolve(raw, importer)
        if target is None:
            return
        if depth > MAX_IMPORT_DEPTH:
            self.out.notes.append(
                f"skipped @{raw} in {importer}: imports go at most {MAX_IMPORT_DEPTH} hops deep"
            )
            return
        real = target.resolve()
        allowed = (
            user
            or _inside(real, self.root)
            or (_inside(real, self.user_dir) and real.suffix.lower() == ".md")
        )
        if not allowed:
            self.out.notes.append(
                f"skipped @{raw} in {importer}: a project file may import only files inside the "
                "repository or Markdown files under ~/.claude/"
            )
            return
        self.add(target, "import", user=user, parent=importer, depth=depth)

    def _resolve(self, raw: str, importer: Path) -> Path | None:
        for candidate in (raw, raw.rstrip(_TRAILING)):
            if not candidate:
                continue
            if candidate.startswith("~/"):
                path = self.home / candidate[2:]
            elif os.path.isabs(candidate):
                path = Path(candidate)
            else:
                path = importer.parent / candidate
            try:
                if path.is_file():
                    return path
            except OSError:
                return None
        return None


def load_instructions(
    root: Path,
    cwd: Path | None = None,
    *,
    home: Path | None = None,
    denied: Denied | None = None,
    max_file_chars: int = MAX_FILE_CHARS,
    max_total_chars: int = MAX_TOTAL_CHARS,
) -> Instructions:
    """The instruction files an agent working in ``cwd`` (inside ``root``) follows."""
    user_dir = claude_user_dir(home) or Path.home() / ".claude"
    home = home if home is not None else Path.home()
    loader = _Loader(root, home, user_dir, denied, max_file_chars, max_total_chars)
    loader.add(user_dir / "CLAUDE.md", "user", user=True)
    for folder in _folders(root, cwd or root):
        for name, kind in PROJECT_FILES:
            loader.add(folder / name, kind, user=False)
    return loader.out


def _folders(root: Path, cwd: Path) -> list[Path]:
    """``root``, then each directory down to ``cwd`` (just ``root`` when ``cwd`` is outside)."""
    out = [root]
    try:
        rel = cwd.resolve().relative_to(root.resolve())
    except ValueError:
        return out
    for part in rel.parts:
        out.append(out[-1] / part)
    return out


def denied_by_rules(policy: object, ctx: ToolContext) -> Denied | None:
    """A ``Denied`` for the permission rules behind ``policy`` (a ``HarnessPolicy``, or a policy
    wrapping one as ``inner``): a path a deny rule covers for ``read_file`` is not loaded."""
    found = harness_policy(policy)
    if found is None:
        return None
    checker = found.permissions

    def denied(path: Path) -> str | None:
        request = PermissionRequest(
            tool="read_file", kind="read", target=str(path), paths=(str(path),), read_only=True
        )
        verdict = checker.check(request, ctx).verdict
        return verdict.reason if verdict.decision == "deny" and verdict.source == "rule" else None

    return denied
