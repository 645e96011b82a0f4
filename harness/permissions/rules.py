"""Permission rules: ``Tool`` or ``Tool(specifier)``, with the names Claude Code uses.

Tool names are the ones the model sees (``bash``, ``read_file``, ``mcp__server__tool``, team tool
names), a glob over them (``mcp__server__*``), a bare MCP server (``mcp__server`` covers all its
tools) or Claude Code's name (``harness.tools.names.OUR_NAMES``): ``Bash``; ``Read`` (every tool
that reads files: ``read_file``, ``glob``, ``grep``); ``Edit`` and ``Write`` (every tool that
writes files: ``write_file``, ``edit_file``); ``Glob``; ``Grep``; ``Task`` and ``Agent`` (our
``task``); ``Skill`` (``load_skill``; ``Skill(name)`` names the skill); ``TodoWrite``.

The specifier is a command pattern for the shell (``CommandPattern``), a gitignore-style path
pattern for file tools, and a glob over the call's target otherwise (the skill name for
``load_skill``; ``name:*`` and a trailing `` *`` are prefixes there too). ``Task(type)`` and
``Agent(type)`` name a subagent type; our ``task`` tool has none, so only the bare rule (or
``Task(*)``) covers it.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from harness.errors import HarnessError
from harness.tools.names import OUR_NAMES

SHELL_TOOL = "bash"
READ_TOOLS = frozenset({"read_file", "glob", "grep"})
WRITE_TOOLS = frozenset({"write_file", "edit_file"})

_ALIASES: dict[str, frozenset[str]] = {
    **{claude: frozenset({ours}) for claude, ours in OUR_NAMES.items()},
    "Bash": frozenset({SHELL_TOOL}),
    "Read": READ_TOOLS,
    "Edit": WRITE_TOOLS,
    "Write": WRITE_TOOLS,
    "Glob": frozenset({"glob"}),
    "Grep": frozenset({"grep"}),
}

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_RULE_RE = re.compile(r"^\s*([A-Za-z0-9_*?\-.]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


class RuleError(HarnessError, ValueError):
    """A permission rule that does not parse (names the rule)."""


class Family(Enum):
    """How a rule's specifier is interpreted."""

    SHELL = "shell"
    READ = "read"
    WRITE = "write"
    OTHER = "other"


def aliases_for(tool: str) -> tuple[str, ...]:
    """The alias names that cover ``tool`` (``read_file`` → ``("Read",)``)."""
    return tuple(alias for alias, tools in _ALIASES.items() if tool in tools)


@dataclass(frozen=True)
class Rule:
    """One parsed rule; ``specifier`` is ``None`` for a bare tool name."""

    raw: str
    tool: str
    specifier: str | None

    @classmethod
    def parse(cls, raw: str) -> Rule:
        m = _RULE_RE.match(raw)
        if m is None:
            raise RuleError(f"permission rule {raw!r} is not `Tool` or `Tool(specifier)`")
        spec = m.group(2)
        if spec is not None:
            spec = spec.strip()
            if not spec or spec == "*":
                spec = None
        return cls(raw=raw, tool=m.group(1), specifier=spec)

    def covers(self, tool: str, family: Family) -> bool:
        """True when this rule names ``tool`` (a request of the given family)."""
        if self.tool in _ALIASES:
            if tool in _ALIASES[self.tool]:
                return True
            # Claude Code semantics: Read/Edit rules cover any tool of that family.
            if self.tool == "Read":
                return family is Family.READ
            if self.tool in ("Edit", "Write"):
                return family is Family.WRITE
            return False
        if self.tool == tool:
            return True
        if (
            tool.startswith("mcp__")
            and tool.startswith(self.tool + "__")
            and self.tool.count("__") == 1
        ):
            return True
        return any(c in self.tool for c in "*?") and fnmatch.fnmatchcase(tool, self.tool)


def target_matches(spec: str, target: str) -> bool:
    """A glob specifier against a call's target (a skill name): ``name:*`` and ``name *`` also
    match ``name`` itself, as for shell commands."""
    for suffix in (":*", " *"):
        if spec.endswith(suffix) and fnmatch.fnmatchcase(target, spec[: -len(suffix)]):
            return True
    spec = spec[:-2] + " *" if spec.endswith(":*") else spec
    return fnmatch.fnmatchcase(target, spec)


def parse_rules(raw: tuple[str, ...] | list[str]) -> tuple[Rule, ...]:
    """Parse a rule list, failing on the first bad rule."""
    return tuple(Rule.parse(r) for r in raw)


class Match(Enum):
    """Whether a command pattern matches a command with run-time parts."""

    NO = 0
    MAYBE = 1
    YES = 2


@dataclass(frozen=True)
class CommandPattern:
    """A shell specifier: ``git commit:*`` (prefix), ``npm run test`` (exact), ``git * main``.

    ``*`` matches any text, spaces included; a trailing `` *`` also matches nothing (``ls *``
    matches ``ls`` and ``ls -la`` but not ``lsof``), the same as the legacy ``ls:*``.
    """

    tokens: tuple[str, ...]
    prefix: bool
    regex: re.Pattern[str] | None

    @classmethod
    @lru_cache(maxsize=512)
    def parse(cls, spec: str) -> CommandPattern:
        text = spec.strip()
        prefix = text.endswith(":*")
        if prefix:
            text = text[:-2].rstrip()
        try:
            tokens = tuple(shlex.split(text))
        except ValueError:
            tokens = tuple(text.split())
        # The command name is matched without its directory (`/bin/rm` as `rm`); variable
        # assignments in front of it (`FOO=1 make:*`) are matched as written.
        at = next((i for i, t in enumerate(tokens) if not _ASSIGNMENT.match(t)), len(tokens))
        if at < len(tokens) and "/" in tokens[at]:
            tokens = (*tokens[:at], tokens[at].rsplit("/", 1)[1], *tokens[at + 1 :])
        regex = None
        if not prefix and "*" in text:
            joined, tail = " ".join(tokens), ""
            if joined.endswith(" *"):
                # Claude Code: a trailing ` *` is a word boundary, so `rm -rf *` matches a bare
                # `rm -rf` too (as `rm -rf:*` does), but not `rm -rfx`.
                joined, tail = joined[:-2], "(?: .*)?"
            body = ".*".join(re.escape(part) for part in joined.split("*"))
            regex = re.compile(body + tail, re.DOTALL)
        return cls(tokens=tokens, prefix=prefix, regex=regex)

    def match(self, words: tuple[str | None, ...]) -> Match:
        """Match a command's words; ``None`` stands for a word only known at run time."""
        if not words or not self.tokens:
            return Match.NO
        if self.regex is not None:
            if all(w is not None for w in words):
                text = " ".join(w for w in words if w is not None)
                return Match.YES if self.regex.fullmatch(text) else Match.NO
            first = self.tokens[0].split("*", 1)[0]
            head = words[0]
            if head is not None and not head.startswith(first):
                return Match.NO
            return Match.MAYBE
        result = Match.YES
        if self.prefix:
            if len(words) < len(self.tokens):
                return Match.NO
        elif len(words) != len(self.tokens):
            # A run-time word may expand to nothing or to several words.
            if None not in words:
                return Match.NO
            result = Match.MAYBE
        for want, got in zip(self.tokens, words, strict=False):
            if got is None:
                result = Match.MAYBE
            elif got != want:
                return Match.NO
        return result
