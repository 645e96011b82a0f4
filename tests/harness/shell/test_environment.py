"""The environment of child processes: no model credentials, settings' secrets removed, ``env``
applied; through the real ``bash`` tool and real hook commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.hooks import HookRunner, HookSession
from harness.settings import HookSettings
from harness.shell.environment import (
    COMMAND_ENV_KEY,
    MODEL_CREDENTIALS,
    CommandEnv,
    CommandEnvSettings,
    child_environment,
)
from harness.tools.base import ToolContext
from harness.tools.bash import BashInput, BashTool

KEY = "sk-ant-test-secret-value"


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "auth-token-value")
    monkeypatch.setenv("GITHUB_TOKEN", "gh-token-value")
    monkeypatch.setenv("MY_APP_SECRET", "app-secret-value")
    monkeypatch.setenv("PLAIN_SETTING", "plain-value")


def test_model_credentials_are_removed_by_default(credentials: None) -> None:
    env = child_environment()
    assert "ANTHROPIC_API_KEY" not in env and "ANTHROPIC_AUTH_TOKEN" not in env
    assert env["GITHUB_TOKEN"] == "gh-token-value" and env["PLAIN_SETTING"] == "plain-value"
    assert env["PATH"]
    base = {name: "x" for name in MODEL_CREDENTIALS}
    assert child_environment(base=base) == {}


def test_secret_pass_and_env_settings(credentials: None) -> None:
    section = CommandEnvSettings.model_validate(
        {"secret": ["GITHUB_TOKEN", "*_SECRET"], "pass": ["ANTHROPIC_AUTH_TOKEN"]}
    )
    policy = CommandEnv.from_settings({"PLAIN_SETTING": "from-settings", "NEW": "1"}, section)
    env = policy.environment()
    assert "GITHUB_TOKEN" not in env and "MY_APP_SECRET" not in env
    assert "ANTHROPIC_API_KEY" not in env
    assert env["ANTHROPIC_AUTH_TOKEN"] == "auth-token-value"  # passed on
    assert env["PLAIN_SETTING"] == "from-settings" and env["NEW"] == "1"
    assert section.model_dump(by_alias=True) == {
        "secret": ("GITHUB_TOKEN", "*_SECRET"),
        "pass": ("ANTHROPIC_AUTH_TOKEN",),
    }


def run_env(ctx: ToolContext) -> str:
    out = BashTool().run(BashInput(command="env"), ctx)
    assert not out.is_error, out.content
    return out.content


def test_bash_env_does_not_print_the_key(credentials: None, tmp_path: Path) -> None:
    ctx = ToolContext(agent="a", root=tmp_path, cwd=tmp_path)
    text = run_env(ctx)
    assert KEY not in text and "ANTHROPIC_API_KEY" not in text
    assert "auth-token-value" not in text
    assert "PLAIN_SETTING=plain-value" in text


def test_bash_gets_the_settings_env_and_a_passed_on_variable(
    credentials: None, tmp_path: Path
) -> None:
    policy = CommandEnv(
        env={"FROM_SETTINGS": "yes"}, secret=("GITHUB_TOKEN",), pass_on=("ANTHROPIC_API_KEY",)
    )
    ctx = ToolContext(agent="a", root=tmp_path, cwd=tmp_path, extra={COMMAND_ENV_KEY: policy})
    text = run_env(ctx)
    assert f"ANTHROPIC_API_KEY={KEY}" in text
    assert "FROM_SETTINGS=yes" in text
    assert "gh-token-value" not in text


def test_hook_commands_run_without_the_key(credentials: None, tmp_path: Path) -> None:
    out = tmp_path / "hook-env.json"
    script = tmp_path / "hook.py"
    script.write_text(
        f"import json, os, sys\nopen({str(out)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
    )
    hooks = HookSettings.parse(
        {"PreToolUse": [{"hooks": [{"type": "command", "command": f"{sys.executable} {script}"}]}]}
    )
    payload = {"cwd": str(tmp_path), "agent_name": "a", "tool_name": "Bash"}
    HookRunner(settings=hooks).run("PreToolUse", payload)
    seen = json.loads(out.read_text())
    assert "ANTHROPIC_API_KEY" not in seen and seen["PLAIN_SETTING"] == "plain-value"
    policy = CommandEnv(env={"FROM_SETTINGS": "yes"}, pass_on=("ANTHROPIC_API_KEY",))
    session = HookSession(command_env=policy)
    HookRunner(settings=hooks).run("PreToolUse", payload, session=session)
    seen = json.loads(out.read_text())
    assert seen["ANTHROPIC_API_KEY"] == KEY and seen["FROM_SETTINGS"] == "yes"
