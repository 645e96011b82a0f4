"""Permission decisions: rules, modes, path confinement and shell analysis for one tool call.

Rules follow Claude Code's documented syntax (``harness.permissions.rules``): ``Tool`` or
``Tool(specifier)``, Claude Code's tool names (``Bash``, ``Read``, ``Edit``, ``Task``/``Agent``,
``Skill(name)``, ``TodoWrite``, ...), a trailing `` *`` that also matches the bare command, the
legacy ``:*``; allow rules do not match past ``VAR=value`` assignments they do not name, deny and
ask rules do.

Order (the first step that decides, decides):

1. Paths: every path of the request is resolved; a NUL byte or a symlink loop is denied; a write
   to a protected control file (``harness.permissions.paths.PROTECTED_PATTERNS``) is denied in
   every mode; a path a deny rule covers is denied (a ``Read`` deny rule inside or outside the
   root); a write outside the working area (the root and ``permissions.additionalDirectories``)
   is denied; a read outside it is denied unless an allow rule names it explicitly.
2. Rules: deny > ask > allow (the first matching rule of a list is the one reported). For
   ``bash`` every simple command, redirection and file argument found by ``harness.shell.parse`` is
   checked on its own (``harness.permissions.shell``) and the strictest answer wins: a command
   that names a file a ``Read`` deny rule covers (also through a glob, or under a directory it
   reads whole, such as ``grep -r``) is denied; a rule that might match a word known only at run
   time, a file a reading command only knows at run time while ``Read`` deny rules exist, and
   anything the analyser cannot reduce count as ``ask`` (source ``analysis``).
3. Defaults when no rule matched: reads inside the working area allow; read-only shell commands
   from a small known-safe list allow; writes, other shell commands, network and MCP tools ask;
   other tools (todo, team tools, ...) allow.
4. Modes (Claude Code's): ``default`` asks; ``plan`` denies whatever may not run while planning
   (writes, network, non-read-only MCP tools, shell commands off the read-only list, and tools
   whose ``Tool.allowed_in_plan`` is false: team tools are fail-closed and name what planning
   needs, so ``submit_plan`` works); ``acceptEdits`` allows writes inside the working area that
   only the default would have asked about; ``dontAsk`` turns every ask into deny;
   ``bypassPermissions`` turns the remaining asks into allow, except that explicit ask rules
   still ask, deny rules, protected files and paths outside the working area still deny, and an
   ``analysis`` ask is denied when deny rules could be at stake (a ``bash`` deny rule or any
   ``Read`` deny rule exists).

The ``glob`` and ``grep`` tools skip files ``Read`` deny rules cover (``Permissions`` is their
``ReadGuard``, handed over in ``PolicyVerdict.read_guard``), in every mode.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.permissions.paths import (
    PathDenied,
    PathPattern,
    ResolvedPath,
    inside,
    protected_reason,
    real_root,
    resolve,
)
from harness.permissions.rules import SHELL_TOOL, Family, Rule, parse_rules, target_matches
from harness.permissions.shell import ShellVerdict, check_shell
from harness.permissions.verdict import Decision, Verdict, strictest
from harness.settings import PermissionMode, PermissionSettings
from harness.tools.base import PermissionRequest, ToolContext

GRANTED_RULES_KEY = "granted_allow_rules"
"""``ToolContext.extra`` key: a tuple of ``Rule`` that count as allow rules (an active skill's
``allowed-tools``, set by ``harness.context.skills.SkillSession`` for one turn)."""


@dataclass(frozen=True)
class CheckResult:
    """The verdict for a request, plus the shell breakdown when the tool is ``bash``."""

    verdict: Verdict
    shell: ShellVerdict | None = None
    overridable: bool = False
    """True when the verdict is an ``ask`` that a hook's allow or bypass mode may turn into allow."""

    @property
    def decision(self) -> Decision:
        return self.verdict.decision

    @property
    def reason(self) -> str:
        return self.verdict.reason


