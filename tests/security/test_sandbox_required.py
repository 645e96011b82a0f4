"""The ``sandbox`` marker: a missing bwrap skips loudly on a developer machine and fails on CI.

Runs pytest itself as a subprocess on one real sandbox test, with a ``PATH`` that has no ``bwrap``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE = "tests/security/test_sandbox.py::test_network_namespace_is_private"


def _pytest_without_bwrap(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TEAMCTL_REQUIRE_SANDBOX"}
    env |= {"PATH": str(tmp_path), **extra}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", NODE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_bwrap_skips_with_a_loud_summary_line(tmp_path: Path) -> None:
    done = _pytest_without_bwrap(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "WARNING: 1 sandbox tests were SKIPPED" in done.stdout
    assert "bwrap was not found" in done.stdout


def test_missing_bwrap_fails_when_the_sandbox_is_required(tmp_path: Path) -> None:
    done = _pytest_without_bwrap(tmp_path, TEAMCTL_REQUIRE_SANDBOX="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout  # failed in setup, before the test body
    assert "bubblewrap is required (TEAMCTL_REQUIRE_SANDBOX=1)" in done.stdout
