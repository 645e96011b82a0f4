"""Values and word evaluation for the shell analyser (``harness.shell.parse``).

A ``Word`` is one shell word after quote removal, marked ``dynamic`` when part of it is only
known at run time; the wrapper table says how each command-running wrapper takes its options.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

MAX_DEPTH = 6
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "mksh", "ash"})
DANGEROUS_VARS = frozenset(
    {"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "IFS", "SHELLOPTS",
     "BASHOPTS", "PS4", "PROMPT_COMMAND", "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS",
     "PERL5OPT", "RUBYOPT", "PAGER", "EDITOR", "VISUAL"}
)  # fmt: skip
GIT_VARS_PREFIX = "GIT_"
RESERVED = frozenset(
    {"{", "}", "!", "if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until",
     "do", "done", "function", "select", "[[", "]]", "in"}
)  # fmt: skip
WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


@dataclass(frozen=True)
class _Spec:
    """How a wrapper takes its options: which take a value, how many operands precede the command."""

    valued: frozenset[str] = frozenset()
    operands: int = 0
    numeric_flags: bool = False


def _opts(text: str) -> frozenset[str]:
    return frozenset(text.split())


WRAPPERS: dict[str, _Spec] = {
    "nohup": _Spec(),
    "time": _Spec(),
    "coproc": _Spec(),
    "setsid": _Spec(),
    "builtin": _Spec(),
    "command": _Spec(),
    "nice": _Spec(_opts("-n --adjustment"), numeric_flags=True),
    "timeout": _Spec(_opts("-s --signal -k --kill-after"), operands=1),
    "stdbuf": _Spec(_opts("-i -o -e --input --output --error")),
    "ionice": _Spec(_opts("-c -n -p -P -u --class --classdata")),
    "exec": _Spec(_opts("-a")),
    "sudo": _Spec(
        _opts(
            "-u -g -C -D -h -p -r -t -U -T --user --group --chdir --prompt --role --type"
            " --other-user --close-from --command-timeout --host"
        )
    ),
    "doas": _Spec(_opts("-u -C")),
    "xargs": _Spec(
        _opts(
            "-I -n -P -d -E -L -s -a --arg-file --delimiter --max-args --max-procs --replace"
            " --max-lines --max-chars --eof --process-slot-var"
        )
    ),
    "env": _Spec(
        _opts(
            "-u --unset -C --chdir -S --split-string --block-signal --default-signal"
            " --ignore-signal"
        )
    ),
}
# Wrappers found by tests/security (each runs the command that follows its options).
WRAPPERS |= {
    "flock": _Spec(_opts("-w --timeout -E --conflict-exit-code"), operands=1),
    "chroot": _Spec(_opts("--userspec --groups"), operands=1),
    "unshare": _Spec(_opts("--setgroups --propagation -S -G --setuid --setgid --wd -R --root")),
    "nsenter": _Spec(_opts("-t --target -S -G --setuid --setgid --wd -R --root")),
    "strace": _Spec(_opts("-o -e -p -s -u -E -a -b -I -O -P -S -X")),
    "ltrace": _Spec(_opts("-o -e -p -s -u -a -n -x -L")),
    "taskset": _Spec(_opts("--cpu-list"), operands=1),
    "chrt": _Spec(operands=1),
    "runuser": _Spec(_opts("-u -g -G --user --group --supp-group -w")),
    "setpriv": _Spec(_opts("--reuid --regid --groups --inh-caps --ambient-caps --bounding-set")),
    "busybox": _Spec(),
    "watch": _Spec(_opts("-n --interval -d --differences -q --equexit"), numeric_flags=True),
    "prlimit": _Spec(_opts("-p --pid -o --output")),
    "catchsegv": _Spec(),
    "faketime": _Spec(operands=1),
}
NO_AUTO_ALLOW_WRAPPERS = frozenset({"sudo", "doas", "eval", "exec", "chroot", "nsenter", "runuser"})

_CODE_FLAGS: dict[str, frozenset[str]] = {
    "su": _opts("-c --command --session-command"),
    "script": _opts("-c --command"),
    "flock": _opts("-c --command"),
    "python": _opts("-c"),
    "python3": _opts("-c"),
    "perl": _opts("-e -E"),
    "ruby": _opts("-e"),
    "node": _opts("-e --eval -p --print"),
    "php": _opts("-r"),
    "lua": _opts("-e"),
    "vim": _opts("-c --cmd"),
    "vi": _opts("-c --cmd"),
    "nvim": _opts("-c --cmd"),
    "man": _opts("-P --pager -H --html"),
    "tar": _opts("--to-command -I --use-compress-program --checkpoint-action --info-script -F"),
    "rg": _opts("--pre"),
    "rsync": _opts("-e --rsh --rsync-path"),
}
_ALWAYS_CODE = frozenset({"trap", "parallel", "ssh", "xdg-open"})
_AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})


def runs_code_from_arguments(name: str, argv: tuple[Word, ...]) -> str | None:
    """Why ``argv`` runs code given as an argument (so it cannot be fully analysed), or None."""
    if name in _ALWAYS_CODE and len(argv) > 1:
        return f"{name} runs commands given as arguments"
    args = [w.text for w in argv[1:]]
    if name in _AWKS and any("system" in a or "|" in a for a in args):
        return f"{name} program may run commands (system or a pipe)"
    flags = _CODE_FLAGS.get(name)
    if flags and any(_has_flag(a, flags, plus=name in ("vim", "vi", "nvim")) for a in args):
        return f"{name} runs code given in an argument"
    return None


def _has_flag(arg: str, flags: frozenset[str], *, plus: bool) -> bool:
    if arg.split("=", 1)[0] in flags or (plus and arg.startswith("+")):
        return True
    # combined short flags: `script -qc CMD`, `su -lc CMD`
    return arg[:1] == "-" and arg[1:2] != "-" and any(f"-{c}" in flags for c in arg[1:])


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal. ``dynamic``: part of it is only known at run time."""

    text: str
    dynamic: bool = False
    glob: bool = False

    @property
    def literal(self) -> str | None:
        """The text when fully known, else ``None``."""
        return None if self.dynamic else self.text


