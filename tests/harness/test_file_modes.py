"""Files that hold what agents read are private: transcripts and MCP server logs are mode 0600,
also when an older version left them readable by others."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.mcp.client import McpManager
from harness.mcp.config import McpError, McpServerConfig
from harness.ports import Message, TextBlock
from harness.transcript import Transcript


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_transcript_is_written_with_mode_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        t = Transcript.for_agent(tmp_path / "transcripts", "lead", fsync=False)
        t.message(Message(role="user", content=(TextBlock(text="hi"),)))
        t.close()
        assert mode(tmp_path / "transcripts" / "lead.jsonl") == 0o600
        legacy = tmp_path / "transcripts" / "w1.jsonl"
        legacy.write_text("")
        legacy.chmod(0o644)
        t = Transcript.for_agent(tmp_path / "transcripts", "w1", fsync=False)
        t.meta(agent="w1")
        t.close()
        assert mode(legacy) == 0o600
    finally:
        os.umask(old)


def test_an_mcp_server_log_is_written_with_mode_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    logs = tmp_path / "mcp"
    try:
        manager = McpManager(
            {"dead": McpServerConfig(command="/nonexistent/server")},
            root=tmp_path,
            log_dir=logs,
        )
        try:
            with pytest.raises(McpError):
                manager.connect("dead")
        finally:
            manager.close()
    finally:
        os.umask(old)
    assert mode(logs / "dead.log") == 0o600
