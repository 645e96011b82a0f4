"""``teamctl status`` checks the merged settings, but loads the settings models again only when
something the last clean check depended on changed (``.team/settings.ok``): a settings file of
any scope, the environment that picks them, or the code that checked them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import actors.settings
from actors.cli.team import SETTINGS_CHECKED
from tests.actors.cli.cli_support import git_repo, ok, run


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Records every full settings check ``status`` makes (the path it loaded)."""
    seen: list[Path] = []
    real = actors.settings.load_settings

    def counting(path: Path, environ: object = None) -> actors.settings.Settings:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(actors.settings, "load_settings", counting)
    return seen


def test_a_clean_check_is_remembered_until_a_settings_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checks: list[Path]
) -> None:
    root = git_repo(tmp_path, monkeypatch)  # `init` checks the settings it wrote
    record = root / ".team" / SETTINGS_CHECKED
    assert record.is_file() and len(checks) == 1
    assert not ok(["status"]).stderr and len(checks) == 1  # nothing changed: not checked again
    record.unlink()
    assert not ok(["status"]).stderr and len(checks) == 2
    assert record.is_file()
    assert not ok(["status"]).stderr and len(checks) == 2
    settings = root / ".team" / "settings.json"
    settings.write_text('{"team": {"max_teamates": 3}}')
    result = run(["status"])
    assert result.exit_code == 0 and len(checks) == 3
    assert "warning: settings" in result.stderr and "team.max_teamates" in result.stderr
    result = run(["status"])  # a problem is never remembered
    assert "team.max_teamates" in result.stderr and len(checks) == 4
    settings.write_text('{"team": {"max_teammates": 3}}')
    assert not ok(["status"]).stderr and len(checks) == 5
    assert not ok(["status"]).stderr and len(checks) == 5


def test_a_settings_file_of_another_scope_appearing_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checks: list[Path]
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    ok(["status"])
    assert len(checks) == 1
    extra = tmp_path / "extra.json"
    extra.write_text('{"team": {"max_teamates": 3}}')
    monkeypatch.setenv("TEAMCTL_SETTINGS", str(extra))  # the environment picks another file
    assert "team.max_teamates" in run(["status"]).stderr and len(checks) == 2
    monkeypatch.delenv("TEAMCTL_SETTINGS")
    ok(["status"])
    assert len(checks) == 2  # back to what was checked clean
    local = root / ".claude" / "settings.local.json"  # a scope that was missing
    local.parent.mkdir()
    local.write_text("{}")
    ok(["status"])
    assert len(checks) == 3


def test_a_damaged_or_stale_record_only_costs_a_full_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checks: list[Path]
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    record = root / ".team" / SETTINGS_CHECKED
    for damaged in ("not json", "[]", '{"settings": 1}', ""):
        record.write_text(damaged)
        assert not ok(["status"]).stderr
    assert len(checks) == 5
    known = json.loads(record.read_text())
    assert str(root / ".team" / "settings.json") in known["settings"]
    assert any(p.endswith(os.path.join("actors", "settings.py")) for p in known["code"])
    record.write_text(json.dumps({**known, "fingerprint": "0" * 64}))  # e.g. teamctl upgraded
    ok(["status"])
    assert len(checks) == 6 and json.loads(record.read_text()) == known
