"""Claude Code's user folder: ``$CLAUDE_CONFIG_DIR`` when set, else ``$HOME/.claude``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.context.instructions import load_instructions
from harness.context.skills import skill_scopes
from harness.settings import claude_user_dir, settings_files


def test_config_dir_wins_over_home(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home"), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    assert claude_user_dir(environ=env) == tmp_path / "cfg"
    assert claude_user_dir(environ={"HOME": str(tmp_path)}) == tmp_path / ".claude"
    assert claude_user_dir(environ={}) is None
    assert claude_user_dir(tmp_path / "h", environ=env) == tmp_path / "h" / ".claude"
    user = [f for f in settings_files(tmp_path, None, env) if f.scope == "user"]
    assert [f.path for f in user] == [tmp_path / "cfg" / "settings.json"]


def test_skills_and_instructions_read_the_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "cfg"
    (cfg / "skills").mkdir(parents=True)
    (cfg / "CLAUDE.md").write_text("Always answer in haiku.\n")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(cfg))
    repo = tmp_path / "repo"
    repo.mkdir()
    assert ("personal", cfg / "skills") in skill_scopes(repo)
    assert "Always answer in haiku." in load_instructions(repo).text()
