"""Skills: catalog from SKILL.md frontmatter, bodies loaded on demand."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.context.skills import SkillError, SkillLibrary, parse_skill


def write_skill(root: Path, where: str, folder: str, text: str) -> Path:
    path = root / where / "skills" / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_catalog_lists_both_folders_and_team_wins_on_clash(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        ".team",
        "release",
        "---\nname: release\ndescription: Cut a release.\n---\n# Steps\n1. tag\n",
    )
    write_skill(
        tmp_path, ".claude", "release", "---\nname: release\ndescription: shadowed\n---\nold\n"
    )
    write_skill(
        tmp_path,
        ".claude",
        "pdf",
        "---\nname: pdf-tools\ndescription: >\n  Work with PDF\n  files.\n---\nUse pdftotext.\n",
    )
    lib = SkillLibrary(tmp_path)
    assert list(lib.skills) == ["pdf-tools", "release"]
    catalog = lib.catalog()
    assert "- release: Cut a release." in catalog and "- pdf-tools: Work with PDF files." in catalog
    assert "shadowed" not in catalog and "tag" not in catalog  # bodies stay out of the prompt
    body = lib.load("release")
    assert body.endswith("# Steps\n1. tag\n") and str(tmp_path / ".team") in body


def test_unknown_skill_names_the_available_ones(tmp_path: Path) -> None:
    write_skill(tmp_path, ".team", "a", "---\nname: a\ndescription: A.\n---\nbody\n")
    with pytest.raises(SkillError, match="available: a"):
        SkillLibrary(tmp_path).load("b")


def test_malformed_skills_are_reported_not_fatal(tmp_path: Path) -> None:
    write_skill(tmp_path, ".team", "nofront", "just text")
    write_skill(tmp_path, ".team", "nodesc", "---\nname: x\n---\nbody")
    write_skill(tmp_path, ".team", "badyaml", "---\nname: [\n---\nbody")
    write_skill(tmp_path, ".team", "ok", "---\ndescription: Fine.\n---\nbody")
    lib = SkillLibrary(tmp_path)
    assert list(lib.skills) == ["ok"]  # name defaults to the folder
    assert len(lib.errors) == 3


def test_no_skills_no_catalog(tmp_path: Path) -> None:
    assert SkillLibrary(tmp_path).catalog() == ""


def test_parse_skill_splits_frontmatter_and_body(tmp_path: Path) -> None:
    path = write_skill(
        tmp_path, ".team", "s", "---\nname: s\ndescription: d\n---\n\nline1\n---\nline2\n"
    )
    skill, body = parse_skill(path)
    assert (skill.name, skill.description, body) == ("s", "d", "line1\n---\nline2\n")
