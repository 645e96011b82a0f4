"""Helpers for the in-process CLI tests: a real git repository in ``tmp_path`` and a runner."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from actors.cli.main import cli


def git_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, init: bool = True) -> Path:
    """A fresh git repository (``teamctl init`` done unless ``init=False``), made the cwd."""
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    monkeypatch.delenv("TEAMCTL_SETTINGS", raising=False)
    monkeypatch.delenv("TEAMCTL_MODEL", raising=False)
    if init:
        ok(["init"])
    return root


def run(args: list[str]) -> Result:
    """Invoke ``teamctl`` in-process; stdout and stderr are kept apart."""
    return CliRunner().invoke(cli, args, catch_exceptions=True)


def ok(args: list[str]) -> Result:
    """Invoke and require exit code 0."""
    result = run(args)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    return result


def ok_json(args: list[str]) -> Any:
    """Invoke with ``--json`` and parse stdout."""
    return json.loads(ok([*args, "--json"]).stdout)


def fails(args: list[str], code: int = 1) -> str:
    """Invoke, require ``code``, one line on stderr and no traceback; returns that line."""
    result = run(args)
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    if code == 1:
        # A domain error is handled at the edge: SystemExit, not a leaked exception.
        assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, lines
    return lines[0]
