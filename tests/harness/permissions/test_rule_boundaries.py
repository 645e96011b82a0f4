"""Permission rule corners found by mutation testing of ``harness/permissions/rules.py``
(tools/README.md): which tools a Claude Code tool name covers, and shell patterns at their
edges."""

from __future__ import annotations

import pytest

from harness.permissions.rules import CommandPattern, Match, aliases_for

CLAUDE_NAMES = {"Bash", "Read", "Edit", "Write", "Glob", "Grep"}


@pytest.mark.parametrize(
    ("tool", "names"),
    [
        ("read_file", {"Read"}),
        ("glob", {"Read", "Glob"}),
        ("grep", {"Read", "Grep"}),
        ("write_file", {"Edit", "Write"}),
        ("edit_file", {"Edit", "Write"}),
        ("bash", {"Bash"}),
    ],
)
def test_a_claude_code_tool_name_covers_our_tools(tool: str, names: set[str]) -> None:
    """A ``Read(...)`` rule covers every file reader, ``Edit``/``Write`` every file writer."""
    assert set(aliases_for(tool)) & CLAUDE_NAMES == names


def test_a_command_name_is_matched_without_its_directory() -> None:
    pattern = CommandPattern.parse("/usr/local/bin/rm -rf:*")
    assert pattern.tokens == ("rm", "-rf") and pattern.prefix
    assert pattern.match(("rm", "-rf", "x")) is Match.YES
    assert CommandPattern.parse("FOO=1 /bin/make:*").tokens == ("FOO=1", "make")


def test_a_pattern_of_assignments_only_parses() -> None:
    pattern = CommandPattern.parse("FOO=1 BAR=2")
    assert pattern.tokens == ("FOO=1", "BAR=2")
    assert pattern.match(("FOO=1", "BAR=2")) is Match.YES


def test_an_exact_pattern_with_another_word_count_does_not_match() -> None:
    pattern = CommandPattern.parse("npm run test")
    assert pattern.match(("npm", "run", "test")) is Match.YES
    assert pattern.match(("npm", "run", "test", "--watch")) is Match.NO
    assert pattern.match(("npm", "run")) is Match.NO
    assert pattern.match(("npm", None)) is Match.MAYBE  # a run-time word may be several


def test_a_wildcard_in_the_command_name_is_checked_before_a_run_time_word() -> None:
    pattern = CommandPattern.parse("np* run *")
    assert pattern.match(("npm", None)) is Match.MAYBE
    assert pattern.match(("yarn", None)) is Match.NO
    assert pattern.match(("npx", "run", "x")) is Match.YES
