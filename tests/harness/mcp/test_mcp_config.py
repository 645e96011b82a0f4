"""MCP configuration: .mcp.json + settings, ${VAR} expansion, tool names and collisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.mcp.config import (
    McpConfigError,
    McpServerConfig,
    assign_names,
    load_mcp_config,
    load_mcp_servers,
    mcp_tool_name,
    normalize_part,
)


def write_mcp_json(root: Path, servers: dict[str, object]) -> None:
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_reads_mcp_json_and_settings_override_by_name(tmp_path: Path) -> None:
    write_mcp_json(
        tmp_path,
        {
            "time": {"command": "uvx", "args": ["mcp-server-time"]},
            "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
        },
    )
    servers = load_mcp_servers(
        tmp_path, {"time": {"command": "python", "args": ["-m", "mcp_server_time"]}}
    )
    assert list(servers) == ["docs", "time"]
    assert servers["time"].command == "python"
    assert servers["time"].args == ("-m", "mcp_server_time")
    assert servers["docs"].type == "http"
    assert servers["docs"].url == "http://127.0.0.1:9/mcp"


def test_no_file_means_no_servers(tmp_path: Path) -> None:
    assert load_mcp_servers(tmp_path) == {}


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({"args": ["x"]}, "needs `command`"),
        ({"type": "http"}, "needs `url`"),
        ({"url": "http://127.0.0.1:9/mcp"}, '`url` needs `type` "http" or "sse"'),
        ({"type": "websocket", "url": "ws://x"}, "type"),
        ({"command": 7}, "command"),
        ("not an object", "expected an object"),
    ],
)
def test_a_bad_entry_disables_that_server_only(tmp_path: Path, entry: object, needle: str) -> None:
    write_mcp_json(tmp_path, {"broken": entry, "good": {"command": "srv"}})
    config = load_mcp_config(tmp_path)
    assert list(config.servers) == ["good"]
    assert config.names == ["broken", "good"]
    why = config.invalid["broken"]
    assert "'broken'" in why and ".mcp.json" in why and needle in why and "disabled" in why
    assert len(why.splitlines()) == 1
    assert load_mcp_servers(tmp_path) == config.servers


def test_unknown_keys_are_ignored_with_a_warning_as_claude_code_does(tmp_path: Path) -> None:
    entry = {"command": "srv", "args": ["-v"], "description": "docs search", "disabled": False}
    write_mcp_json(tmp_path, {"docs": entry})
    config = load_mcp_config(tmp_path)
    assert config.servers["docs"].command == "srv" and config.servers["docs"].args == ("-v",)
    assert config.invalid == {}
    [warning] = config.warnings
    assert "'docs'" in warning and "description, disabled" in warning


def test_a_valid_settings_server_replaces_a_bad_file_entry(tmp_path: Path) -> None:
    write_mcp_json(tmp_path, {"x": {"args": []}})
    config = load_mcp_config(tmp_path, {"x": {"command": "srv"}})
    assert list(config.servers) == ["x"] and config.invalid == {}


def test_invalid_json_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{not json")
    with pytest.raises(McpConfigError, match="not valid JSON"):
        load_mcp_servers(tmp_path)


def test_variables_expand_in_command_args_env_url_and_headers() -> None:
    cfg = McpServerConfig(
        command="${TOOL_BIN}/run",
        args=("--token=${TOKEN}", "${MISSING:-fallback}"),
        env={"HOME_DIR": "${HOME_X}", "LITERAL": "no vars"},
    )
    env = {"TOOL_BIN": "/opt/bin", "TOKEN": "t0k", "HOME_X": "/home/x"}
    out = cfg.expanded("srv", env)
    assert out.command == "/opt/bin/run"
    assert out.args == ("--token=t0k", "fallback")
    assert out.env == {"HOME_DIR": "/home/x", "LITERAL": "no vars"}
    http = McpServerConfig(
        type="http", url="http://127.0.0.1:${PORT}/mcp", headers={"Authorization": "Bearer ${T}"}
    ).expanded("web", {"PORT": "8123", "T": "abc"})
    assert http.url == "http://127.0.0.1:8123/mcp"
    assert http.headers == {"Authorization": "Bearer abc"}


def test_a_missing_variable_names_the_server_variable_and_key() -> None:
    cfg = McpServerConfig(command="srv", env={"API_KEY": "${GITHUB_TOKEN}"})
    with pytest.raises(McpConfigError) as err:
        cfg.expanded("github", {})
    text = str(err.value)
    assert "'github'" in text
    assert "GITHUB_TOKEN" in text
    assert "env.API_KEY" in text


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("time", "get_current_time", "mcp__time__get_current_time"),
        ("my server", "get.item", "mcp__my_server__get_item"),
        ("a__b", "x", "mcp__a_b__x"),
        ("émoji✓", "tool/with:chars", "mcp__moji__tool_with_chars"),
        ("srv", "_private", "mcp__srv__private"),
        ("***", "x-y", "mcp__unnamed__x-y"),
    ],
)
def test_names_are_normalised(server: str, tool: str, expected: str) -> None:
    assert mcp_tool_name(server, tool) == expected


def test_long_names_are_cut_to_64() -> None:
    name = mcp_tool_name("server", "t" * 100)
    assert len(name) == 64
    assert name.startswith("mcp__server__ttt")


def test_normalized_parts_never_contain_the_separator() -> None:
    for raw in ("a__b", "a___b", "__", "a..b", "", "_x_"):
        part = normalize_part(raw)
        assert "__" not in part
        assert not part.startswith("_") and not part.endswith("_")


def test_collisions_are_refused_for_every_pair_involved() -> None:
    names, errors = assign_names(
        [
            ("srv", "get.item"),
            ("srv", "get_item"),
            ("srv", "other"),
            ("s", "x" * 70),
            ("s", "x" * 80),
        ]
    )
    assert names == {("srv", "other"): "mcp__srv__other"}
    assert len(errors) == 2
    joined = "\n".join(errors)
    assert "'get.item'" in joined and "'get_item'" in joined
    assert "mcp__srv__get_item" in joined
