"""The artifact list is complete and honest: every manifest entry is in ``data/SOURCES.md`` with
its repository, path, 40-hex commit and licence; every artifact on this machine is byte for byte
the listed file; and no third-party artifact is committed (only their list)."""

from __future__ import annotations

import re
import subprocess

from tests.compat import artifacts


def test_manifest_and_sources_md_agree() -> None:
    text = (artifacts.HERE / "data" / "SOURCES.md").read_text(encoding="utf-8")
    for a in artifacts.manifest():
        assert re.fullmatch(r"[0-9a-f]{40}", a.commit), a
        assert a.licence.strip(), a
        assert a.file.startswith(f"{a.kind}/{a.repo.replace('/', '__')}__"), a
        row = f"| `{a.file}` | {a.repo} | `{a.path}` | `{a.commit}` | {a.licence} |"
        assert row in text, row


def test_artifacts_present_here_are_the_listed_files() -> None:
    for a in artifacts.manifest():
        path = artifacts.find(a)
        if path is not None:
            assert artifacts.digest(path) == a.sha256, path


def test_no_third_party_artifact_is_committed() -> None:
    tracked = subprocess.run(
        ["git", "-C", str(artifacts.REPO), "ls-files", "tests/compat/data"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert tracked in ([], ["tests/compat/data/SOURCES.md"]), tracked
