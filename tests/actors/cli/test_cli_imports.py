"""Start-up budget as behaviour: the CLI path never imports the heavy libraries
(docs/ARCHITECTURE.md, "Start-up and benchmarks")."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("anthropic", "mcp", "pykka", "git", "watchfiles", "httpx")


def imported_modules(code: str) -> set[str]:
    """Top-level names of every module imported while running ``code`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    names = set()
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        name = line.rsplit("|", 1)[1].strip()
        if name != "imported package":
            names.add(name.split(".")[0])
    return names


@pytest.mark.parametrize(
    "code",
    [
        "import actors.cli.main",
        # Building the team objects for `tasks`/`status`/`send` stays light too.
        "import actors.cli.main, actors.factory",
    ],
)
def test_cli_path_does_not_import_heavy_modules(code: str) -> None:
    names = imported_modules(code)
    assert "actors" in names and "click" in names  # the probe itself works
    assert sorted(names & set(HEAVY)) == []


def test_help_runs_without_heavy_modules() -> None:
    code = (
        "import sys\n"
        "from actors.cli.main import cli\n"
        "try:\n"
        "    cli(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
