"""The shell analyser: every simple command is found, however it is wrapped."""

from __future__ import annotations

import pytest

from harness.shell.parse import analyse


def names(command: str) -> list[str]:
    return [c.name for c in analyse(command).commands]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "ls -la; rm x && echo ok || cat y | wc -l & sleep 1",
            ["ls", "rm", "echo", "cat", "wc", "sleep"],
        ),
        ("FOO=1 BAR=2 rm -rf x", ["rm"]),
        ("bash -c 'rm -rf x'", ["rm"]),
        ("sh -ec \"bash -c 'rm x'\"", ["rm"]),
        ("echo $(rm -rf x)", ["rm", "echo"]),
        ("echo `rm -rf x`", ["rm", "echo"]),
        ("diff <(rm a) b", ["rm", "diff"]),
        ("env -i A=1 rm x", ["rm"]),
        ("\\rm x", ["rm"]),
        ("r''m x", ["rm"]),
        ('"rm" x', ["rm"]),
        ("/bin/rm x", ["rm"]),
        ("sudo -u root timeout -s KILL 5 nice -n 3 nohup rm x", ["rm"]),
        ("ls | xargs -I{} rm {}", ["ls", "rm"]),
        ("f() { rm x; }; f", ["rm", "f"]),
        ("for i in a; do rm $i; done", ["rm"]),
        ("if true; then (rm x); fi", ["true", "rm"]),
        ("cat <<EOF\n$(rm x)\nEOF", ["rm", "cat"]),
        ("command rm x", ["rm"]),
        ("exec rm x", ["rm"]),
        ("time rm x", ["rm"]),
        ("export A=$(rm x)", ["rm", "export"]),
    ],
)
def test_simple_commands_are_found(command: str, expected: list[str]) -> None:
    assert names(command) == expected


def test_eval_is_parsed_and_flagged() -> None:
    a = analyse('eval "rm -rf x"')
    assert [c.name for c in a.commands] == ["rm"]
    assert "eval" in a.no_auto_allow
    assert a.commands[0].via == "eval"


def test_find_delete_and_exec_become_commands() -> None:
    a = analyse("find . -name '*.o' -delete")
    assert any(c.name == "rm" and c.via == "find -delete" for c in a.commands)
    b = analyse("find . -exec rm {} \\;")
    assert any(c.name == "rm" and c.via == "find -exec" for c in b.commands)


def test_layers_keep_every_wrapper() -> None:
    (cmd,) = analyse("timeout 5 env FOO=1 rm -rf x").commands
    assert [w.text for w in cmd.argv] == ["rm", "-rf", "x"]
    assert cmd.wrappers == ("timeout", "env")
    assert [layer[0].text for layer in cmd.layers] == ["timeout", "env", "rm"]


def test_redirections_are_collected() -> None:
    a = analyse("echo x > .git/hooks/pre-commit 2>&1 < in.txt >> log; echo > f y z")
    targets = {(r.op, r.target.text, r.write) for r in a.redirects}
    assert (">", ".git/hooks/pre-commit", True) in targets
    assert ("<", "in.txt", False) in targets
    assert (">>", "log", True) in targets
    assert (">", "f", True) in targets
    assert [w.text for w in a.commands[-1].argv] == ["echo", "y", "z"]
    assert not any(r.target.text == "1" for r in a.redirects)


def test_words_after_a_redirect_of_a_list_are_not_guessed() -> None:
    # tree-sitter attaches `> f y z` to the whole list here; the analyser must not guess.
    assert analyse("true && echo > f y z").problems


@pytest.mark.parametrize(
    "command",
    ["$X -rf /", "r$(echo m) x", "{rm,-rf,x}", 'bash -c "$CMD"', "eval $X", "x=$(", "/bin/r? x"],
)
def test_unreducible_commands_report_problems(command: str) -> None:
    assert analyse(command).problems


def test_git_location_overrides_are_reported() -> None:
    a = analyse("git -C /tmp/other status; GIT_DIR=/x git log; git --work-tree=/y diff")
    joined = " ".join(a.git_overrides)
    assert "-C /tmp/other" in joined
    assert "GIT_DIR" in joined
    assert "--work-tree" in joined


def test_dangerous_environment_prefix_is_flagged() -> None:
    assert analyse("PATH=/tmp/evil ls").no_auto_allow
    assert not analyse("LC_ALL=C ls").no_auto_allow


def test_words_mark_runtime_parts() -> None:
    (cmd,) = analyse('git push "$REMOTE" main').commands
    assert cmd.words() == ("git", "push", None, "main")


@pytest.mark.parametrize(
    ("command", "problems"),
    [
        ("", ()),
        ("   ", ()),
        (
            "\x00",
            ("the command contains a NUL byte", "the shell syntax could not be parsed completely"),
        ),
        ("'unterminated", ("the shell syntax could not be parsed completely",)),
        ("(((", ("the shell syntax could not be parsed completely",)),
        ("\\", ("the shell syntax could not be parsed completely",)),
    ],
)
def test_any_input_is_analysed_without_raising(command: str, problems: tuple[str, ...]) -> None:
    """Nothing to run is found in it, and what cannot be parsed is a problem (the permission
    layer asks instead of allowing)."""
    found = analyse(command)
    assert (found.command, found.commands, found.problems) == (command, (), problems)
