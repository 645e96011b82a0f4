"""Path resolution, confinement to the agent root, gitignore-style patterns and protected files.

Every path a permission decision looks at goes through ``resolve``: ``~`` expanded, relative paths
joined to the agent's cwd, ``..`` and symlinks resolved (the path itself need not exist), NUL
bytes and symlink loops refused. Both the resolved path and the lexical one (``..`` folded,
symlinks not followed) are kept: deny rules and protected files are checked against both, so a
symlink cannot hide a protected file and a symlinked name cannot dodge a deny rule.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


class PathDenied(Exception):
    """A path that cannot be resolved safely (NUL byte, symlink loop, unknown ``~user``)."""


@dataclass(frozen=True)
class ResolvedPath:
    """A path as written, its lexical absolute form and its real location."""

    raw: str
    lexical: Path
    real: Path

    def forms(self) -> tuple[Path, ...]:
        """The distinct absolute forms, real first."""
        return (self.real,) if self.real == self.lexical else (self.real, self.lexical)


def real_root(root: Path) -> Path:
    """The root with symlinks resolved (``/tmp`` may itself be a link)."""
    return Path(os.path.realpath(root))


def resolve(raw: str, *, cwd: Path, home: Path | None = None) -> ResolvedPath:
    """Resolve ``raw`` against ``cwd``; raises ``PathDenied`` with a reason the model can read."""
    if "\x00" in raw:
        raise PathDenied("the path contains a NUL byte")
    if not raw:
        raise PathDenied("the path is empty")
    text = raw
    if text == "~" or text.startswith("~/"):
        text = str(home or Path.home()) + text[1:]
    elif text.startswith("~"):
        raise PathDenied(f"{raw!r}: another user's home directory is not allowed")
    candidate = Path(text)
    if not candidate.is_absolute():
        candidate = cwd / candidate
    lexical = Path(os.path.normpath(candidate))
    real = Path(os.path.realpath(lexical))
    try:
        os.stat(real)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathDenied(f"{raw!r}: symlink loop") from exc
    return ResolvedPath(raw=raw, lexical=lexical, real=real)


def inside(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or below it (both absolute, already normalised)."""
    return path == root or path.is_relative_to(root)


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a gitignore-style glob (already stripped of its anchor) into a regex."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out))


@dataclass(frozen=True)
class PathPattern:
    """A gitignore-style pattern bound to a base directory.

    ``//abs/**`` is absolute, ``~/x`` is under the home directory, ``/x`` and ``./x`` are relative
    to the root; a pattern with no inner ``/`` (``*.env``, ``.git``) matches at any depth. A
    pattern that matches a directory matches everything below it, as in ``.gitignore``.
    """

    source: str
    base: Path
    glob: str
    anchored: bool

    @classmethod
    def parse(cls, spec: str, *, root: Path, home: Path | None = None) -> PathPattern:
        text = spec.strip()
        if text.startswith("//"):
            return cls(spec, Path("/"), text[2:].strip("/") or "**", True)
        if text == "~" or text.startswith("~/"):
            return cls(spec, home or Path.home(), text[2:].strip("/") or "**", True)
        anchored = False
        if text.startswith("./"):
            text, anchored = text[2:], True
        elif text.startswith("/"):
            text, anchored = text[1:], True
        body = text.rstrip("/")
        if "/" in body:
            anchored = True
        return cls(spec, root, body or "**", anchored)

    def fixed_part(self) -> Path:
        """The deepest path every match lies in or below (the path itself without wildcards)."""
        if not self.anchored:
            return self.base
        cut = next((i for i, c in enumerate(self.glob) if c in "*?["), None)
        if cut is None:
            return self.base / self.glob
        head = self.glob[:cut]
        return self.base / head.rsplit("/", 1)[0] if "/" in head else self.base

    def glob_free(self) -> bool:
        """The pattern names one path (``./.env``), so ``fixed_part`` is all it matches."""
        return self.anchored and not any(c in self.glob for c in "*?[")

    def matches(self, path: Path) -> bool:
        """True when ``path`` (absolute) or one of its ancestors below the base matches."""
        if not inside(path, self.base):
            return False
        rel = path.relative_to(self.base).as_posix()
        if rel == ".":
            return self.glob in ("**", "*")
        regex = _glob_regex(self.glob if self.anchored else "**/" + self.glob)
        parts = rel.split("/")
        return any(regex.fullmatch("/".join(parts[:k])) for k in range(len(parts), 0, -1))


PROTECTED_PATTERNS: tuple[str, ...] = (
    ".git",
    "/.team",
    "/.mcp.json",
    "/.claude/settings.json",
    "/.claude/settings.local.json",
)
"""Paths no agent may write, in any mode (relative to the agent root; ``.git`` at any depth).

``.git`` (config, hooks, and the ``.git`` file of a worktree) and ``.mcp.json`` / ``.claude``
settings can make the next process run arbitrary commands; ``.team`` holds the journal,
mailboxes, transcripts and ``settings.json``, which only the runtime writes.
"""

PROTECTED_EXCEPTIONS: tuple[str, ...] = ("/.team/memory",)
"""Writable holes in the protected set: the shared memory files agents are meant to edit."""


def protected_reason(path: ResolvedPath, root: Path) -> str | None:
    """Why writing ``path`` is refused, or ``None`` when it is not a protected control file."""
    for form in path.forms():
        if not inside(form, root):
            continue
        if any(PathPattern.parse(p, root=root).matches(form) for p in PROTECTED_EXCEPTIONS):
            continue
        for pattern in PROTECTED_PATTERNS:
            if PathPattern.parse(pattern, root=root).matches(form):
                rel = form.relative_to(root).as_posix()
                return f"{rel} is a protected control file ({pattern.lstrip('/')}); agents cannot write it"
    return None
