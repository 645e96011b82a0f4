"""Every benchmark's ``--quick`` mode as a smoke test, run the way ``python -m benchmarks`` runs
it (a subprocess in a fresh working directory): it reports one JSON object of well-formed figures,
its exit status agrees with its ``ok`` flags, and it leaves nothing in its working directory.
Timings are not checked: a loaded machine may miss a target, which must then show as exit 1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.common import FIGURE_KEYS
from benchmarks.run_all import HERE, discover, run_one

SCRIPTS = discover(HERE, [])


def test_every_benchmark_is_found() -> None:
    names = {p.stem for p in SCRIPTS}
    expected = {"bench_claims", "bench_replay", "bench_mailbox", "bench_cli", "bench_startup"}
    assert expected | {"bench_big_team"} <= names
    assert "run_all" not in names and "common" not in names


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_quick_mode_reports_figures_and_an_exit_status_that_matches_them(script: Path) -> None:
    outcome = run_one(script, quick=True, timeout=900)
    assert outcome.report is not None, f"no report; exit {outcome.exit_code}: {outcome.stderr}"
    report = outcome.report
    assert report["benchmark"] == script.stem.removeprefix("bench_")
    assert report["quick"] is True
    figures = report["figures"]
    if report.get("skipped"):  # this machine lacks what it needs (e.g. nats-server)
        assert figures == [] and isinstance(report["skipped"], str)
        required = os.environ.get("TEAMCTL_REQUIRE_NATS") == "1" and "nats" in script.stem
        assert not required, f"skipped under TEAMCTL_REQUIRE_NATS=1: {report['skipped']}"
    else:
        assert figures, "a benchmark reports at least one figure"
    for fig in figures:
        assert set(FIGURE_KEYS) <= set(fig), fig
        assert isinstance(fig["name"], str) and isinstance(fig["unit"], str)
        assert isinstance(fig["value"], int | float) and isinstance(fig["target"], str)
        assert isinstance(fig["ok"], bool)
    every_ok = all(fig["ok"] for fig in figures)
    assert report["ok"] is every_ok
    assert outcome.exit_code == (0 if every_ok else 1), outcome.stderr[-2000:]
    assert outcome.leftovers == [], "scratch files belong in a temporary directory"