STDIN_ARGS = Word("<arguments from stdin>", dynamic=True)
FIND_ITEM = Word("{}", dynamic=True)


@dataclass(frozen=True)
class Redirect:
    """A redirection: ``op`` as written, its target, whether it writes the target."""

    op: str
    target: Word
    write: bool


@dataclass(frozen=True)
class SimpleCommand:
    """One command that would run.

    ``argv`` is the innermost command after unwrapping; ``layers`` are every argv seen on the way,
    outermost first (the last is ``argv``); ``assignments`` are the ``NAME=value`` words before
    it; ``via`` says how it was reached (``""`` at top level, ``"$(...)"``, ``"bash -c"``,
    ``"eval"``, ``"find -exec"``, ``"find -delete"``, ...).
    """

    argv: tuple[Word, ...]
    layers: tuple[tuple[Word, ...], ...] = ()
    wrappers: tuple[str, ...] = ()
    assignments: tuple[Word, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    via: str = ""

    @property
    def name(self) -> str:
        """The command name with quoting and any directory removed (``/bin/rm`` → ``rm``)."""
        return command_name(self.argv[0].text) if self.argv else ""

    def words(self, layer: tuple[Word, ...] | None = None) -> tuple[str | None, ...]:
        """Literal words for rule matching (``None`` for run-time words), name normalised."""
        argv = self.argv if layer is None else layer
        out: list[str | None] = [w.literal for w in argv]
        if out and out[0] is not None:
            out[0] = command_name(out[0])
        return tuple(out)

    def display(self) -> str:
        return " ".join(w.text for w in self.argv)


@dataclass(frozen=True)
class ShellAnalysis:
    """Everything a command line would run, and what could not be analysed."""

    command: str
    commands: tuple[SimpleCommand, ...]
    redirects: tuple[Redirect, ...]
    problems: tuple[str, ...]
    no_auto_allow: tuple[str, ...]
    git_overrides: tuple[str, ...]

    @property
    def reducible(self) -> bool:
        return not self.problems


def command_name(text: str) -> str:
    """Normalise a command word: ``/usr/bin/rm`` and ``./rm`` → ``rm``."""
    return text.rsplit("/", 1)[1] if "/" in text else text


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _has_glob(text: str) -> bool:
    return any(c in text for c in "*?[") or ("{" in text and ("," in text or ".." in text))


def node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def word(node: Node) -> Word:
    """Evaluate one argument node statically."""
    t = node.type
    if t in ("word", "number"):
        raw = node_text(node)
        return Word(_unescape(raw), glob=_has_glob(raw.replace("\\*", "").replace("\\?", "")))
    if t == "raw_string":
        return Word(node_text(node)[1:-1])
    if t == "string":
        if all(c.type == "string_content" for c in node.named_children):
            inner = node_text(node)[1:-1]
            for esc in ('\\"', "\\\\", "\\$", "\\`"):
                inner = inner.replace(esc, esc[1])
            return Word(inner.replace("\\\n", ""))
        return Word(node_text(node), dynamic=True)
    if t in ("concatenation", "command_name"):
        parts = [word(c) for c in node.named_children]
        if not parts:
            return Word(node_text(node), dynamic=True)
        # The grammar splits `.{env,x}` into the words `.`, `{`, `env,x`, `}`: brace expansion
        # shows only in their unquoted text together.
        bare = "".join(node_text(c) for c in node.named_children if c.type == "word")
        return Word(
            "".join(p.text for p in parts),
            dynamic=any(p.dynamic for p in parts),
            glob=any(p.glob for p in parts) or _has_glob(bare),
        )
    return Word(node_text(node), dynamic=True)
