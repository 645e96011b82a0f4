"""Shell command analysis: reduce a command line to the simple commands it would run.

Parsing uses tree-sitter's bash grammar (``tree-sitter`` + ``tree-sitter-bash``). The analyser
walks the tree and records every simple command, wherever it hides: lists, pipelines, subshells,
functions, loops, ``$(...)``, backticks, process substitution, here-documents. It then unwraps
what runs another command (``env``, ``VAR=x`` prefixes, ``command``, ``exec``, ``nice``,
``nohup``, ``timeout``, ``time``, ``xargs``, ``sudo``, ``bash -c`` and friends, ``eval``,
``find -exec``; ``find -delete`` is reported as an ``rm``), keeping every layer so a rule can
match the wrapper or the wrapped command. Redirection targets are collected as paths.

What it cannot reduce (a command name computed at run time, a ``bash -c`` script built from
variables, a parse error) is listed in ``problems``; the permission layer turns that into ``ask``.
The analyser never decides allow or deny itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from harness.shell.words import (
    DANGEROUS_VARS,
    FIND_ITEM,
    GIT_VARS_PREFIX,
    MAX_DEPTH,
    NO_AUTO_ALLOW_WRAPPERS,
    RESERVED,
    SHELLS,
    STDIN_ARGS,
    WRAPPERS,
    WRITE_OPS,
    Redirect,
    ShellAnalysis,
    SimpleCommand,
    Word,
    command_name,
    node_text,
    runs_code_from_arguments,
    word,
)

__all__ = ["Redirect", "ShellAnalysis", "SimpleCommand", "Word", "analyse", "command_name", "word"]


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_bash.language()))


def analyse(command: str) -> ShellAnalysis:
    """Analyse ``command`` (never raises for any input string)."""
    a = _Analyser()
    a.source(command, depth=0, via="", outer=())
    return ShellAnalysis(
        command=command,
        commands=tuple(a.commands),
        redirects=tuple(a.redirects),
        problems=tuple(dict.fromkeys(a.problems)),
        no_auto_allow=tuple(dict.fromkeys(a.no_auto)),
        git_overrides=tuple(dict.fromkeys(a.git)),
    )


@dataclass
class _Analyser:
    commands: list[SimpleCommand] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    no_auto: list[str] = field(default_factory=list)
    git: list[str] = field(default_factory=list)

    def source(
        self, src: str, *, depth: int, via: str, outer: tuple[tuple[Word, ...], ...]
    ) -> None:
        if depth > MAX_DEPTH:
            self.problems.append("commands nested too deeply to analyse")
            return
        if "\x00" in src:
            self.problems.append("the command contains a NUL byte")
        tree = _parser().parse(src.encode("utf-8", "surrogateescape"))
        if tree.root_node.has_error:
            self.problems.append("the shell syntax could not be parsed completely")
        self.walk(tree.root_node, depth=depth, via=via, outer=outer)

    def walk(
        self, node: Node, *, depth: int, via: str, outer: tuple[tuple[Word, ...], ...]
    ) -> None:
        t = node.type
        if t == "command":
            self.command(node, [], depth=depth, via=via, outer=outer)
            return
        if t == "redirected_statement":
            body = node.child_by_field_name("body")
            reds, extra = self.redirections(node.children_by_field_name("redirect"))
            for r in node.children_by_field_name("redirect"):
                self.walk(r, depth=depth, via=_sub_via(via), outer=outer)
            if body is not None and body.type == "command":
                self.command(body, reds, depth=depth, via=via, outer=outer, extra=extra)
            else:
                if extra:
                    self.problems.append("words after a redirection of a compound command")
                if body is not None:
                    self.walk(body, depth=depth, via=via, outer=outer)
            return
        if t in ("declaration_command", "unset_command"):
            argv = tuple(word(c) for c in node.children if c.type not in ("variable_assignment",))
            for c in node.named_children:
                if c.type == "variable_assignment":
                    self.assignment(c)
                self.walk(c, depth=depth, via=_sub_via(via), outer=outer)
            self.commands.append(SimpleCommand(argv, (*outer, argv), via=via))
            return
        if _is_arithmetic(node) and _mentions_variables(node):
            # Bash evaluates variable values as expressions; a subscript there can run commands.
            self.problems.append("arithmetic on variables (their values can run commands)")
        if t == "variable_assignment":
            self.assignment(node)
        elif t == "ERROR":
            self.problems.append("the shell syntax could not be parsed completely")
        child_via = _sub_via(via) if t in ("command_substitution", "process_substitution") else via
        for c in node.named_children:
            self.walk(c, depth=depth, via=child_via, outer=outer)

    def assignment(self, node: Node) -> str:
        name_node = node.child_by_field_name("name")
        name = node_text(name_node) if name_node is not None else node_text(node).split("=", 1)[0]
        self.note_variable(name)
        return name

    def note_variable(self, name: str) -> None:
        base = name.split("[", 1)[0]
        if base.startswith(GIT_VARS_PREFIX):
            self.git.append(f"{base}= changes where git looks")
            self.no_auto.append(f"sets {base}")
        elif base in DANGEROUS_VARS:
            self.no_auto.append(f"sets {base}, which changes what runs")

    def redirections(self, nodes: list[Node]) -> tuple[list[Redirect], list[Word]]:
        out: list[Redirect] = []
        extra: list[Word] = []
        for r in nodes:
            if r.type != "file_redirect":
                continue
            op = next((c.type for c in r.children if not c.is_named), "")
            dests = r.children_by_field_name("destination")
            if not dests:
                continue
            target = word(dests[0])
            extra.extend(word(d) for d in dests[1:])
            if (op in (">&", "<&") and dests[0].type == "number") or target.text == "-":
                continue  # duplicating or closing a descriptor
            red = Redirect(op=op, target=target, write=op in WRITE_OPS)
            out.append(red)
            self.redirects.append(red)
        return out, extra

    def command(
        self,
        node: Node,
        outer_reds: list[Redirect],
        *,
        depth: int,
        via: str,
        outer: tuple[tuple[Word, ...], ...],
        extra: list[Word] | None = None,
    ) -> None:
        argv: list[Word] = []
        assigns: list[Word] = []
        reds = list(outer_reds)
        arg_ids = {c.id for c in node.children_by_field_name("argument")}
        for c in node.children:
            if c.type == "variable_assignment":
                value = c.child_by_field_name("value")
                val = word(value) if value is not None else Word("")
                assigns.append(Word(f"{self.assignment(c)}={val.text}", dynamic=val.dynamic))
            elif c.type == "command_name" or c.id in arg_ids:
                argv.append(word(c))
            elif c.type == "file_redirect":
                got, more = self.redirections([c])
                reds.extend(got)
                argv.extend(more)
            if c.is_named:
                self.walk(c, depth=depth, via=_sub_via(via), outer=outer)
        argv.extend(extra or ())
        if argv:
            self.unwrap(tuple(argv), assigns, tuple(reds), depth=depth, via=via, outer=outer)

    def unwrap(
        self,
        argv: tuple[Word, ...],
        assigns: list[Word],
        reds: tuple[Redirect, ...],
        *,
        depth: int,
        via: str,
        outer: tuple[tuple[Word, ...], ...],
    ) -> None:
        layers: list[tuple[Word, ...]] = [*outer]
        wrappers: list[str] = []
        while argv:
            layers.append(argv)
            head = argv[0]
            if head.dynamic or head.glob:
                self.problems.append(f"the command name {head.text!r} is only known at run time")
                break
            name = command_name(head.text)
            if name in RESERVED or not name or any(c in name for c in "{}();<>|&`$=\n"):
                self.problems.append(f"{name!r} is not a plain command name")
                break
            if name in SHELLS:
                script = _shell_script(argv)
                if script is None:
                    self.problems.append(f"{name} runs commands from a file or stdin")
                    break
                if script.dynamic:
                    self.problems.append(f"{name} -c runs a script built at run time")
                    break
                self.source(script.text, depth=depth + 1, via=f"{name} -c", outer=tuple(layers))
                return
            if name in ("source", "."):
                self.problems.append(f"{name} runs commands from a file")
                break
            if name == "eval":
                self.no_auto.append("eval")
                if any(w.dynamic for w in argv[1:]):
                    self.problems.append("eval of text built at run time")
                    break
                text = " ".join(w.text for w in argv[1:])
                self.source(text, depth=depth + 1, via="eval", outer=tuple(layers))
                return
            if name == "find":
                self.find(argv, tuple(layers), depth=depth)
            if name == "git":
                self.git_options(argv)
            why = runs_code_from_arguments(name, argv)
            if why:
                self.problems.append(why)
            if name == "command" and any(w.text in ("-v", "-V") for w in argv[1:2]):
                break  # `command -v x` only looks x up
            if name not in WRAPPERS:
                break
            if name in NO_AUTO_ALLOW_WRAPPERS:
                self.no_auto.append(name)
            rest = self.strip_options(name, argv)
            if name == "xargs":
                rest = (*(rest or (Word("echo"),)), STDIN_ARGS)
            if rest is None:
                break
            wrappers.append(name)
            argv = rest
        if not argv:
            return
        self.commands.append(
            SimpleCommand(
                argv=argv,
                layers=tuple(layers),
                wrappers=tuple(wrappers),
                assignments=tuple(assigns),
                redirects=reds,
                via=via,
            )
        )

    def strip_options(self, name: str, argv: tuple[Word, ...]) -> tuple[Word, ...] | None:
        """The wrapped command, or ``None`` when there is none (``exec >f``, bare ``env``)."""
        spec = WRAPPERS[name]
        i = 1
        operands = spec.operands
        while i < len(argv):
            w = argv[i]
            if w.dynamic:
                self.problems.append(f"{name} has an option only known at run time")
                return argv[i:] if operands == 0 else None
            t = w.text
            if t == "--":
                i += 1
                break
            if name == "env" and "=" in t and not t.startswith("-"):
                self.note_variable(t.split("=", 1)[0])
                i += 1
                continue
            if t.startswith("-") and t != "-":
                opt = t.split("=", 1)[0]
                if name == "env" and opt in ("-S", "--split-string"):
                    self.problems.append("env -S splits a string into a command")
                    return None
                if name == "env" and opt in ("-C", "--chdir"):
                    self.problems.append("env -C changes directory")
                if name in ("sudo", "doas") and opt in ("-i", "-s", "--login", "--shell", "-e"):
                    self.problems.append(f"{name} {opt} starts a shell or editor")
                    return None
                if opt in spec.valued and "=" not in t:
                    i += 2
                elif len(opt) > 2 and not opt.startswith("--") and opt[:2] in spec.valued:
                    i += 1  # value attached: -n5, -I{}
                elif spec.numeric_flags and t[1:].isdigit():
                    i += 1
                else:
                    i += 1
                continue
            if operands:
                operands -= 1
                i += 1
                continue
            break
        rest = argv[i:]
        return rest or None

    def find(
        self,
        argv: tuple[Word, ...],
        layers: tuple[tuple[Word, ...], ...],
        *,
        depth: int,
    ) -> None:
        starts = [w for w in argv[1:] if not w.text.startswith(("-", "(", "!"))]
        i = 1
        while i < len(argv):
            t = argv[i].text
            if t in ("-exec", "-execdir", "-ok", "-okdir"):
                j = i + 1
                inner: list[Word] = []
                while j < len(argv) and argv[j].text not in (";", "+"):
                    inner.append(FIND_ITEM if "{}" in argv[j].text else argv[j])
                    j += 1
                if inner:
                    self.unwrap(tuple(inner), [], (), depth=depth, via="find -exec", outer=layers)
                i = j + 1
                continue
            if t == "-delete":
                target = tuple(starts[:1]) or (Word("."),)
                synthetic = (Word("rm"), Word("-r"), *target)
                self.commands.append(
                    SimpleCommand(synthetic, (*layers, synthetic), via="find -delete")
                )
            if t in ("-fprint", "-fprint0", "-fprintf", "-fls") and i + 1 < len(argv):
                red = Redirect(op=t, target=argv[i + 1], write=True)
                self.redirects.append(red)
            i += 1

    def git_options(self, argv: tuple[Word, ...]) -> None:
        i = 1
        while i < len(argv) and argv[i].text.startswith("-"):
            t = argv[i].text
            opt = t.split("=", 1)[0]
            if opt in (
                "-C", "--git-dir", "--work-tree", "-c", "--exec-path", "--namespace", "--config-env"
            ):  # fmt: skip
                value = (
                    t.split("=", 1)[1]
                    if "=" in t
                    else (argv[i + 1].text if i + 1 < len(argv) else "")
                )
                self.git.append(f"git {opt} {value}".strip())
                i += 1 if "=" in t else 2
                continue
            i += 1


def _is_arithmetic(node: Node) -> bool:
    if node.type in ("arithmetic_expansion", "c_style_for_statement"):
        return True
    return node.type == "compound_statement" and node_text(node).startswith("((")


def _mentions_variables(node: Node) -> bool:
    if node.type in ("variable_name", "word", "simple_expansion", "expansion", "subscript"):
        return True
    return any(_mentions_variables(c) for c in node.named_children)


def _sub_via(via: str) -> str:
    return via or "$(...)"


def _shell_script(argv: tuple[Word, ...]) -> Word | None:
    """The ``-c`` script of a shell invocation, or ``None`` when it runs a file or stdin."""
    i = 1
    has_c = False
    while i < len(argv):
        t = argv[i].text
        if t in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if t.startswith("-") and not t.startswith("--") and "c" in t[1:]:
            has_c = True
            i += 1
            continue
        if t.startswith(("-", "+")) and t not in ("-", "--"):
            i += 1
            continue
        break
    if not has_c or i >= len(argv):
        return None
    return argv[i]
