"""Permission decisions: rules, modes, path confinement and shell analysis for one tool call.

Order (the first step that decides, decides):

1. Paths: every path of the request is resolved; a NUL byte or a symlink loop is denied; a write
   to a protected control file (``harness.permissions.paths.PROTECTED_PATTERNS``) is denied in every mode; a
   write outside the root is denied; a read outside the root is denied unless an allow rule names
   it explicitly.
2. Rules: deny > ask > allow (the first matching rule of a list is the one reported). For
   ``bash`` every simple command, redirection and file argument found by ``harness.shell.parse`` is
   checked on its own (``harness.permissions.shell``) and the strictest answer wins; a rule that
   might match a word known only at run time counts as ``ask``; anything the analyser cannot
   reduce is ``ask``.
3. Defaults when no rule matched: reads inside the root allow; read-only shell commands from a
   small known-safe list allow; writes, other shell commands, network and MCP tools ask; other
   tools (todo, team tools, ...) allow.
4. Modes: ``plan`` denies whatever is not read-only (writes, network, non-read-only MCP tools,
   shell commands off the read-only list; other tools such as ``todo_write`` or team tools pass,
   so ``submit_plan`` works); ``acceptEdits`` allows writes inside the root
   that only the default would have asked about; ``dontAsk`` turns ask into deny;
   ``bypassPermissions`` turns ask into allow, except protected files, paths outside the root and
   deny rules, which still deny, and a shell command that cannot be fully analysed while ``bash``
   deny rules exist, which is denied (it might be one of them).
"""

from __future__ import annotations

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
from harness.permissions.rules import SHELL_TOOL, Family, Rule, parse_rules
from harness.permissions.shell import ShellVerdict, check_shell
from harness.permissions.verdict import Decision, Verdict, strictest
from harness.settings import PermissionMode, PermissionSettings
from harness.tools.base import PermissionRequest, ToolContext


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
    ) -> None:
        self.allow = parse_rules(list(allow))
        self.ask = parse_rules(list(ask))
        self.deny = parse_rules(list(deny))
        self.mode: PermissionMode = mode
        self.home = home

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
        )

    def effective_mode(
        self, ctx: ToolContext, mode: PermissionMode | None = None
    ) -> PermissionMode:
        """``ctx.read_only`` (plan approval pending) forces ``plan``."""
        return "plan" if ctx.read_only else (mode or self.mode)

    def check(
        self, request: PermissionRequest, ctx: ToolContext, *, mode: PermissionMode | None = None
    ) -> CheckResult:
        """Decide ``request`` for ``ctx`` (``ask`` is returned as is: routing is the policy's job)."""
        effective = self.effective_mode(ctx, mode)
        if request.tool == SHELL_TOOL:
            return self._shell(request, ctx, effective)
        family = _family(request)
        root = real_root(ctx.root)
        paths = request.paths or (
            (request.target,) if request.target and family is not Family.OTHER else ()
        )
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
        if write:
            why = protected_reason(rp, root)
            if why is not None:
                return Verdict("deny", why, "path")
        if family is Family.READ and os.path.isdir(real):
            # Searching a directory reads what is inside: a rule on its contents applies.
            forms = (*forms, *(f / "_" for f in forms))
        for rule in self.deny:
            if rule.covers(tool, family) and self._path_match(rule, forms, root):
                return Verdict("deny", f"denied by rule {rule.raw}", "rule", rule.raw)
        outside = not inside(real, root)
        if outside:
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

    def _path_match(self, rule: Rule, forms: tuple[Path, ...], root: Path) -> bool:
        if rule.specifier is None:
            return True
        pattern = PathPattern.parse(rule.specifier, root=root, home=self.home)
        return any(pattern.matches(f) for f in forms)

    def _rules_for(
        self, tool: str, family: Family, target: str | None, request: PermissionRequest
    ) -> Verdict:
        import fnmatch

        def hit(rule: Rule) -> bool:
            if not rule.covers(tool, family):
                return False
            if rule.specifier is None:
                return True
            return target is not None and fnmatch.fnmatchcase(target, rule.specifier)

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
        has_bash_deny = any(r.covers(SHELL_TOOL, Family.SHELL) for r in self.deny)
        overridable = v.decision == "ask" and (
            v.source == "default" or (v.source == "analysis" and not has_bash_deny)
        )
        if v.decision == "deny":
            return CheckResult(v, sv)
        if mode == "plan" and not sv.read_only:
            return CheckResult(
                Verdict("deny", "plan mode allows only read-only commands", "mode"), sv
            )
        if mode == "bypassPermissions":
            if v.decision == "ask" and v.source == "analysis" and has_bash_deny:
                why = f"{v.reason}; it might run a command a deny rule forbids"
                return CheckResult(Verdict("deny", why, "mode"), sv)
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
    return request.kind == "read" or request.read_only or request.kind == "other"


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if inside(path, root) else str(path)
