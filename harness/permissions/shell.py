"""Permission checks for a shell command: every part found by ``harness.shell.parse`` on its own.

A part is a simple command (matched against ``Bash(...)`` rules on every wrapper layer, then the
read-only list), a redirection target (checked as a file write or read) or a file argument of a
read-only command (checked as a read). The strictest part decides.

While a ``Read`` deny rule exists, every command's file operands are checked against it, in or
outside the root (``_denied_reads``): ``cat .env``, ``cat .en*`` (a glob is expanded against the
files there now, braces too), ``grep -r x .``, ``rg x``, ``git grep``, ``cp -r``, ``tar`` over a
directory holding a denied file, ``cat ~/.ssh/id_rsa``. Commands that only list names (``ls``,
``find``, ``stat``, ...) may show a denied file's name, never its content. A content reader whose
file is only known at run time (``cat $F``, ``xargs cat``, ``find -exec cat``) is an ``ask`` that
``bypassPermissions`` refuses. As in Claude Code, a program that opens files itself (a script)
is not covered: the sandbox is the boundary there.

A command that is not read-only is also refused when its arguments name a protected control file
(``harness.permissions.paths.PROTECTED_PATTERNS``: ``.git`` config and hooks, ``.team``,
``.mcp.json``, ``.claude`` settings: the files which make the next process run code), e.g.
``cp x .git/hooks/y``, ``sed -i .git/config``, ``tar -C .git/hooks``, or when it is a git
subcommand that writes configuration (``git config k v``, ``git remote add``, ``git init``):
``touches_control_files``."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.permissions.paths import PathDenied, inside, protected_reason, real_root, resolve
from harness.permissions.rules import SHELL_TOOL, CommandPattern, Family, Match
from harness.permissions.verdict import Verdict, strictest
from harness.shell.parse import ShellAnalysis, SimpleCommand, Word, analyse, command_name
from harness.tools.base import ToolContext

if TYPE_CHECKING:
    from harness.permissions.checks import Permissions

_PURE = frozenset(
    [
        "echo",
        "printf",
        "true",
        "false",
        "pwd",
        "date",
        "whoami",
        "id",
        "uname",
        "which",
        "type",
        "basename",
        "dirname",
        "seq",
        "test",
        "[",
        "hostname",
        "nproc",
        "sleep",
        ":",
        "command",
    ]
)
_READERS = frozenset(
    [
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "find",
        "tree",
        "file",
        "stat",
        "du",
        "df",
        "diff",
        "cmp",
        "sort",
        "cut",
        "nl",
        "realpath",
        "readlink",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "cksum",
        "tac",
        "uniq",
        "column",
        "tr",
    ]
)
_PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg"})
_FORBIDDEN: dict[str, frozenset[str]] = {
    "find": frozenset(
        ["-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"]
    ),
    "sort": frozenset({"-o", "--output"}),
    "rg": frozenset({"--pre", "--pre-glob"}),
    "tree": frozenset({"-o"}),
    "date": frozenset({"-s", "--set"}),
}
_GIT_READ = frozenset(
    [
        "status",
        "log",
        "diff",
        "show",
        "rev-parse",
        "ls-files",
        "blame",
        "describe",
        "shortlog",
        "grep",
    ]
)
_GIT_FORBIDDEN = frozenset({"--output", "-O", "--open-files-in-pager", "--ext-diff"})
_DEV_OK = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


@dataclass(frozen=True)
class CommandVerdict:
    """The verdict for one part of a command line (a simple command or a redirection)."""

    part: str
    argv: tuple[str, ...]
    redirects: tuple[str, ...]
    verdict: Verdict


@dataclass(frozen=True)
class ShellVerdict:
    """Per-part verdicts, the overall one, and the facts modes need."""

    analysis: ShellAnalysis
    parts: tuple[CommandVerdict, ...]
    verdict: Verdict
    read_only: bool
    """Every command is on the read-only list, nothing is written, everything was analysed."""
    only_edits_ask: bool
    """Every ``ask`` comes from a default file write inside the root (``acceptEdits`` allows)."""


def check_shell(perms: Permissions, command: str, ctx: ToolContext) -> ShellVerdict:
    """Check ``command`` as ``ctx.agent`` would run it in ``ctx.cwd``."""
    analysis = analyse(command)
    root = real_root(ctx.root)
    parts: list[CommandVerdict] = []
    # A command flagged no-auto-allow (eval, BASH_ENV=..., sudo) is never read-only: plan mode
    # must not pass it on to an approver as if it only read.
    read_only = analysis.reducible and not analysis.git_overrides and not analysis.no_auto_allow

    def add(part: str, v: Verdict, argv: tuple[str, ...] = (), reds: tuple[str, ...] = ()) -> None:
        parts.append(CommandVerdict(part, argv, reds, v))

    for problem in analysis.problems:
        add(problem, Verdict("ask", f"cannot fully analyse the command: {problem}", "analysis"))
    for why in analysis.no_auto_allow:
        add(why, Verdict("ask", f"the command uses {why}; it needs approval", "analysis"))
    for override in analysis.git_overrides:
        add(override, Verdict("ask", f"{override} points git elsewhere", "analysis"))
    cwd: Path | None = ctx.cwd
    for cmd in analysis.commands:
        v, cmd_read_only, cwd = _command_verdict(perms, cmd, root, cwd, ctx)
        read_only = read_only and cmd_read_only
        add(
            cmd.display(),
            v,
            tuple(w.text for w in cmd.argv),
            tuple(f"{r.op} {r.target.text}" for r in cmd.redirects),
        )
    for red in analysis.redirects:
        if red.target.text in _DEV_OK or red.target.text.startswith("/dev/fd/"):
            continue
        label = f"{red.op} {red.target.text}"
        read_only = read_only and not red.write
        if red.target.dynamic or red.target.glob:
            add(
                label,
                Verdict(
                    "ask",
                    f"redirection target {red.target.text!r} is only known at run time",
                    "analysis",
                ),
            )
            continue
        try:
            rp = resolve(red.target.text, cwd=cwd or ctx.cwd, home=perms.home)
        except PathDenied as exc:
            add(label, Verdict("deny", str(exc), "path"))
            continue
        fam = Family.WRITE if red.write else Family.READ
        add(label, perms.path_verdict("", fam, rp, root, write=red.write), reds=(label,))
    verdict = strictest(p.verdict for p in parts)
    asks = [p for p in parts if p.verdict.decision == "ask"]
    redirect_labels = {f"{r.op} {r.target.text}" for r in analysis.redirects if r.write}
    only_edits = bool(asks) and all(
        p.part in redirect_labels and p.verdict.source == "default" for p in asks
    )
    return ShellVerdict(analysis, tuple(parts), verdict, read_only, only_edits)


def _command_verdict(
    perms: Permissions, cmd: SimpleCommand, root: Path, cwd: Path | None, ctx: ToolContext
) -> tuple[Verdict, bool, Path | None]:
    """(verdict, read-only?, cwd after the command) for one simple command."""
    maybe: str | None = None
    layers = cmd.layers or (cmd.argv,)
    for rule in perms.deny:
        if not rule.covers(SHELL_TOOL, Family.SHELL):
            continue
        if rule.specifier is None:
            return Verdict("deny", f"denied by rule {rule.raw}", "rule", rule.raw), False, cwd
        pattern = CommandPattern.parse(rule.specifier)
        for layer in layers:
            m = pattern.match(cmd.words(layer))
            if m is Match.YES:
                why = f"`{_show(layer)}` is denied by rule {rule.raw}"
                return Verdict("deny", why, "rule", rule.raw), False, cwd
            if m is Match.MAYBE and maybe is None:
                maybe = rule.raw
    reads = _denied_reads(perms, cmd, root, cwd) if perms.has_read_deny else None
    if reads is not None and reads.decision == "deny":
        return reads, False, cwd
    v, read_only, next_cwd = _rules_verdict(perms, cmd, root, cwd, ctx, layers, maybe)
    if reads is not None and v.decision != "deny":
        v = reads  # an ask that no allow rule or mode may answer for the approver
    return v, read_only, next_cwd


def _rules_verdict(
    perms: Permissions,
    cmd: SimpleCommand,
    root: Path,
    cwd: Path | None,
    ctx: ToolContext,
    layers: tuple[tuple[Word, ...], ...],
    maybe: str | None,
) -> tuple[Verdict, bool, Path | None]:
    """The command's verdict once no deny rule matched it: read-only list, control files, the
    rule that might match, ask and allow rules (allow only past assignments it names)."""
    read_only, next_cwd, arg_verdict = _read_only_check(perms, cmd, root, cwd, ctx)
    if arg_verdict.decision == "deny":
        return arg_verdict, False, next_cwd
    if not read_only:
        control = touches_control_files(perms.home, cmd, root, cwd or ctx.cwd)
        if control is not None:
            return Verdict("deny", control, "path"), False, next_cwd
    if maybe is not None:
        why = (
            f"`{cmd.display()}` has parts only known at run time and might match deny rule {maybe}"
        )
        return Verdict("ask", why, "analysis", maybe), False, next_cwd
    for rule in perms.ask:
        if rule.covers(SHELL_TOOL, Family.SHELL) and (
            rule.specifier is None
            or any(
                CommandPattern.parse(rule.specifier).match(cmd.words(layer)) is not Match.NO
                for layer in layers
            )
        ):
            return (
                Verdict("ask", f"rule {rule.raw} asks for approval", "rule", rule.raw),
                read_only,
                next_cwd,
            )
    for rule in perms.allow:
        if rule.covers(SHELL_TOOL, Family.SHELL) and (
            rule.specifier is None
            or CommandPattern.parse(rule.specifier).match(_allow_words(cmd)) is Match.YES
        ):
            return (
                Verdict("allow", f"allowed by rule {rule.raw}", "rule", rule.raw),
                read_only,
                next_cwd,
            )
    if read_only:
        return arg_verdict, True, next_cwd
    if arg_verdict.decision == "ask":
        return arg_verdict, False, next_cwd
    return Verdict("ask", f"`{cmd.display()}` needs approval"), False, next_cwd


def _allow_words(cmd: SimpleCommand) -> tuple[str | None, ...]:
    """The words an allow rule must match: the command after the wrappers Claude Code strips,
    with the variables it is given in front (``FOO=1 docker ps``, ``env FOO=1 docker ps``), so
    ``Bash(docker ps:*)`` does not allow ``DOCKER_HOST=evil docker ps``. Deny and ask rules
    match past the assignments (they are matched against ``cmd.words``)."""
    given: list[str | None] = [w.literal for w in cmd.assignments]
    for layer in cmd.layers[:-1]:
        if layer and command_name(layer[0].text) == "env":
            given += [w.literal for w in layer[1:] if w.dynamic or "=" in w.text]
    return (*given, *cmd.words())


# --- reads of files a deny rule covers --------------------------------------------------------

_NAME_ONLY = frozenset({"ls", "find", "tree", "stat", "du", "df", "realpath", "readlink", "cd"})
"""Commands that show names or sizes, never contents (their path operands are still checked as
reads by ``_args_verdict``, so ``ls secrets`` is refused under ``Read(./secrets/**)``)."""
_CONTENT_READERS = (_READERS - _NAME_ONLY) | frozenset(
    {"sed", "awk", "gawk", "mawk", "less", "more", "xxd", "od", "hexdump", "strings", "base64",
     "base32", "cp", "scp", "rsync", "tar", "zip", "dd", "iconv", "jq", "yq", "paste", "join",
     "fold", "rev", "zcat", "gzip", "bzip2", "xz", "openssl", "gpg", "curl", "vi", "vim", "nano",
     "ag", "ack", "git", "bat", "source"}
)  # fmt: skip
"""Commands that show or copy a file's content: a file operand only known at run time might be
a denied file."""
_TREE_READERS = frozenset({"rg", "ag", "ack", "tar"})
"""Commands that read every file under a directory operand."""
_RECURSIVE_FLAGS: dict[str, str] = {
    "grep": "rR", "egrep": "rR", "fgrep": "rR", "cp": "rRa", "scp": "r", "rsync": "ra",
    "diff": "r", "zip": "r",
}  # fmt: skip
"""Commands that read a directory operand whole with one of these short flags (or
``--recursive``, ``--dereference-recursive``, ``--archive``, ``-d recurse``)."""
_VALUED = frozenset(
    {"-e", "--regexp", "-m", "--max-count", "-A", "-B", "-C", "--after-context",
     "--before-context", "--context", "--include", "--exclude", "--exclude-dir", "-d",
     "--directories", "-D", "--devices", "--label", "-t", "--type", "-g", "--glob", "-T",
     "--type-not", "--color", "--colour"}
)  # fmt: skip
"""Options of the grep family whose value is not a file."""
MAX_GLOB_MATCHES = 5000


def _denied_reads(
    perms: Permissions, cmd: SimpleCommand, root: Path, cwd: Path | None
) -> Verdict | None:
    """Deny when the command names a file a ``Read`` deny rule covers (in or outside the root;
    through a glob that matches one now; or under a directory it reads whole); ``ask`` (source
    ``analysis``, which ``bypassPermissions`` and ``dontAsk`` refuse) when a content reader's
    file is only known at run time. ``None``: nothing it names is denied."""
    name = cmd.name
    if name in _PURE or name in _NAME_ONLY or not cmd.argv:
        return None
    shown = cmd.display()
    reader = name in _CONTENT_READERS
    recursive, operands = _operands(name, cmd.argv[1:])
    unknown: str | None = None
    for w in operands:
        if w.dynamic:
            unknown = unknown or f"`{shown}` reads {w.text!r}, only known at run time"
            continue
        values = [w.text]
        if w.text.startswith("-"):
            values = [w.text.split("=", 1)[1]] if "=" in w.text else []
        values += [v[1:] for v in values if v.startswith("@")]  # curl -d @file
        for value in values:
            if not value.startswith(("/", "~")) and cwd is None:
                unknown = unknown or f"`{shown}`: the directory is only known at run time"
                continue
            v, more = _denied_value(perms, shown, value, w.glob, recursive, root, cwd or root)
            if v is not None:
                return v
            unknown = unknown or more
    if recursive and not any(not w.text.startswith("-") for w in operands) and cwd is not None:
        v, more = _denied_value(perms, shown, ".", False, True, root, cwd)
        if v is not None:
            return v
        unknown = unknown or more
    if unknown is not None and reader:
        why = f"{unknown}; it might be a file a deny rule forbids reading"
        return Verdict("ask", why, "analysis")
    return None


def _operands(name: str, args: tuple[Word, ...]) -> tuple[bool, list[Word]]:
    """(reads directory operands whole?, the words that may name files: not a grep pattern,
    not the value of an option that takes no file)."""
    if name == "git":
        sub = args[0].literal if args else None
        return sub == "grep", ([] if sub == "grep" else list(args[1:]))
    searcher = name in _PATTERN_FIRST or name in ("rg", "ag", "ack")
    flags = _RECURSIVE_FLAGS.get(name, "")
    recursive = name in _TREE_READERS
    pattern_pending = searcher
    out: list[Word] = []
    i = 0
    while i < len(args):
        w, t = args[i], args[i].text
        i += 1
        if w.dynamic or not t.startswith("-") or t == "-":
            if pattern_pending:
                pattern_pending = False  # grep PATTERN FILE...: the first operand is no file
            else:
                out.append(w)
            continue
        if t in ("-e", "--regexp", "-f", "--file"):
            pattern_pending = False
        if searcher and t in _VALUED:
            recursive = recursive or (t in ("-d", "--directories") and args[i : i + 1] != ()
                                      and args[i].text == "recurse")  # fmt: skip
            i += 1
            continue
        long = t.split("=", 1)[0]
        if long in ("--recursive", "--dereference-recursive", "--archive") and flags:
            recursive = True
        if t == "--directories=recurse" or (not t.startswith("--") and set(t[1:]) & set(flags)):
            recursive = True
        out.append(w)
    return recursive, out


def _denied_value(
    perms: Permissions,
    shown: str,
    value: str,
    is_glob: bool,
    recursive: bool,
    root: Path,
    cwd: Path,
) -> tuple[Verdict | None, str | None]:
    """(deny, or None; why the value could not be checked fully, or None) for one operand."""
    if is_glob:
        paths, complete = _glob_matches(value, cwd, perms.home)
        more = None if complete else f"`{shown}`: {value!r} matches too many files to check"
    else:
        paths, more = [value], None
    for path in paths:
        try:
            rp = resolve(path, cwd=cwd, home=perms.home)
        except PathDenied:
            continue
        rule = perms.read_rule("", rp, root)
        if rule is not None:
            what = f"{value!r} matches a file" if is_glob else f"it reads {value}, which"
            why = f"`{shown}`: {what} deny rule {rule.raw} forbids reading"
            return Verdict("deny", why, "rule", rule.raw), None
        if recursive and os.path.isdir(rp.real):
            scan = perms.denied_below("", rp.real, root)
            if scan.rule is not None:
                why = (
                    f"`{shown}` reads every file under {path} and deny rule {scan.rule.raw} "
                    "covers some of them; use the grep tool (it skips files deny rules cover) "
                    "or name the files to read"
                )
                return Verdict("deny", why, "rule", scan.rule.raw), None
            if not scan.complete:
                more = more or f"`{shown}` reads more files under {path} than can be checked"
    return None, more


def _glob_matches(pattern: str, cwd: Path, home: Path | None) -> tuple[list[str], bool]:
    """What an unquoted glob word expands to now (dot files included, as a superset of what
    the shell would pass), and whether the list is complete."""
    if pattern == "~" or pattern.startswith("~/"):
        pattern = str(home or Path.home()) + pattern[1:]
    found: list[str] = []
    for alternative in _braces(pattern):
        if ".." in alternative and "{" in alternative:
            return found, False  # a sequence expression ({1..9}): not expanded here
        for match in glob.iglob(alternative, root_dir=cwd, include_hidden=True):
            found.append(match)
            if len(found) > MAX_GLOB_MATCHES:
                return found, False
        if not any(c in alternative for c in "*?["):
            found.append(alternative)  # a brace alternative names a file whether it exists or not
    return found, True


def _braces(text: str) -> list[str]:
    """Bash brace expansion of ``{a,b}`` alternatives (nested too)."""
    depth, start = 0, -1
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                body, parts, level, last = text[start + 1 : i], [], 0, 0
                for j, d in enumerate(body):
                    level += (d == "{") - (d == "}")
                    if d == "," and level == 0:
                        parts.append(body[last:j])
                        last = j + 1
                if not parts:
                    continue
                parts.append(body[last:])
                head, tail = text[:start], text[i + 1 :]
                return [x for p in parts for x in _braces(head + p + tail)]
    return [text]


def _read_only_check(
    perms: Permissions, cmd: SimpleCommand, root: Path, cwd: Path | None, ctx: ToolContext
) -> tuple[bool, Path | None, Verdict]:
    """Is the command on the read-only list; the cwd after it; the verdict for its file args."""
    ok = Verdict("allow", f"`{cmd.display()}` is read-only")
    name = cmd.name
    args = cmd.argv[1:]
    if cmd.wrappers or cmd.via.startswith(("find", "eval")) or not cmd.argv:
        return False, cwd, ok
    if name == "cd":
        target = args[0] if args else Word(str(perms.home or Path.home()))
        if target.dynamic or len(args) > 1:
            return False, None, Verdict("ask", "cd to a directory only known at run time")
        try:
            rp = resolve(target.text, cwd=cwd or ctx.cwd, home=perms.home)
        except PathDenied as exc:
            return False, None, Verdict("deny", str(exc), "path")
        if not any(inside(rp.real, area) for area in perms.areas(root)):
            return False, None, Verdict("ask", f"cd leaves the working root ({rp.real})")
        return True, rp.real, ok
    if name == "git":
        sub = args[0].literal if args else None
        flags = [w.literal for w in args[1:]]
        if sub is None or any(f is None or f.split("=", 1)[0] in _GIT_FORBIDDEN for f in flags):
            return False, cwd, ok
        if sub in _GIT_READ:
            return True, cwd, ok
        if sub == "branch" and all(
            f in ("-a", "-r", "-v", "-vv", "--list", "-l", "--show-current") for f in flags
        ):
            return True, cwd, ok
        if sub == "remote" and all(f == "-v" for f in flags):
            return True, cwd, ok
        return False, cwd, ok
    forbidden = _FORBIDDEN.get(name, frozenset())  # before _PURE: `date --set` is no read
    if any(w.dynamic is False and w.text.split("=", 1)[0] in forbidden for w in args):
        return False, cwd, ok
    if name in _PURE:
        if name == "command" and not any(w.text in ("-v", "-V") for w in args[:1]):
            return False, cwd, ok
        return True, cwd, ok
    if name not in _READERS:
        return False, cwd, ok
    return True, cwd, _args_verdict(perms, name, args, root, cwd, ok)


def _args_verdict(
    perms: Permissions, name: str, args: tuple[Word, ...], root: Path, cwd: Path | None, ok: Verdict
) -> Verdict:
    positional = [w for w in args if w.dynamic or not w.text.startswith("-")]
    if name == "find":
        positional = []
        for w in args:
            if not w.dynamic and w.text.startswith(("-", "(", "!")):
                break
            positional.append(w)
    elif name in _PATTERN_FIRST or name == "rg":
        operands = _operands(name, args)[1]
        positional = [w for w in operands if w.dynamic or not w.text.startswith("-")]
    worst = ok
    for w in positional:
        if w.dynamic:
            return Verdict("ask", f"`{name}` reads {w.text!r}, only known at run time")
        text = w.text
        if w.glob:
            head = text[: min(i for i, c in enumerate(text) if c in "*?[{")]
            text = head.rsplit("/", 1)[0] if "/" in head else "."
        if cwd is None and not text.startswith(("/", "~")):
            return Verdict("ask", f"`{name} {w.text}`: the directory is only known at run time")
        try:
            rp = resolve(text or "/", cwd=cwd or root, home=perms.home)
        except PathDenied as exc:
            return Verdict("deny", str(exc), "path")
        if not any(inside(rp.real, area) for area in perms.areas(root)):
            worst = worst.stricter(
                Verdict("ask", f"`{name}` reads {rp.real}, outside the working root")
            )
            continue
        worst = worst.stricter(perms.path_verdict("", Family.READ, rp, root, write=False))
    return worst


def _show(layer: tuple[Word, ...]) -> str:
    return " ".join(w.text for w in layer)


# --- protected control files named by a command's arguments -------------------------------


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
    action = next((r for r in rest if not r.startswith("-")), None)  # `git remote -v add`
    if sub in _GIT_CONFIG_WRITERS and action in _GIT_CONFIG_WRITERS[sub]:
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
