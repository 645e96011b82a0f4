"""A team run that has stopped leaves the process at once (``actors.cli.run.leave_now``): the
interpreter's teardown is skipped, the exit code and every line of output are kept, and the team
is left paused as a polite stop leaves it (docs/RELIABILITY.md, "Stop and resume")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# An atexit handler registered before the CLI runs: the interpreter's normal teardown runs it,
# ``os._exit`` does not.
_MAIN = (
    "import atexit, sys; atexit.register(lambda: print('TEARDOWN RAN', flush=True)); "
    "from actors.cli.main import main; sys.argv[0] = 'teamctl'; main()"
)


def _teamctl(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}
    env["PYTHONPATH"] = str(ROOT)
    env["HOME"] = str(root.parent / "home")
    return subprocess.run(
        [sys.executable, "-c", _MAIN, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "home").mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    done = _teamctl(root, "init")
    assert done.returncode == 0, done.stderr
    assert "TEARDOWN RAN" in done.stdout  # any other command ends the ordinary way
    return root


def _script(tmp_path: Path, rules: str) -> str:
    path = tmp_path / "script.yaml"
    path.write_text(f"agents:\n  lead:\n    rules:\n{rules}")
    return str(path)


def test_a_finished_headless_run_exits_without_the_interpreter_teardown(
    tmp_path: Path, repo: Path
) -> None:
    script = _script(tmp_path, '      - {match: "(?s).", text: "Hi there."}\n')
    done = _teamctl(
        repo, "run", "--headless", "--script", script, "--output-format", "stream-json", "hello"
    )
    assert done.returncode == 0, done.stderr
    assert "TEARDOWN RAN" not in done.stdout
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert lines[-1]["type"] == "result" and lines[-1]["subtype"] == "success"  # flushed
    journal = (repo / ".team" / "journal.jsonl").read_text().splitlines()
    last = json.loads(journal[-1])
    assert (last["type"], last["data"]["status"]) == ("member.status_changed", "paused")


def test_the_exit_code_of_an_unfinished_run_is_kept(tmp_path: Path, repo: Path) -> None:
    rules = (
        '      - {match: "^leave", once: true, tool_uses: '
        "[{name: create_task, input: {subject: x}}]}\n"
        '      - {match: "(?s).", text: "ok", priority: -1}\n'
        '      - {match: "^$", text: "ok", priority: -2}\n'
    )
    done = _teamctl(repo, "run", "--headless", "--script", _script(tmp_path, rules), "leave it")
    assert done.returncode == 3, done.stderr
    assert "TEARDOWN RAN" not in done.stdout
    assert "unfinished tasks (task_1)" in done.stdout
