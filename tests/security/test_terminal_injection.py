"""Terminal injection: a hostile task subject, description, member role and message body, shown by
the real ``teamctl`` in a real pseudo-terminal (the stdlib ``pty``), reach the terminal only as
visible escapes: no ESC, BEL, CR or C1 control of theirs, and no rich markup (``[link=…]``).

Agents write subjects and messages, so repository content can put control sequences there by
prompt injection (issue: ``\\e[2J`` cleared the screen, ``\\e]0;…\\a`` retitled the window).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

HOSTILE = (
    "pwn \x1b[2J\x1b]0;PWNED\x07 \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ "
    "[link=https://evil.example]click[/link] [red]red[/red]\r\x9b31m\x7f\u202eevil"
)
_ALLOWED = re.compile(
    rb"\x1b\[[0-9;]*m"  # colours and bold (SGR)
    rb"|\x1b\[\?25[lh]"  # hide/show the cursor (the live view)
    rb"|\x1b\[2K|\x1b\[[0-9]*A"  # erase a line, move up (the live view redrawing in place)
)
"""The only control sequences teamctl itself sends: none of them moves outside the view, clears
the screen, sets a title or opens a link."""


def _teamctl() -> list[str]:
    script = Path(sys.executable).parent / "teamctl"
    if script.exists():
        return [str(script)]
    found = shutil.which("teamctl")
    return [found] if found else [sys.executable, "-c", "from actors.cli.main import main; main()"]


def _env(term: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = term
    env.pop("TEAMCTL_SETTINGS", None)
    return env


def in_pty(
    args: list[str], cwd: Path, *, term: str = "xterm-256color", until: bytes | None = None
) -> bytes:
    """Everything ``teamctl ARGS`` writes to a 120x40 pseudo-terminal. With ``until``: once
    those bytes appeared, Ctrl-C (SIGINT) ends it (for the live view)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    child = subprocess.Popen(
        [*_teamctl(), *args], cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=_env(term)
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 120  # a safety net against a hang, not a timing assertion
    interrupted = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child exited and closed the terminal
                break
            if not chunk:
                break
            out += chunk
            if until is not None and not interrupted and until in out:
                child.send_signal(signal.SIGINT)
                interrupted = True
    finally:
        os.close(master)
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)
    assert child.returncode == 0, out.decode(errors="replace")
    return out


@pytest.fixture(scope="module")
def hostile_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("term") / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    env = _env("dumb")

    def teamctl(*args: str) -> None:
        subprocess.run([*_teamctl(), *args], cwd=root, env=env, check=True, capture_output=True)

    teamctl("init")
    teamctl("task", "add", HOSTILE, "-d", HOSTILE + "\nsecond line")
    teamctl("task", "add", "the second", "--blocked-by", "task_1")
    teamctl("send", "lead", HOSTILE)
    teamctl("task", "claim", "task_1", "--as", "kim")
    teamctl("task", "complete", "task_1", "--as", "kim", "--summary", HOSTILE)
    return root


COMMANDS = [
    ["tasks"],
    ["tasks", "--full"],
    ["task", "show", "task_1"],
    ["events"],
    ["inbox", "lead"],
    ["inbox", "lead", "--full"],
    ["watch", "--once"],
]


def _check(out: bytes) -> None:
    rest = _ALLOWED.sub(b"", out).replace(b"\r\n", b"\n")
    assert b"\x1b" not in rest, rest
    assert b"\x07" not in rest and b"\r" not in rest and b"\x7f" not in rest
    text = rest.decode()
    assert not any(0x80 <= ord(c) < 0xA0 for c in text) and "\u202e" not in text
    assert "pwn" in text  # the hostile text is there, shown as escapes (cells may wrap)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_hostile_text_in_a_colour_terminal_sends_no_control_of_its_own(
    hostile_repo: Path, args: list[str]
) -> None:
    out = in_pty(args, hostile_repo)
    _check(out)
    assert b"\x1b]" not in out  # no title, no hyperlink


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_hostile_text_in_a_plain_terminal_contains_no_raw_esc(
    hostile_repo: Path, args: list[str]
) -> None:
    out = in_pty(args, hostile_repo, term="dumb")
    assert b"\x1b" not in out and b"\x07" not in out
    assert b"pwn" in out


def test_the_live_view_in_a_terminal_sends_no_control_of_its_own(hostile_repo: Path) -> None:
    out = in_pty(["watch"], hostile_repo, until=b"the second")
    rest = _ALLOWED.sub(b"", out)
    # The live view redraws in place with CR; nothing else of the hostile text gets through.
    assert b"\x1b" not in rest and b"\x07" not in rest
    assert b"\x1b]" not in out and b"pwn \\x1b[2J" in out
