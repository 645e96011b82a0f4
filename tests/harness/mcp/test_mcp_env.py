"""What a real stdio MCP server sees: this process's environment without the model credentials,
the settings' ``env``, ``CLAUDE_PROJECT_DIR``, its own ``env`` (``${VAR}`` expanded, which may
pass a credential on explicitly); and a bad entry that fails only its own server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.mcp.client import McpManager
from harness.mcp.config import McpError
from harness.shell.environment import CommandEnv
from tests.harness.mcp_servers import basic_server

KEY = "sk-ant-mcp-secret"


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/custom.pem")
    monkeypatch.setenv("TEAM_DB_PASSWORD", "db-password-value")


def server_env(root: Path, entry: dict[str, Any], **kwargs: Any) -> dict[str, str]:
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"probe": entry}}))
    manager = McpManager.from_config(root, **kwargs)
    try:
        result = manager.call_tool("probe", "environ", {})
    finally:
        manager.close()
    text = "\n".join(b.text for b in result.content if b.type == "text")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_a_stdio_server_sees_no_key_and_gets_the_project_dir(tmp_path: Path) -> None:
    seen = server_env(tmp_path, basic_server("--env-tool"))
    assert "ANTHROPIC_API_KEY" not in seen and KEY not in seen.values()
    assert seen["CLAUDE_PROJECT_DIR"] == str(tmp_path)
    assert seen["SSL_CERT_FILE"] == "/etc/ssl/custom.pem"  # TLS settings reach uvx/npx servers
    assert seen["TEAM_DB_PASSWORD"] == "db-password-value"


def test_settings_env_secrets_and_an_explicit_pass_through_the_servers_env(
    tmp_path: Path,
) -> None:
    entry = basic_server("--env-tool", API_KEY="${ANTHROPIC_API_KEY}", REGION="${REGION:-eu}")
    policy = CommandEnv(env={"FROM_SETTINGS": "yes"}, secret=("TEAM_DB_*",))
    seen = server_env(tmp_path, entry, command_env=policy)
    assert seen["API_KEY"] == KEY  # the entry passes it on by name: the user's choice
    assert "ANTHROPIC_API_KEY" not in seen
    assert seen["REGION"] == "eu" and seen["FROM_SETTINGS"] == "yes"
    assert "TEAM_DB_PASSWORD" not in seen


def test_a_passed_on_credential_reaches_the_server(tmp_path: Path) -> None:
    policy = CommandEnv(pass_on=("ANTHROPIC_API_KEY",))
    seen = server_env(tmp_path, basic_server("--env-tool"), command_env=policy)
    assert seen["ANTHROPIC_API_KEY"] == KEY


def test_a_bad_entry_fails_only_its_server_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers = {
        "broken": {"args": ["x"]},
        "described": {**basic_server(), "description": "a server with a description"},
    }
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    with caplog.at_level("WARNING", logger="harness.mcp"):
        manager = McpManager.from_config(tmp_path)
    try:
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 2
        assert any("'broken'" in line and "needs `command`" in line for line in lines)
        assert any("'described'" in line and "description" in line for line in lines)
        broken = manager.status("broken")
        assert (broken.state, broken.transport) == ("failed", "invalid")
        with pytest.raises(McpError, match=r"'broken' is unavailable: .*needs `command`"):
            manager.tools("broken")
        assert manager.connect("described").state == "ready"
    finally:
        manager.close()
