"""MCP servers the MCP tests start as real child processes (stdio)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASIC = HERE / "basic.py"


def basic_server(*args: str, **env: str) -> dict[str, object]:
    """A ``.mcp.json`` entry that starts ``basic.py`` with this interpreter."""
    entry: dict[str, object] = {"command": sys.executable, "args": [str(BASIC), *args]}
    if env:
        entry["env"] = dict(env)
    return entry


def children_of(pid: int) -> set[int]:
    """Live (non-zombie) processes whose parent is ``pid`` (read from /proc)."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[1]) == pid:
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
