"""Compat-suite fixtures: an isolated HOME, and the loud summary of missing artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.compat import artifacts


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads the developer's ``~/.claude`` (user settings, personal skills)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("TEAMCTL_SETTINGS", raising=False)
    monkeypatch.delenv("TEAMCTL_MODEL", raising=False)
    return home


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if artifacts.missing:
        terminalreporter.write_line(
            f"WARNING: {len(artifacts.missing)} compat tests were SKIPPED because their real "
            f"artifacts are not on this machine (see tests/compat/README.md; "
            f"{artifacts.REQUIRE_ENV}=1 makes this an error).",
            red=True,
            bold=True,
        )
