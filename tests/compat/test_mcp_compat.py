"""Real ``.mcp.json`` files parse as Claude Code reads them, and a bad entry added to any of them
disables that server only. Parsing and configuration only: no server is started (several would
download packages with ``npx``/``uvx``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.mcp.config import load_mcp_config
from tests.compat import artifacts
from tests.compat.support import git_repo

FILES = artifacts.of_kind("mcp")


@pytest.mark.parametrize("artifact", FILES, ids=[a.id for a in FILES])
def test_real_mcp_json_parses_every_server(tmp_path: Path, artifact: artifacts.Artifact) -> None:
    root = git_repo(tmp_path)
    dest = artifacts.install(artifact.file, root / ".mcp.json")
    raw = json.loads(dest.read_bytes())
    config = load_mcp_config(root)
    assert config.invalid == {}
    assert sorted(config.servers) == sorted(raw["mcpServers"])
    for name, entry in raw["mcpServers"].items():
        server = config.servers[name]
        assert server.type == entry.get("type", "stdio")
        if server.type == "stdio":
            assert server.command == entry["command"]
            assert list(server.args) == entry.get("args", [])
        else:
            assert server.url == entry["url"]


@pytest.mark.parametrize("artifact", FILES, ids=[a.id for a in FILES])
def test_a_bad_entry_disables_only_that_server(
    tmp_path: Path, artifact: artifacts.Artifact
) -> None:
    root = git_repo(tmp_path)
    raw = json.loads(artifacts.need(artifact.file).read_bytes())
    raw["mcpServers"]["broken"] = {"type": "stdio", "args": ["no command"]}
    raw["mcpServers"]["wrong-type"] = {"type": "carrier-pigeon", "url": "x"}
    (root / ".mcp.json").write_text(json.dumps(raw))
    config = load_mcp_config(root)
    assert sorted(config.invalid) == ["broken", "wrong-type"]
    assert all("disabled" in why for why in config.invalid.values())
    assert sorted(config.servers) == sorted(k for k in raw["mcpServers"] if k not in config.invalid)


def test_unknown_keys_warn_and_keep_the_server(tmp_path: Path) -> None:
    """jp-spec-kit's file gives every server a ``description`` and has a top-level ``_notes``."""
    root = git_repo(tmp_path)
    artifacts.install("mcp/jpoley__jp-spec-kit__.mcp.json", root / ".mcp.json")
    config = load_mcp_config(root)
    assert len(config.servers) == 9 and config.invalid == {}
    assert any("description" in w for w in config.warnings)