class Permissions:
    """Rule lists and the default mode, checked against requests (thread-safe: immutable)."""

    def __init__(
        self,
        *,
        allow: Sequence[str] = (),
        ask: Sequence[str] = (),
        deny: Sequence[str] = (),
        mode: PermissionMode = "default",
        home: Path | None = None,
        extra_roots: Sequence[str | Path] = (),
    ) -> None:
        self.allow = parse_rules(list(allow))
        self.ask = parse_rules(list(ask))
        self.deny = parse_rules(list(deny))
        self.mode: PermissionMode = mode
        self.home = home
        self.extra_roots = tuple(str(p) for p in extra_roots)
        """``permissions.additionalDirectories``: more working area (relative to the root)."""

    @classmethod
    def from_settings(
        cls, settings: PermissionSettings, *, mode: PermissionMode | None = None
    ) -> Permissions:
        """Build from the ``permissions`` section; ``mode`` (``--permission-mode``) overrides."""
        return cls(
            allow=settings.allow,
            ask=settings.ask,
            deny=settings.deny,
            mode=mode or settings.default_mode,
            extra_roots=settings.additional_directories,
        )

    def effective_mode(
        self, ctx: ToolContext, mode: PermissionMode | None = None
    ) -> PermissionMode:
        """``ctx.read_only`` (plan approval pending) forces ``plan``."""
        return "plan" if ctx.read_only else (mode or self.mode)

    def with_allow(self, rules: Sequence[Rule]) -> Permissions:
        """A copy with ``rules`` appended to the allow list (deny and ask still come first)."""
        extended = copy.copy(self)
        extended.allow = (*self.allow, *(r for r in rules if r not in self.allow))
        return extended

    def check(
        self, request: PermissionRequest, ctx: ToolContext, *, mode: PermissionMode | None = None
    ) -> CheckResult:
        """Decide ``request`` for ``ctx`` (``ask`` is returned as is: routing is the policy's job).

        Rules under ``ctx.extra[GRANTED_RULES_KEY]`` (an active skill's ``allowed-tools``) count
        as allow rules for this call."""
        granted: tuple[Rule, ...] = ctx.extra.get(GRANTED_RULES_KEY, ())
        if granted and not set(granted) <= set(self.allow):
            return self.with_allow(granted).check(request, ctx, mode=mode)
        effective = self.effective_mode(ctx, mode)
        if request.tool == SHELL_TOOL:
            return self._shell(request, ctx, effective)
        family = _family(request)
        paths = request.paths or (
            (request.target,) if request.target and family is not Family.OTHER else ()
        )
        root = real_root(ctx.root) if paths else ctx.root  # no path: no syscalls to resolve it
        verdicts: list[Verdict] = []
        for raw in paths:
            try:
                rp = resolve(raw, cwd=ctx.cwd, home=self.home)
            except PathDenied as exc:
                return CheckResult(Verdict("deny", str(exc), "path"))
            write = family is Family.WRITE or (family is Family.OTHER and not request.read_only)
            v = self.path_verdict(request.tool, family, rp, root, write=write)
            if v.decision == "deny":
                return CheckResult(v)
            verdicts.append(v)
        if not paths:
            verdicts.append(self._rules_for(request.tool, family, request.target, request))
        verdict = strictest(verdicts)
        return self._apply_mode(verdict, effective, read_only=_read_only(request), family=family)

    def path_verdict(
        self,
        tool: str,
        family: Family,
        rp: ResolvedPath,
        root: Path,
        *,
        write: bool,
    ) -> Verdict:
        """Rules, confinement and protection for one resolved path (``root`` already real).

        ``tool`` ``""`` checks only the file rules (``Read``/``Edit``/``Write``), for shell parts.
        """
        forms, real = rp.forms(), rp.real
        areas = self.areas(root)
        if write:
            for area in areas:
                why = protected_reason(rp, area)
                if why is not None:
                    return Verdict("deny", why, "path")
        if family is Family.READ and os.path.isdir(real):
            # Searching a directory reads what is inside: a rule on its contents applies.
            forms = (*forms, *(f / "_" for f in forms))
        for rule in self.deny:
            if rule.covers(tool, family) and self._path_match(rule, forms, root):
                return Verdict("deny", f"denied by rule {rule.raw}", "rule", rule.raw)
        if not any(inside(real, area) for area in areas):
            explicit = next(
                (r for r in self.allow if r.specifier and r.covers(tool, family)
                 and self._path_match(r, (real,), root)),
                None,
            )  # fmt: skip
            if write or explicit is None:
                return Verdict("deny", f"{real} is outside the working root {root}", "path")
        for rule in self.ask:
            if rule.covers(tool, family) and self._path_match(rule, forms, root):
                return Verdict("ask", f"rule {rule.raw} asks for approval", "rule", rule.raw)
        for rule in self.allow:
            if rule.covers(tool, family) and self._path_match(rule, (real,), root):
                return Verdict("allow", f"allowed by rule {rule.raw}", "rule", rule.raw)
        if write:
            return Verdict("ask", f"writing {_rel(real, root)} needs approval")
        return Verdict("allow", "read inside the working root")

    def areas(self, root: Path) -> tuple[Path, ...]:
        """The working root and the ``additionalDirectories`` (real paths; relative ones are
        taken from the root, ``~`` from the home directory)."""
        extra: list[Path] = []
        for raw in self.extra_roots:
            if raw == "~" or raw.startswith("~/"):
                raw = str(self.home or Path.home()) + raw[1:]
            extra.append(real_root(root / raw))
        return (root, *extra)

    @property
    def has_read_deny(self) -> bool:
        """A deny rule covers some file reads (``Read(...)``), so shell reads are checked too."""
        return any(r.covers("", Family.READ) for r in self.deny)

    def read_rule(self, tool: str, rp: ResolvedPath, root: Path) -> Rule | None:
        """The first deny rule that forbids ``tool`` to read ``rp`` (``""``: any reading command;
        only ``Read`` rules apply), in or out of the working root."""
        for rule in self.deny:
            if rule.covers(tool, Family.READ) and self._path_match(rule, rp.forms(), root):
                return rule
        return None

    def denied_read(self, tool: str, path: Path, ctx: ToolContext) -> str | None:
        """``ReadGuard``: the deny rule that keeps ``tool`` from reading ``path``, or ``None``.

        The search tools skip such files (``harness.tools.search``), in every mode."""
        try:
            rp = resolve(str(path), cwd=ctx.cwd, home=self.home)
        except PathDenied as exc:
            return str(exc)
        rule = self.read_rule(tool, rp, real_root(ctx.root))
        return None if rule is None else rule.raw

    def denied_below(self, tool: str, directory: Path, root: Path) -> TreeScan:
        """Whether a deny rule covers a file or directory below ``directory`` (a real path): a
        command that reads the whole tree (``grep -r``) would read it. ``.git`` is not entered
        (it holds packed objects and is never an agent's to write); symlinked directories are
        not followed, a symlinked file is checked under its name and its target."""
        rules = [r for r in self.deny if r.covers(tool, Family.READ)]
        for rule in rules:
            if rule.specifier is None:
                return TreeScan(rule)
        starts: dict[Path, list[tuple[Rule, PathPattern]]] = {}
        for rule in rules:
            assert rule.specifier is not None
            pattern = PathPattern.parse(rule.specifier, root=root, home=self.home)
            fixed = pattern.fixed_part()
            if inside(fixed, directory):
                if pattern.glob_free():
                    if os.path.lexists(fixed):
                        return TreeScan(rule)
                    continue
                starts.setdefault(fixed, []).append((rule, pattern))
            elif inside(directory, fixed):
                starts.setdefault(directory, []).append((rule, pattern))
        seen = 0
        for start, patterns in starts.items():
            for dirpath, dirnames, filenames in os.walk(start):
                here = Path(dirpath)
                dirnames[:] = [d for d in dirnames if d != ".git"]
                for name in (*dirnames, *filenames):
                    seen += 1
                    if seen > MAX_SCAN:
                        return TreeScan(None, complete=False)
                    path = here / name
                    forms = (path, Path(os.path.realpath(path))) if path.is_symlink() else (path,)
                    for rule, pattern in patterns:
                        if any(pattern.matches(f) for f in forms):
                            return TreeScan(rule)
        return TreeScan(None)

    def _path_match(self, rule: Rule, forms: tuple[Path, ...], root: Path) -> bool:
        if rule.specifier is None:
            return True
        pattern = PathPattern.parse(rule.specifier, root=root, home=self.home)
        return any(pattern.matches(f) for f in forms)

    def _rules_for(
        self, tool: str, family: Family, target: str | None, request: PermissionRequest
    ) -> Verdict:
        def hit(rule: Rule) -> bool:
            if not rule.covers(tool, family):
                return False
            if rule.specifier is None:
                return True
            return target is not None and target_matches(rule.specifier, target)

        lists: tuple[tuple[tuple[Rule, ...], Decision], ...] = (
            (self.deny, "deny"),
            (self.ask, "ask"),
            (self.allow, "allow"),
        )
        for lst, decision in lists:
            for rule in lst:
                if hit(rule):
                    return Verdict(decision, f"{decision} rule {rule.raw}", "rule", rule.raw)
        if request.kind == "network" or tool.startswith("mcp__"):
            return Verdict("ask", f"{tool} needs approval")
        if request.kind == "write":
            return Verdict("ask", f"{tool} writes and needs approval")
        return Verdict("allow", "no rule applies")

    def _shell(
        self, request: PermissionRequest, ctx: ToolContext, mode: PermissionMode
    ) -> CheckResult:
        command = request.target or ""
        sv = check_shell(self, command, ctx)
        v = sv.verdict
        # An unanalysed part might be a command a deny rule forbids, or read a denied file.
        guarded = self.has_read_deny or any(r.covers(SHELL_TOOL, Family.SHELL) for r in self.deny)
        overridable = v.decision == "ask" and (
            v.source == "default" or (v.source == "analysis" and not guarded)
        )
        if v.decision == "deny":
            return CheckResult(v, sv)
        if mode == "plan" and not sv.read_only:
            return CheckResult(
                Verdict("deny", "plan mode allows only read-only commands", "mode"), sv
            )
        if mode == "bypassPermissions":
            if v.decision == "ask" and v.source == "analysis" and guarded:
                why = f"{v.reason}; it might run a command or read a file a deny rule forbids"
                return CheckResult(Verdict("deny", why, "mode"), sv)
            if v.decision == "ask" and v.source == "rule":
                return CheckResult(v, sv)  # an explicit ask rule asks in every mode
            return CheckResult(Verdict("allow", "bypassPermissions mode", "mode"), sv)
        if mode == "acceptEdits" and v.decision == "ask" and sv.only_edits_ask:
            return CheckResult(Verdict("allow", "acceptEdits mode", "mode"), sv)
        if mode == "dontAsk" and v.decision == "ask":
            return CheckResult(Verdict("deny", f"{v.reason} (dontAsk mode)", "mode"), sv)
        return CheckResult(v, sv, overridable=overridable)

    def _apply_mode(
        self, v: Verdict, mode: PermissionMode, *, read_only: bool, family: Family
    ) -> CheckResult:
        if v.decision == "deny":
            return CheckResult(v)
        if mode == "plan" and not read_only:
            return CheckResult(Verdict("deny", "plan mode allows only read-only tools", "mode"))
        if mode == "bypassPermissions":
            if v.decision == "ask" and v.source == "rule":
                return CheckResult(v)  # an explicit ask rule asks in every mode
            return CheckResult(Verdict("allow", "bypassPermissions mode", "mode"))
        if (
            mode == "acceptEdits"
            and v.decision == "ask"
            and v.source == "default"
            and (family is Family.WRITE)
        ):
            return CheckResult(Verdict("allow", "acceptEdits mode", "mode"))
        if mode == "dontAsk" and v.decision == "ask":
            return CheckResult(Verdict("deny", f"{v.reason} (dontAsk mode)", "mode"))
        return CheckResult(v, overridable=v.decision == "ask" and v.source == "default")


MAX_SCAN = 20_000
"""Entries ``denied_below`` looks at before giving up (the command then counts as unanalysed)."""


@dataclass(frozen=True)
class TreeScan:
    """What ``Permissions.denied_below`` found: a deny rule covering something in the tree, or
    none; ``complete`` is False when the tree was too large to look at whole."""

    rule: Rule | None
    complete: bool = True


def _family(request: PermissionRequest) -> Family:
    if request.kind == "read":
        return Family.READ
    if request.kind == "write":
        return Family.WRITE
    if request.kind == "shell":
        return Family.SHELL
    return Family.OTHER


def _read_only(request: PermissionRequest) -> bool:
    if request.tool.startswith("mcp__") or request.kind in ("write", "network", "shell"):
        return request.read_only and request.kind not in ("write", "shell")
    # Other tools (todo, team tools, ``task``) say themselves whether planning may use them
    # (``Tool.allowed_in_plan``): a tool that does not say so is refused in plan mode.
    return request.kind == "read" or request.read_only


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if inside(path, root) else str(path)
