"""``python -m benchmarks`` (``benchmarks/run_all.py``) against stand-in benchmark scripts: the
table, the combined JSON, and an exit status that is 1 whenever any benchmark is short, fails,
reports nothing, contradicts its own ``ok`` flags or leaves files in its working directory."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import time
from benchmarks.common import at_least, at_most, finish, parser, shown
args = parser(None).parse_args()
{body}
"""

PASSING = """
finish("fine", [at_least("rate", 700, "ops/s", 500), shown("size", 3, "B")], quick=args.quick)
"""
SHORT = """
finish("slow", [at_least("rate", 120, "ops/s", 500), at_most("lost", 0, "msgs", 0)], quick=args.quick)
"""
CRASHING = """
raise RuntimeError("boom before any report")
"""
LYING = """
import json
print(json.dumps({"benchmark": "liar", "ok": True, "figures": [
    {"name": "rate", "value": 1, "unit": "ops/s", "target": ">= 500", "ok": False}]}))
"""
LITTERING = """
open("scratch.bin", "w").write("left in the working directory")
finish("litter", [at_least("rate", 700, "ops/s", 500)], quick=args.quick)
"""
SKIPPING = """
finish("lacking", [], quick=args.quick, skipped="needs a server this machine lacks")
"""
NOT_A_BENCHMARK = "raise SystemExit('helpers next to the scripts are not run')"


def write(folder: Path, **scripts: str) -> Path:
    folder.mkdir()
    for name, body in scripts.items():
        (folder / f"bench_{name}.py").write_text(SCRIPT.format(body=body))
    (folder / "helper.py").write_text(NOT_A_BENCHMARK)
    return folder


def run_all(folder: Path, *args: str) -> tuple[int, list[str], dict[str, object]]:
    """Exit status, the lines before the JSON, and the JSON. One pass of the host probe per
    benchmark unless ``args`` say otherwise (the default's seven take half a second each)."""
    probe = [] if any(a.startswith("--probe-rounds") for a in args) else ["--probe-rounds", "1"]
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--dir", str(folder), *probe, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, lines[:-1], json.loads(lines[-1])


def test_every_figure_met_exits_zero_with_one_table_and_the_json(tmp_path: Path) -> None:
    code, table, combined = run_all(write(tmp_path / "b", fine=PASSING), "--quick")
    assert code == 0
    assert table[0].split() == ["benchmark", "figure", "value", "target", "ok"]
    assert table[1].split() == ["fine", "rate", "700", "ops/s", ">=", "500", "ok"]
    assert table[2].split() == ["fine", "size", "3", "B", "report", "ok"]
    assert combined["ok"] is True and combined["quick"] is True
    [report] = combined["benchmarks"]
    assert report["benchmark"] == "fine" and report["exit_code"] == 0 and report["quick"] is True


@pytest.mark.parametrize(
    ("name", "body", "row"),
    [
        ("slow", SHORT, ["slow", "rate", "120", "ops/s", ">=", "500", "SHORT"]),
        ("crashing", CRASHING, ["crashing", "(exit", "1,", "no", "report)", "FAIL"]),
        ("liar", LYING, ["liar", "rate", "1", "ops/s", ">=", "500", "SHORT"]),
        ("litter", LITTERING, ["litter", "(left", "1", "files", "in", "its", "cwd)", "FAIL"]),
    ],
)
def test_one_short_or_broken_benchmark_fails_the_run(
    tmp_path: Path, name: str, body: str, row: list[str]
) -> None:
    code, table, combined = run_all(write(tmp_path / "b", fine=PASSING, **{name: body}))
    assert code == 1
    assert row in [line.split() for line in table]
    assert combined["ok"] is False
    oks = {b["benchmark"]: b["ok"] for b in combined["benchmarks"]}
    assert oks["fine"] is True


def test_a_short_figure_sets_the_benchmarks_own_exit_status(tmp_path: Path) -> None:
    folder = write(tmp_path / "b", fine=PASSING, slow=SHORT)
    env_path = {"PYTHONPATH": str(ROOT)}
    for name, expected in (("fine", 0), ("slow", 1)):
        proc = subprocess.run(
            [sys.executable, str(folder / f"bench_{name}.py")],
            capture_output=True,
            text=True,
            env=env_path,
            timeout=60,
        )
        assert proc.returncode == expected
        assert json.loads(proc.stdout)["ok"] is (expected == 0)


