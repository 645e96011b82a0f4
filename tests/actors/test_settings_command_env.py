"""The ``env`` and ``command_env`` settings reach every child process of a team member: its
``bash`` commands (the agent's tool context), its hooks and its MCP servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.runtime.members import MemberPlan, build_agent, hooks_for
from actors.settings import SettingsError, parse_settings
from harness.shell.environment import COMMAND_ENV_KEY, CommandEnv
from harness.tools.bash import BashInput, BashTool
from tests.support.fakes import AllowAll


def test_command_env_section_is_read_and_checked() -> None:
    s = parse_settings(
        {"env": {"A": "1"}, "command_env": {"secret": ["GH_*"], "pass": ["ANTHROPIC_API_KEY"]}},
        "t",
    )
    assert s.child_env() == CommandEnv({"A": "1"}, ("GH_*",), ("ANTHROPIC_API_KEY",))
    assert s.to_json()["command_env"] == {"secret": ["GH_*"], "pass": ["ANTHROPIC_API_KEY"]}
    with pytest.raises(SettingsError, match=r"command_env\.secrets"):
        parse_settings({"command_env": {"secrets": ["X"]}}, "t")


def test_a_member_runs_commands_and_hooks_with_the_settings_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.model.scripted import ScriptedModel

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-member-key")
    monkeypatch.setenv("GH_TOKEN", "gh-value")
    settings = parse_settings(
        {"env": {"FROM_SETTINGS": "yes"}, "command_env": {"secret": ["GH_*"]}}, "t"
    )
    script = tmp_path / "script.yaml"
    script.write_text("agents: {}\n")
    agent = build_agent(
        MemberPlan(name="w1", kind="teammate", model="m"),
        root=tmp_path,
        client=ScriptedModel(script),
        policy=AllowAll(),
        team_tools=[],
        settings=settings,
        hook_runner=None,
        state_provider=None,
        job_runner=None,
        resume=False,
        session_id="s",
        fsync=False,
    )
    try:
        assert agent.tool_context.extra[COMMAND_ENV_KEY] == settings.child_env()
        out = BashTool().run(BashInput(command="env"), agent.tool_context).content
    finally:
        agent.close()
    assert "FROM_SETTINGS=yes" in out
    assert "sk-ant-member-key" not in out and "gh-value" not in out
    hooks_env = hooks_for(settings).env or {}
    assert hooks_env["FROM_SETTINGS"] == "yes" and "ANTHROPIC_API_KEY" not in hooks_env
