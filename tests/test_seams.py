"""Static checks of the seams (docs/ARCHITECTURE.md, "Backends and seams"): outside ``mailboxes/``
nothing names a Maildir folder or the transcripts folder, calls a Maildir-only method, reads a
transcript file or imports the file stores directly, so that another backend can stand behind
the ports of ``mailboxes/ports.py``.

The allowlist names the files not converted yet; it may only shrink.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FOLDERS = frozenset({"mailboxes", "new", "cur", "tmp", "bad", "journal.jsonl", "transcripts"})
"""String constants that are Maildir folders, the journal file or the transcripts folder."""
FILE_READERS = frozenset({"load_transcript", "FileJournal", "FileWatcher"})
"""Readers of one backend's files: a transcript file (``TranscriptStore`` instead), the journal
file (``Team.journal``), a watcher of paths (``Team.watch``)."""
MAILDIR_ONLY = frozenset({"counts", "inbox", "agent_for_path", "prune", "recover", "deliver_many"})
"""``Maildir`` methods that are not part of the ``Mailbox`` protocol."""
FILE_MODULES = frozenset({"mailboxes.maildir", "mailboxes.watch"})
"""The file ``Mailbox`` and the file ``Watcher``: built only where backends are chosen."""

ALLOWED: dict[str, str] = {
    "actors/factory.py": "the composition root: builds the file backend",
    "actors/jobs/scheduler.py": "MaildirDelivery, for tests and tools without a team",
    "actors/cli/main.py": "names the package 'mailboxes', not a folder",
    "actors/live/load.py": "not converted yet: read counts for the live view",
    "actors/live/view.py": "not converted yet: the live view's watcher takes paths",
    "actors/runtime/members.py": "the hosting process writes its agents' transcripts as files",
    "actors/runtime/hosting.py": "resuming reads whether the hosted agent's own transcript exists",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants (prose may describe the file layout)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def offences(source: str) -> list[str]:
    """What in ``source`` goes around the seams (empty: nothing)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out: list[str] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in FOLDERS
            and id(node) not in docs
        ):
            out.append(f"line {node.lineno}: names the file store's {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr in MAILDIR_ONLY:
            out.append(f"line {node.lineno}: calls Maildir-only .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in FILE_READERS:
            out.append(f"line {node.lineno}: uses the file-only {node.id}")
        elif isinstance(node, ast.ImportFrom) and node.module in FILE_MODULES:
            out.append(f"line {node.lineno}: imports {node.module}")
        elif isinstance(node, ast.Import):
            out.extend(
                f"line {node.lineno}: imports {alias.name}"
                for alias in node.names
                if alias.name in FILE_MODULES
            )
    return out


def test_actors_reach_the_durable_layer_only_through_its_ports() -> None:
    found = {}
    for path in sorted((ROOT / "actors").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED:
            continue
        bad = offences(path.read_text(encoding="utf-8"))
        if bad:
            found[rel] = bad
    assert found == {}


def test_the_allowlist_only_names_files_that_still_need_it() -> None:
    for rel in ALLOWED:
        path = ROOT / rel
        assert path.is_file(), rel
        assert offences(path.read_text(encoding="utf-8")), f"{rel} is clean: drop it from ALLOWED"


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.listdir(box / 'new')\n",
        "team_dir / 'mailboxes'\n",
        "mailbox.counts(name)[0]\n",
        "mailbox.inbox(name)\n",
        "from mailboxes.maildir import Maildir\n",
        "import mailboxes.watch\n",
        "load_transcript(root / 'x.jsonl')\n",
        "team_dir / 'transcripts'\n",
        "FileJournal(team_dir, read_only=True)\n",
        "FileWatcher([path], hint)\n",
    ],
)
def test_each_way_around_the_seams_is_caught(source: str) -> None:
    assert offences(source)


def test_prose_and_protocol_calls_are_not_offences() -> None:
    source = '"""Acked messages move from new/ to cur/: see ``mailboxes``."""\n'
    source += "def f(box):\n    '''new'''\n    return box.unread('bob'), box.has_unread('ann')\n"
    assert offences(source) == []
