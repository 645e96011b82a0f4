"""McpManager against real MCP servers (child processes over stdio): lifecycle and calls."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.mcp.client import McpManager, McpServerCrashed, McpTimeout
from harness.mcp.config import McpConfigError, McpError, McpOptions, load_mcp_servers
from tests.harness.mcp_servers import alive, basic_server, children_of


def make_manager(root: Path, servers: dict[str, Any], **options: Any) -> McpManager:
    return McpManager(
        load_mcp_servers(root, servers),
        root=root,
        options=McpOptions(**options),
        log_dir=root / ".team" / "mcp",
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpManager]:
    """One running basic server for the tests that do not stop or crash it."""
    root = tmp_path_factory.mktemp("mcp-shared")
    manager = make_manager(root, {"basic": basic_server()}, call_timeout_s=30)
    yield manager
    manager.close()


def text_of(result: Any) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")


def test_nothing_starts_until_first_use(tmp_path: Path) -> None:
    before = children_of(os.getpid())
    manager = make_manager(tmp_path, {"basic": basic_server()})
    try:
        assert manager.status("basic").state == "idle"
        assert children_of(os.getpid()) == before
        status = manager.connect("basic")
        assert status.state == "ready"
        assert (status.server_name, status.server_version) == ("test-basic", "1.2.3")
    finally:
        manager.close()


def test_lists_tools_in_stable_order_with_schemas_and_annotations(shared: McpManager) -> None:
    tools = shared.tools("basic")
    names = [t.name for t in tools]
    assert names == sorted(names)
    assert {"echo", "add", "fail", "slow", "crash", "pid", "picture", "wipe"} <= set(names)
    add = next(t for t in tools if t.name == "add")
    assert add.input_schema["required"] == ["a", "b"]
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    echo = next(t for t in tools if t.name == "echo")
    assert echo.annotations == {"readOnlyHint": True, "destructiveHint": False}
    assert shared.tools("basic") == tools


def test_calls_a_tool_and_sees_tool_errors(shared: McpManager) -> None:
    result = shared.call_tool("basic", "add", {"a": 2, "b": 40})
    assert (text_of(result), result.structured_content, result.is_error) == (
        "42",
        {"result": 42},
        False,
    )
    failed = shared.call_tool("basic", "fail", {"message": "no such branch"})
    assert failed.is_error
    assert "no such branch" in text_of(failed)


def test_one_session_is_shared_by_every_caller(shared: McpManager) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        pids = set(pool.map(lambda _: text_of(shared.call_tool("basic", "pid", {})), range(8)))
    assert len(pids) == 1


def test_resources_are_listed_and_read(shared: McpManager) -> None:
    found = {r.uri: r for r in shared.list_resources("basic")}
    assert found["memo://greeting"].description == "A greeting"
    assert found["memo://greeting"].mime_type == "text/plain"
    text = shared.read_resource("basic", "memo://greeting")
    assert text.contents[0].text == "hello from the memo"
    blob = shared.read_resource("basic", "memo://data")
    assert blob.contents[0].blob == "AAEC"


def test_unknown_server_names_the_configured_ones(shared: McpManager) -> None:
    with pytest.raises(McpError, match="unknown MCP server 'nope'; configured: basic"):
        shared.tools("nope")


def test_a_slow_tool_times_out_and_the_session_stays_usable(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, {"basic": basic_server()}, call_timeout_s=0.5)
    try:
        with pytest.raises(McpTimeout, match=r"did not answer within 0\.5s"):
            manager.call_tool("basic", "slow", {"seconds": 30})
        assert text_of(manager.call_tool("basic", "echo", {"text": "still here"})) == "still here"
        assert manager.status("basic").restarts == 0
    finally:
        manager.close()


def test_a_crash_mid_call_is_an_error_then_the_server_restarts(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, {"basic": basic_server()}, max_restarts=1)
    try:
        first = int(text_of(manager.call_tool("basic", "pid", {})))
        with pytest.raises(McpServerCrashed) as err:
            manager.call_tool("basic", "crash", {})
        assert "restarted on next use" in str(err.value)
        assert "crashing on purpose" in str(err.value)  # the tail of the server's stderr
        assert manager.status("basic").state == "crashed"
        second = int(text_of(manager.call_tool("basic", "pid", {})))
        assert second != first
        assert not alive(first)
        assert manager.status("basic").restarts == 1
        with pytest.raises(McpServerCrashed):
            manager.call_tool("basic", "crash", {})
        with pytest.raises(McpError, match="gave up after 1 restart"):
            manager.call_tool("basic", "pid", {})
        assert manager.status("basic").state == "failed"
    finally:
        manager.close()
    assert not alive(second)


def test_a_server_that_cannot_start_is_retried_a_bounded_number_of_times(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, {"bad": basic_server("--crash-on-start")}, max_restarts=2)
    try:
        for _ in range(3):
            with pytest.raises(McpError, match="did not start") as err:
                manager.connect("bad")
            assert "configuration broken" in str(err.value)
        with pytest.raises(McpError, match="gave up after 2 restart"):
            manager.connect("bad")
    finally:
        manager.close()


def test_the_handshake_has_a_timeout_and_the_stuck_server_is_killed(tmp_path: Path) -> None:
    before = children_of(os.getpid())
    manager = make_manager(
        tmp_path, {"stuck": basic_server("--slow-start", "600")}, init_timeout_s=0.5
    )
    try:
        with pytest.raises(McpTimeout, match=r"handshake within 0\.5s"):
            manager.connect("stuck")
        assert children_of(os.getpid()) == before
    finally:
        manager.close()


def test_a_missing_command_is_a_start_error(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, {"ghost": {"command": str(tmp_path / "no-such-binary")}})
    try:
        with pytest.raises(McpError, match="'ghost' did not start"):
            manager.connect("ghost")
    finally:
        manager.close()


def test_a_missing_variable_fails_only_that_server(tmp_path: Path) -> None:
    servers = {
        "needs-token": {**basic_server(), "env": {"TOKEN": "${MCP_TEST_UNSET_TOKEN}"}},
        "fine": basic_server(),
    }
    manager = McpManager(
        load_mcp_servers(tmp_path, servers), root=tmp_path, environ={"PATH": os.environ["PATH"]}
    )
    try:
        with pytest.raises(McpConfigError, match=r"'needs-token'.*MCP_TEST_UNSET_TOKEN"):
            manager.connect("needs-token")
        assert manager.status("needs-token").state == "failed"
        assert manager.connect("fine").state == "ready"
    finally:
        manager.close()


def test_env_from_the_config_reaches_the_server(tmp_path: Path) -> None:
    entry = {
        "command": sys.executable,
        "args": ["-c", "import os,sys; sys.stderr.write(os.environ['GREETING']); sys.exit(1)"],
        "env": {"GREETING": "${WHO:-nobody} says hi"},
    }
    manager = make_manager(tmp_path, {"env": entry}, max_restarts=0)
    try:
        with pytest.raises(McpError, match="nobody says hi"):
            manager.connect("env")
    finally:
        manager.close()


def test_close_stops_every_server_and_leaves_no_process(tmp_path: Path) -> None:
    before = children_of(os.getpid())
    manager = make_manager(tmp_path, {"a": basic_server(), "b": basic_server()})
    pids = {int(text_of(manager.call_tool(name, "pid", {}))) for name in ("a", "b")}
    assert len(pids) == 2
    assert pids <= children_of(os.getpid())
    manager.close()
    assert not any(alive(p) for p in pids)
    assert children_of(os.getpid()) == before
    manager.close()  # idempotent
    with pytest.raises(McpError, match="shut"):
        manager.call_tool("a", "pid", {})
