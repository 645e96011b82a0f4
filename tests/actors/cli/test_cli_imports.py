"""Start-up budget as behaviour: the CLI path never imports the heavy libraries
(docs/ARCHITECTURE.md, "Start-up and benchmarks")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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


SETTINGS_MODELS = ("actors.settings", "harness.settings")
"""The pydantic settings models: a team on files is opened without them (``actors/backend.py``)."""


def _modules_after(argv: list[str], cwd: Path) -> list[str]:
    """The settings-model modules imported by one CLI command run in a fresh interpreter."""
    code = (
        "import sys\n"
        "from actors.cli.main import cli\n"
        "try:\n"
        f"    cli({argv!r})\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        f"print(sorted(m for m in sys.modules if m in {SETTINGS_MODELS!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True
    )
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_commands_on_a_file_team_do_not_load_the_settings_models(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    script = [sys.executable, "-c", "from actors.cli.main import main; main()"]
    subprocess.run([*script, "init"], cwd=tmp_path, check=True, capture_output=True)
    for argv in (["task", "add", "a"], ["tasks"], ["task", "show", "task_1"], ["inbox", "lead"]):
        assert _modules_after(argv, tmp_path) == [], argv
    # A team whose settings name another backend still gets the full check (and its error).
    settings = tmp_path / ".team" / "settings.json"
    settings.write_text('{"backend": "postgres://x"}', encoding="utf-8")
    bad = subprocess.run([*script, "tasks"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 1 and "is not a backend" in bad.stderr
