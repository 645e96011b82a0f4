"""Start-up budget as behaviour: the CLI path never imports the heavy libraries
(docs/ARCHITECTURE.md, "Start-up and benchmarks")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from actors.cli.main import COMMAND_MODULES

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


READ_PATH_FREE = ("pydantic", "pydantic_core", "rich")
"""What ``teamctl tasks``, ``task show`` and ``status`` never import on a team on files: the journal
is decoded and folded without the payload models, the inbox counts without the envelope models,
and the tables printed without rich (docs/ARCHITECTURE.md, "Start-up and benchmarks")."""


def _heavy_after(argv: list[str], cwd: Path) -> tuple[str, list[str]]:
    """The output of one CLI command run in a fresh interpreter and the ``READ_PATH_FREE``
    packages it imported."""
    code = (
        "import contextlib, io, sys\n"
        "from actors.cli.main import cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        f"        cli({argv!r})\n"
        "    except SystemExit as done:\n"
        "        assert not done.code, done.code\n"
        f"print(repr(out.getvalue()))\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({READ_PATH_FREE!r})))\n"
        "print(sorted(m for m in sys.modules if m.startswith('actors.cli.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True
    )
    output, imported, commands = done.stdout.strip().splitlines()[-3:]
    # only the command's own module of actors/cli/ (actors.cli.main COMMAND_MODULES)
    assert set(ast.literal_eval(commands)) <= {
        "actors.cli.main",
        "actors.cli.common",
        f"actors.cli.{COMMAND_MODULES[argv[0]][0]}",
    }
    return ast.literal_eval(output), ast.literal_eval(imported)


def test_tasks_task_show_and_status_on_a_team_import_neither_pydantic_nor_rich(
    tmp_path: Path,
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    script = [sys.executable, "-c", "from actors.cli.main import main; main()"]
    for argv in (
        ["init"],
        ["task", "add", "first"],
        ["task", "add", "second", "--blocked-by", "task_1"],
        ["task", "claim", "task_1", "--as", "ann"],
        ["task", "add", "third"],
        ["task", "edit", "task_3", "--subject", "3rd"],
        ["task", "delete", "task_3"],
        ["send", "ann", "hello"],
    ):
        subprocess.run([*script, *argv], cwd=tmp_path, check=True, capture_output=True)
    output, imported = _heavy_after(["tasks", "--all"], tmp_path)
    assert "task_2" in output and "blocked" in output and "ann (human)" in output
    assert imported == []
    output, imported = _heavy_after(["task", "show", "task_3"], tmp_path)
    assert "3rd" in output and "deleted" in output
    assert imported == []
    output, imported = _heavy_after(["status"], tmp_path)  # `init` remembered a clean check
    assert "in progress 1" in output and "inboxes" in output
    assert imported == []


def test_every_command_is_listed_with_its_module() -> None:
    import importlib
    import pkgutil

    import click

    import actors.cli
    from actors.cli.main import cli

    for name, (module, attr) in COMMAND_MODULES.items():
        command = getattr(importlib.import_module(f"actors.cli.{module}"), attr)
        assert isinstance(command, click.Command) and command.name == name
        with click.Context(cli) as ctx:
            assert cli.get_command(ctx, name) is command
    for info in pkgutil.iter_modules(actors.cli.__path__):
        module = importlib.import_module(f"actors.cli.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            assert COMMAND_MODULES[command.name][0] == info.name, command.name
    with click.Context(cli) as ctx:
        assert cli.list_commands(ctx) == sorted(COMMAND_MODULES)
        assert cli.get_command(ctx, "nope") is None