def test_only_picks_benchmarks_by_name(tmp_path: Path) -> None:
    code, _, combined = run_all(write(tmp_path / "b", fine=PASSING, slow=SHORT), "--only", "fine")
    assert code == 0 and [b["benchmark"] for b in combined["benchmarks"]] == ["fine"]


def test_a_skipped_benchmark_shows_its_reason_and_does_not_fail_the_run(tmp_path: Path) -> None:
    code, table, combined = run_all(write(tmp_path / "b", fine=PASSING, lacking=SKIPPING))
    assert code == 0 and combined["ok"] is True
    assert "(skipped: needs a server this machine lacks)" in "\n".join(table)


def test_a_benchmark_that_times_out_is_stopped_with_everything_it_started(tmp_path: Path) -> None:
    """A timed-out benchmark's children (servers, teammates) go with it: nothing is left
    running to disturb the benchmarks after it."""
    from benchmarks.run_all import run_one

    pidfile = tmp_path / "child.pid"
    hanging = f"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open({str(pidfile)!r}, "w").write(str(child.pid))
time.sleep(600)
"""
    folder = write(tmp_path / "benches", hang=hanging)
    outcome = run_one(folder / "bench_hang.py", quick=True, timeout=5)
    assert outcome.exit_code == -1 and "timed out" in outcome.stderr
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child), "the benchmark's child outlived the timeout"


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has stopped


def test_the_host_probe_and_steal_are_reported_under_the_table_and_in_the_json(
    tmp_path: Path,
) -> None:
    code, lines, combined = run_all(write(tmp_path / "b", fine=PASSING, slow=SHORT))
    assert code == 1  # reported, not judged: the short benchmark still fails the run alone
    host = [line for line in lines if line.startswith("host  ")]
    assert [line.split(":")[0] for line in host] == [
        "host  fine",
        "host  slow",
        "host  after the last",
        "host  probe spread over the run",
    ]
    assert lines.index(host[0]) > lines.index(next(x for x in lines if x.startswith("slow ")))
    benches = combined["benchmarks"]
    assert isinstance(benches, list)
    for bench in benches:
        probe = bench["host"]
        assert 0 < probe["probe_fastest_ms"] <= probe["probe_median_ms"]
        assert f"probe {probe['probe_median_ms']:.1f} ms before" in "\n".join(host)
        if Path("/proc/stat").exists():
            assert 0 <= probe["steal_share"] <= 1
    after = combined["host_after"]
    assert isinstance(after, dict) and after["probe_median_ms"] > 0


def test_probe_rounds_zero_probes_nothing_and_a_negative_count_is_one_line(
    tmp_path: Path,
) -> None:
    folder = write(tmp_path / "b", fine=PASSING)
    code, lines, combined = run_all(folder, "--probe-rounds", "0")
    assert code == 0 and "host_after" not in combined
    benches = combined["benchmarks"]
    assert isinstance(benches, list)
    assert not any(key.startswith("probe_") for key in benches[0]["host"])
    assert not any("probe" in line for line in lines)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--dir", str(folder), "--probe-rounds", "-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].endswith("--probe-rounds must be 0 or more")


def test_the_spread_line_is_the_slowest_probe_over_the_fastest() -> None:
    from benchmarks.run_all import Outcome, host_lines

    def ran(name: str, median: float, steal: float) -> Outcome:
        host = {"probe_median_ms": median, "probe_fastest_ms": median, "steal_share": steal}
        return Outcome(name, 0, None, 1.0, "", [], host)

    lines = host_lines([ran("a", 60.0, 0.0), ran("b", 126.0, 0.25)], {"probe_median_ms": 63.0})
    assert lines == [
        "host  a: probe 60.0 ms before, steal 0.000 during",
        "host  b: probe 126.0 ms before, steal 0.250 during",
        "host  after the last: probe 63.0 ms",
        "host  probe spread over the run: 2.10x (fastest 60.0 ms, slowest 126.0 ms; "
        "CPU-bound figures scale with it)",
    ]
    assert host_lines([ran("a", 60.0, 0.0)], {}) == [
        "host  a: probe 60.0 ms before, steal 0.000 during"
    ]


def test_the_host_probe_times_its_fixed_work(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import common

    full = common.host_probe(3)
    assert 0 < full["fastest_ms"] <= full["median_ms"]
    monkeypatch.setattr(common, "_PROBE_LINES", common._PROBE_LINES[:2000])  # a tenth
    tenth = common.host_probe(3)
    assert full["fastest_ms"] > 3 * tenth["fastest_ms"]  # ~10x; a slow phase is at most ~2x
