"""Values and word evaluation for the shell analyser (``harness.shell``).

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
NO_AUTO_ALLOW_WRAPPERS = frozenset({"sudo", "doas", "eval", "exec"})


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
    outermost first (the last is ``argv``); ``via`` says how it was reached (``""`` at top level,
    ``"$(...)"``, ``"bash -c"``, ``"eval"``, ``"find -exec"``, ``"find -delete"``, ...).
    """

    argv: tuple[Word, ...]
    layers: tuple[tuple[Word, ...], ...] = ()
    wrappers: tuple[str, ...] = ()
    assignments: tuple[str, ...] = ()
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
        return Word(
            "".join(p.text for p in parts),
            dynamic=any(p.dynamic for p in parts),
            glob=any(p.glob for p in parts),
        )
    return Word(node_text(node), dynamic=True)
