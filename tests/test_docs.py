"""The repository explains itself: it cites no document it does not hold, and
``docs/ARCHITECTURE.md`` names only files, definitions and events that exist.

Each check is a small function over text, tested first on strings made to fail it, then run over
the repository.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mailboxes.events import PAYLOADS

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"

SCANNED_SUFFIXES = frozenset({".py", ".md", ".toml", ".yaml", ".yml"})
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        "__pycache__",
        "teamctl.egg-info",
    }
)
PACKAGES = ("actors", "harness", "mailboxes", "teamctl_base")
TOP_FOLDERS = (*PACKAGES, "tests", "docs", "benchmarks", "scenarios", ".ci")

SECTION_SIGN = "\u00a7"
_OUTSIDE = (
    re.compile(re.escape("DESIGN " + SECTION_SIGN)),
    re.compile(r"\bDESIGN\.md\b"),
    re.compile(r"\bCONVENTIONS\.md\b"),
    re.compile(SECTION_SIGN + r"\s*\d"),
)
_DOC_FILE = re.compile(r"(?<![\w/\"'])docs/[A-Za-z_]+\.md(?![\"'])")
"""A cited document; a quoted path (``write("docs/a.md")``, test data) is not a citation."""
_DOC_SECTION = re.compile(r"(docs/[A-Za-z_]+\.md),\s+\"([^\"\n]+)\"")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_TOP = "|".join(re.escape(t) for t in TOP_FOLDERS)
_PKG = "|".join(PACKAGES)
_REPO_PATH = re.compile(rf"(?:{_TOP})(?:/[\w.\-]+)*/?")
_MODULE = re.compile(rf"(?:{_PKG})(?:\.\w+)+")
_PAIR = re.compile(rf"`((?:{_PKG})/[\w/]+\.py)`\s+`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)`")
_ROW_EVENT = re.compile(r"^\| `([a-z_]+\.[a-z_]+)` \|", re.MULTILINE)


# --- the checks --------------------------------------------------------------------------------


def outside_citations(text: str) -> list[str]:
    """Citations of documents that are not in the repository (section numbers of an outside
    blueprint, its file name)."""
    return [m.group(0) for pattern in _OUTSIDE for m in pattern.finditer(text)]


def missing_documents(text: str, root: Path = ROOT) -> list[str]:
    """``docs/<name>.md`` citations whose file does not exist."""
    return sorted({m for m in _DOC_FILE.findall(text) if not (root / m).is_file()})


def headings(markdown: str) -> set[str]:
    """The text of every Markdown heading."""
    return {
        line.lstrip("#").strip() for line in markdown.splitlines() if re.match(r"#{1,6} ", line)
    }


def missing_sections(text: str, root: Path = ROOT) -> list[str]:
    """``docs/X.md, "Section"`` citations whose document has no such heading."""
    missing = []
    for doc, section in _DOC_SECTION.findall(text):
        path = root / doc
        if not path.is_file() or section not in headings(path.read_text(encoding="utf-8")):
            missing.append(f'{doc}, "{section}"')
    return missing


def named_paths(markdown: str) -> list[str]:
    """Repository paths written in backticks (``actors/board/fold.py``, ``tests/support/``)."""
    return [span for span in _CODE_SPAN.findall(markdown) if _REPO_PATH.fullmatch(span)]


def named_modules(markdown: str) -> list[str]:
    """Dotted names of project modules written in backticks (``actors.board.fold``)."""
    return [span for span in _CODE_SPAN.findall(markdown) if _MODULE.fullmatch(span)]


def module_problem(dotted: str, root: Path = ROOT) -> str | None:
    """Why ``dotted`` names no module (or no name defined in a module), or None."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:n])
        found = base.with_suffix(".py") if base.with_suffix(".py").is_file() else None
        if found is None and (base / "__init__.py").is_file():
            found = base / "__init__.py"
        if found is None:
            continue
        rest = parts[n:]
        if not rest:
            return None
        if len(rest) == 1 and defines(found.read_text(encoding="utf-8"), rest[0]):
            return None
        return f"{dotted}: {'.'.join(rest)} is not defined in {found.relative_to(root)}"
    return f"{dotted}: no such module"


def defines(source: str, name: str) -> bool:
    """Whether ``source`` defines ``name``: a function, a class, or an assignment."""
    pattern = rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b|^\s*{re.escape(name)}\s*[:=]"
    return re.search(pattern, source, re.MULTILINE) is not None


def pair_problems(markdown: str, root: Path = ROOT) -> list[str]:
    """``path.py`` ``Name.attr`` pairs whose file does not define every part of the name."""
    problems = []
    for path, name in _PAIR.findall(markdown):
        file = root / path
        if not file.is_file():
            problems.append(f"{path}: no such file")
            continue
        source = file.read_text(encoding="utf-8")
        problems += [f"{path}: no {part} (in `{name}`)" for part in name.split(".")
                     if not defines(source, part)]  # fmt: skip
    return problems


