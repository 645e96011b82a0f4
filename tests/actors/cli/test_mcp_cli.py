"""``mcp list`` / ``mcp call`` in-process (click's runner) against the test server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from actors.cli.mcp import find_root, mcp_group
from tests.harness.mcp_servers import basic_server


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    # "dead" is a real stdio server process that exits at once (status 3), before any handshake.
    dead = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"basic": basic_server(), "dead": dead}})
    )
    (tmp_path / ".team").mkdir()
    (tmp_path / ".team" / "settings.json").write_text(
        json.dumps({"mcpServers": {"broken": basic_server("--crash-on-start")}})
    )
    return tmp_path


def test_list_shows_every_server_and_exits_1_naming_each_crashed_one(repo: Path) -> None:
    result = CliRunner().invoke(mcp_group, ["list", "--root", str(repo)])
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert "basic (stdio, test-basic 1.2.3): ready" in lines
    assert "  mcp__basic__echo [read-only, not destructive]  Return the text unchanged." in lines
    assert "broken (stdio): crashed" in lines
    assert "dead (stdio): crashed" in lines
    errors = result.stderr.splitlines()
    assert [e.split(":", 1)[0] for e in errors] == ["error", "error"], errors
    assert errors[0].startswith("error: MCP server 'broken' crashed: ")
    assert "configuration broken" in errors[0]
    assert errors[1].startswith("error: MCP server 'dead' crashed")


def test_list_json(repo: Path) -> None:
    result = CliRunner().invoke(mcp_group, ["list", "--json", "--root", str(repo)])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)  # stdout stays exactly JSON; the errors go to stderr
    basic = next(s for s in data["servers"] if s["name"] == "basic")
    add = next(t for t in basic["tools"] if t["name"] == "add")
    assert add["model_name"] == "mcp__basic__add"
    assert {s["name"]: s["state"] for s in data["servers"]} == {
        "basic": "ready",
        "broken": "crashed",
        "dead": "crashed",
    }
    assert [e.split("'")[1] for e in result.stderr.splitlines()] == ["broken", "dead"]


@pytest.mark.parametrize("as_json", [False, True])
def test_list_exits_0_when_every_server_started(tmp_path: Path, as_json: bool) -> None:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"basic": basic_server()}}))
    args = ["list", "--root", str(tmp_path), *(["--json"] if as_json else [])]
    result = CliRunner().invoke(mcp_group, args)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    assert "basic" in result.stdout


def test_call_prints_the_result_and_exits_1_on_a_tool_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "sub").mkdir()
    monkeypatch.chdir(repo / "sub")
    ok = CliRunner().invoke(mcp_group, ["call", "basic", "add", '{"a": 20, "b": 22}'])
    assert (ok.exit_code, ok.output) == (0, "42\n")
    failed = CliRunner().invoke(mcp_group, ["call", "basic", "fail", '{"message": "nope"}'])
    assert failed.exit_code == 1
    assert "nope" in failed.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["call", "basic", "add", "{oops"], "not valid JSON"),
        (["call", "basic", "add", "[1]"], "must be a JSON object"),
        (["call", "ghost", "x"], "unknown MCP server 'ghost'; configured: basic, broken, dead"),
    ],
)
def test_call_errors_are_one_line(repo: Path, args: list[str], needle: str) -> None:
    result = CliRunner().invoke(mcp_group, [*args, "--root", str(repo)])
    assert result.exit_code == 1
    assert needle in result.output
    assert "Traceback" not in result.output


def test_find_root_walks_up(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_root(deep) == tmp_path.resolve()


def test_a_bad_entry_fails_that_server_not_the_listing(tmp_path: Path) -> None:
    servers = {"x": {"args": [], "description": "broken"}, "ok": basic_server()}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    result = CliRunner().invoke(mcp_group, ["list", "--root", str(tmp_path)])
    assert result.exit_code == 1
    assert "ok (stdio, test-basic 1.2.3): ready" in result.stdout
    [error] = result.stderr.strip().splitlines()
    assert error.startswith("error: MCP server 'x' failed: ") and "needs `command`" in error


def test_a_file_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{not json")
    result = CliRunner().invoke(mcp_group, ["list", "--root", str(tmp_path)])
    assert result.exit_code == 1
    assert "not valid JSON" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_no_servers(tmp_path: Path) -> None:
    result = CliRunner().invoke(mcp_group, ["list", "--root", str(tmp_path)])
    assert result.exit_code == 0
    assert "No MCP servers configured" in result.output
