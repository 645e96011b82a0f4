"""The real artifacts of the compatibility suite: the manifest, and where the files are.

``manifest.json`` lists every artifact (repository, path, commit, licence, SHA-256). The files
themselves are third-party content and are not committed (``tests/compat/README.md``): they are
looked for, in order, in ``$TEAMCTL_COMPAT_DATA``, ``tests/compat/data/`` and ``../shared/compat/``
beside the repository. A test whose artifact is missing skips loudly (``conftest.py``), or fails
under ``TEAMCTL_REQUIRE_COMPAT=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DATA_ENV = "TEAMCTL_COMPAT_DATA"
REQUIRE_ENV = "TEAMCTL_REQUIRE_COMPAT"

missing: list[str] = []
"""Artifacts a test wanted and did not find (for the end-of-run summary)."""


@dataclass(frozen=True)
class Artifact:
    kind: str
    file: str
    """Path under the data folder: ``<kind>/<owner>__<repo>__<name>``."""
    repo: str
    path: str
    commit: str
    licence: str
    sha256: str
    redistributable: bool

    @property
    def id(self) -> str:
        return self.file.split("/", 1)[1]


def manifest() -> tuple[Artifact, ...]:
    rows = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
    return tuple(Artifact(**row) for row in rows)


def of_kind(kind: str) -> tuple[Artifact, ...]:
    return tuple(a for a in manifest() if a.kind == kind)


def by_file(file: str) -> Artifact:
    for a in manifest():
        if a.file == file:
            return a
    raise KeyError(file)


def data_roots() -> list[Path]:
    roots = [Path(os.environ[DATA_ENV])] if os.environ.get(DATA_ENV) else []
    return [*roots, HERE / "data", REPO.parent / "shared" / "compat"]


def find(artifact: Artifact) -> Path | None:
    for root in data_roots():
        path = root / artifact.file
        if path.is_file():
            return path
    return None


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def need(file: str) -> Path:
    """The artifact's file, checked against its SHA-256; skip loudly (or fail) when absent."""
    artifact = by_file(file)
    path = find(artifact)
    if path is None:
        why = f"compat artifact {file} ({artifact.repo}) is not on this machine"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{why} and {REQUIRE_ENV}=1")
        missing.append(file)
        pytest.skip(why)
    assert digest(path) == artifact.sha256, (
        f"{path} is not the file of {artifact.repo}@{artifact.commit}"
    )
    return path


def install(file: str, dest: Path) -> Path:
    """Copy the artifact to ``dest`` (parents made), keeping its mode bits executable."""
    src = need(file)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    dest.chmod(0o755 if dest.suffix in (".py", ".sh") else 0o644)
    return dest


def install_skill(folder: str, dest: Path) -> Path:
    """Copy every file of one skill folder (``skills/<owner>__<repo>__<name>``) to ``dest``."""
    files = [a for a in manifest() if a.file.startswith(folder + "/")]
    assert files, folder
    for a in files:
        install(a.file, dest / a.file[len(folder) + 1 :])
    return dest
