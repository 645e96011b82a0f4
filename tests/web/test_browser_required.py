"""The browser tests cannot pass by being skipped: without Chromium they skip loudly on a
developer machine and fail under ``TEAMCTL_REQUIRE_BROWSER=1`` (``.ci/run`` sets it).

Runs pytest itself as a subprocess on one browser test, with a ``PATH`` that has no browser.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE = "tests/web/test_browser.py::test_without_the_token_the_server_answers_401_and_the_page_shows_nothing"


def _pytest_without_a_browser(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TEAMCTL_REQUIRE_BROWSER"}
    env |= {"PATH": str(tmp_path), **extra}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", NODE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_browser_skips_with_a_loud_summary_line(tmp_path: Path) -> None:
    done = _pytest_without_a_browser(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "WARNING: 1 browser tests were SKIPPED" in done.stdout
    assert "chromium or chromedriver is not installed" in done.stdout


def test_a_missing_browser_fails_when_the_browser_is_required(tmp_path: Path) -> None:
    done = _pytest_without_a_browser(tmp_path, TEAMCTL_REQUIRE_BROWSER="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout  # failed in setup, before the test body
    assert "a headless browser is required (TEAMCTL_REQUIRE_BROWSER=1)" in done.stdout
