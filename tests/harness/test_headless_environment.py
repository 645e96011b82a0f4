"""``teamctl ask``'s agent runs ``bash`` with the settings' ``env`` and ``command_env`` and without
the model credentials: the transcript never holds the key."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from harness.headless import EXIT_OK, run_ask
from harness.model.scripted import ScriptedModel
from harness.tools.base import Approver, ToolPolicy
from tests.support.fakes import AllowAll

KEY = "sk-ant-ask-secret"


def allow_all(root: Path, mode: str, approver: Approver | None) -> ToolPolicy:
    return AllowAll()


def test_env_in_a_tool_call_shows_neither_the_key_nor_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("DEPLOY_TOKEN", "deploy-value")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user-scope settings
    (tmp_path / ".team").mkdir()
    (tmp_path / ".team" / "settings.json").write_text(
        json.dumps({"env": {"FROM_SETTINGS": "yes"}, "command_env": {"secret": ["DEPLOY_*"]}})
    )
    model = ScriptedModel(
        {
            "agents": {
                "ask": {
                    "steps": [
                        {"tool_uses": [{"name": "bash", "input": {"command": "env"}}]},
                        {"match": "FROM_SETTINGS=yes", "text": "done"},
                    ]
                }
            }
        }
    )
    out, err = io.StringIO(), io.StringIO()
    code = run_ask(
        tmp_path, "show env", model_client=model, policy_factory=allow_all, out=out, err=err
    )
    assert code == EXIT_OK, err.getvalue()
    model.assert_consumed()
    transcript = (tmp_path / ".team" / "transcripts" / "ask.jsonl").read_text()
    assert "FROM_SETTINGS=yes" in transcript
    assert KEY not in transcript and "deploy-value" not in transcript