def catalogue(markdown: str) -> str:
    """The text of the "Event catalogue" section."""
    match = re.search(r"^## Event catalogue\n(.*?)(?=^## )", markdown, re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""


def catalogue_problems(markdown: str, types: set[str]) -> list[str]:
    """Event types missing from the catalogue, and catalogue rows naming no event type."""
    rows = set(_ROW_EVENT.findall(catalogue(markdown)))
    return [f"missing {t}" for t in sorted(types - rows)] + [
        f"unknown {t}" for t in sorted(rows - types)
    ]


def repository_files(root: Path = ROOT) -> Iterator[Path]:
    """Every scanned file of the repository (sources, documents, configuration) but this one,
    whose examples are made to fail the checks."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            path = Path(folder) / name
            if path.resolve() == Path(__file__).resolve():
                continue
            if path.suffix in SCANNED_SUFFIXES or path.parent.name == ".ci":
                yield path


# --- the checks fail when they should ----------------------------------------------------------


def test_outside_citations_are_found() -> None:
    text = "as in DESIGN " + SECTION_SIGN + "4, see " + SECTION_SIGN + "13 and ../shared/DESIGN.md"
    assert len(outside_citations(text)) == 4
    assert outside_citations('see docs/ARCHITECTURE.md, "The journal"') == []


def test_missing_documents_and_sections_are_found() -> None:
    text = 'docs/NOPE.md and docs/ARCHITECTURE.md, "Event catalogue" and docs/RELIABILITY.md'
    assert missing_documents(text) == ["docs/NOPE.md"]
    assert missing_documents('write("docs/a.md")') == []
    assert missing_sections(text) == []
    assert missing_sections('(docs/ARCHITECTURE.md, "No such heading")') == [
        'docs/ARCHITECTURE.md, "No such heading"'
    ]
    assert missing_sections('(docs/NOPE.md, "Any")') == ['docs/NOPE.md, "Any"']


def test_path_and_module_extractors() -> None:
    text = (
        "`actors/board/fold.py`, `tests/support/oracle.py`, `actors/nope.py`, `harness/tools/`, "
        "`.team/journal.jsonl`, `scenarios/<name>/`, `Board.execute`, `actors.board.fold`, "
        "`actors.board.fold.fold_all`, `actors.nope`, `actors.board.fold.nope`"
    )
    paths = named_paths(text)
    assert paths == [
        "actors/board/fold.py",
        "tests/support/oracle.py",
        "actors/nope.py",
        "harness/tools/",
    ]
    assert [p for p in paths if not (ROOT / p).exists()] == ["actors/nope.py"]
    modules = named_modules(text)
    assert [m for m in modules if module_problem(m)] == ["actors.nope", "actors.board.fold.nope"]


def test_pairs_name_definitions() -> None:
    good = "`actors/board/board.py` `Board.execute` and `mailboxes/payloads.py` `PAYLOADS`"
    assert pair_problems(good) == []
    bad = "`actors/board/board.py` `Board.nope` and `actors/nope.py` `x`"
    assert pair_problems(bad) == [
        "actors/board/board.py: no nope (in `Board.nope`)",
        "actors/nope.py: no such file",
    ]


def test_catalogue_check() -> None:
    doc = "## Event catalogue\n\n| `task.created` | a | b |\n| `task.gone` | a | b |\n\n## Next\n"
    assert catalogue_problems(doc, {"task.created", "task.claimed"}) == [
        "missing task.claimed",
        "unknown task.gone",
    ]


# --- the repository ------------------------------------------------------------------------------


def test_architecture_document_exists() -> None:
    assert ARCHITECTURE.is_file()


@pytest.mark.parametrize("check", [outside_citations, missing_documents, missing_sections])
def test_no_file_cites_what_the_repository_lacks(check: Callable[[str], list[str]]) -> None:
    found = {}
    for path in repository_files():
        problems = check(path.read_text(encoding="utf-8", errors="replace"))
        if problems:
            found[str(path.relative_to(ROOT))] = problems
    assert found == {}


DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


def test_the_architecture_names_many_paths_and_definitions() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert len(named_paths(text)) > 50  # the extractors do find the document's names
    assert len(_PAIR.findall(text)) > 50


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.name)
def test_every_path_a_document_names_exists(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert [p for p in named_paths(text) if not (ROOT / p).exists()] == []
    assert [problem for m in named_modules(text) if (problem := module_problem(m))] == []


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.name)
def test_every_definition_a_document_names_exists(doc: Path) -> None:
    assert pair_problems(doc.read_text(encoding="utf-8")) == []


def test_every_journal_event_is_in_the_catalogue() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert catalogue_problems(text, set(PAYLOADS)) == []
