"""Memory: index + topic files, locked writes safe across processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.context.memory import Memory, MemoryStoreError

WRITER = """
import sys
from pathlib import Path
from harness.context.memory import Memory
mem = Memory(Path(sys.argv[1]))
who = sys.argv[2]
for i in range(40):
    mem.append("shared", f"{who} note {i}")
    mem.write(f"{who}-{i % 3}", f"{who} private {i}", description=f"{who}'s topic {i % 3}")
"""


def test_write_read_append_delete_and_index(tmp_path: Path) -> None:
    mem = Memory(tmp_path)
    assert mem.index() == {} and mem.index_text() == "" and mem.read("x") == ""
    mem.write("build", "Run `make` first.\n", description="how to build")
    mem.append("build", "Then `make test`.")
    mem.append("gotchas", "The parser is slow.", description="known traps")
    assert mem.read("build") == "Run `make` first.\nThen `make test`.\n"
    assert mem.index() == {"build": "how to build", "gotchas": "known traps"}
    assert "- build.md: how to build" in mem.index_text()
    mem.write("build", "new text")  # no description: the old one stays
    assert mem.index()["build"] == "how to build"
    assert mem.delete("build") and not mem.delete("build")
    assert list(mem.index()) == ["gotchas"]


@pytest.mark.parametrize("topic", ["../x", "a/b", "", "UPPER", ".hidden"])
def test_bad_topic_names_are_refused(tmp_path: Path, topic: str) -> None:
    with pytest.raises(MemoryStoreError):
        Memory(tmp_path).write(topic, "x")


def test_two_processes_writing_lose_nothing(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), who])
        for who in ("alice", "bob")
    ]
    for p in procs:
        assert p.wait(timeout=60) == 0
    mem = Memory(tmp_path)
    lines = mem.read("shared").splitlines()
    assert sorted(lines) == sorted(f"{w} note {i}" for w in ("alice", "bob") for i in range(40))
    for who in ("alice", "bob"):  # each process's order is kept
        mine = [ln for ln in lines if ln.startswith(who)]
        assert mine == [f"{who} note {i}" for i in range(40)]
    expected = {"shared"} | {f"{w}-{k}" for w in ("alice", "bob") for k in range(3)}
    assert set(mem.index()) == expected
