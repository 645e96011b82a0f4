"""The fake Messages API on the wire: SSE format, JSON, faults, recording, the CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import pytest

from harness.model.fakeapi import FakeMessagesServer, main
from harness.model.scripted import Fault
from tests.harness.conftest import FakeApiFactory

SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "steps": [
                {
                    "text": "I will list the files in the repository now.",
                    "tool_uses": [{"name": "bash", "input": {"command": "ls -la && git status"}}],
                },
                "All done.",
            ]
        }
    }
}


def body(stream: bool, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hello"}],
        "stream": stream,
        **extra,
    }


def post(
    server: FakeMessagesServer, data: dict[str, Any], agent: str = "lead"
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        server.base_url + "/v1/messages",
        data=json.dumps(data).encode(),
        headers={"content-type": "application/json", "x-teamctl-agent": agent},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for chunk in raw.decode().split("\n\n"):
        if chunk.strip():
            lines = dict(line.split(": ", 1) for line in chunk.splitlines())
            found.append((lines["event"], json.loads(lines["data"])))
    return found


def test_sse_stream_has_the_real_event_sequence(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT)
    status, headers, raw = post(server, body(True))
    assert status == 200 and headers["content-type"] == "text/event-stream"
    seen = events(raw)
    names = [name for name, _ in seen]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    start = seen[0][1]["message"]
    assert (
        start["content"] == [] and start["stop_reason"] is None and start["model"] == "claude-test"
    )
    text = "".join(
        d["delta"]["text"] for n, d in seen if n == "content_block_delta" and d["index"] == 0
    )
    partial = "".join(
        d["delta"]["partial_json"]
        for n, d in seen
        if n == "content_block_delta" and d["index"] == 1
    )
    assert text == "I will list the files in the repository now."
    assert json.loads(partial) == {"command": "ls -la && git status"}
    tool_start = next(d for n, d in seen if n == "content_block_start" and d["index"] == 1)
    assert tool_start["content_block"]["input"] == {}
    assert seen[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_json_response_and_recording(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT)
    post(server, body(False))
    status, _, raw = post(server, body(False, system=[{"type": "text", "text": "s"}]))
    assert status == 200
    message = json.loads(raw)
    assert message["type"] == "message" and message["content"] == [
        {"type": "text", "text": "All done."}
    ]
    assert message["stop_reason"] == "end_turn" and message["usage"]["output_tokens"] > 0
    recorded = server.requests
    assert [r.agent for r in recorded] == ["lead", "lead"]
    assert recorded[1].body["system"] == [{"type": "text", "text": "s"}]
    assert recorded[1].headers["x-teamctl-agent"] == "lead"
    server.model.assert_consumed()


@pytest.mark.parametrize(
    ("fault", "status", "error_type", "retry_after"),
    [
        (Fault(kind="rate_limit", retry_after=7), 429, "rate_limit_error", "7"),
        (Fault(kind="overloaded", retry_after=None), 529, "overloaded_error", None),
        (Fault(kind="server_error"), 500, "api_error", None),
        (Fault(kind="prompt_too_long", tokens=5, maximum=4), 400, "invalid_request_error", None),
        (Fault(kind="spend_limit"), 429, "rate_limit_error", "1"),
    ],
)
def test_error_faults_answer_like_the_api_and_keep_the_step(
    fake_api: FakeApiFactory, fault: Fault, status: int, error_type: str, retry_after: str | None
) -> None:
    server = fake_api(SCRIPT, faults=[fault])
    got, headers, raw = post(server, body(True))
    assert got == status
    error = json.loads(raw)
    assert error["type"] == "error" and error["error"]["type"] == error_type
    assert headers.get("retry-after") == retry_after
    if fault.kind == "prompt_too_long":
        assert error["error"]["message"] == "prompt is too long: 5 tokens > 4 maximum"
    assert post(server, body(False))[0] == 200  # the step was not used up by the fault
    assert len(server.model.unconsumed()["lead"]) == 1


def test_spend_limit_maps_to_the_sdks_spend_limit_error(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="spend_limit")])
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as info:
        client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert type(info.value).__name__ == "EnforcedSpendLimitReachedError"
    assert info.value.error_code == "enforced_spend_limit_reached"


def test_reset_drops_the_connection(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="reset")])
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert [r.fault for r in server.requests] == ["reset"]


def test_max_tokens_cuts_inside_the_tool_input(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="max_tokens"), Fault(kind="max_tokens")])
    seen = events(post(server, body(True))[2])
    partial = "".join(
        d["delta"]["partial_json"]
        for n, d in seen
        if n == "content_block_delta" and d["index"] == 1
    )
    assert partial and len(partial) < len(json.dumps({"command": "ls -la && git status"}))
    with pytest.raises(ValueError):
        json.loads(partial)
    assert seen[-2][1]["delta"]["stop_reason"] == "max_tokens"
    message = json.loads(post(server, body(False))[2])
    assert message["stop_reason"] == "max_tokens" and message["content"][0]["text"] == "All "


def test_stream_error_event_arrives_mid_stream(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT, faults=[Fault(kind="stream_error")])
    seen = events(post(server, body(True))[2])
    names = [n for n, _ in seen]
    assert names[0] == "message_start" and "content_block_delta" in names
    assert seen[-1] == (
        "error",
        {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
            "request_id": "req_fake",
        },
    )
    assert "message_stop" not in names
    assert len(server.model.unconsumed()["lead"]) == 2  # the fault used no step


def test_a_step_fault_is_served_before_the_step(fake_api: FakeApiFactory) -> None:
    script = {
        "agents": {"a": {"steps": [{"text": "ok", "fault": {"kind": "server_error", "times": 2}}]}}
    }
    server = fake_api(script)
    statuses = [post(server, body(False), agent="a")[0] for _ in range(3)]
    assert statuses == [500, 500, 200]
    assert [r.fault for r in server.requests] == ["server_error", "server_error", None]


def test_script_errors_become_a_400_and_are_kept(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT)
    status, _, raw = post(server, body(False), agent="stranger")
    assert status == 400 and "no script for agent 'stranger'" in json.loads(raw)["error"]["message"]
    assert len(server.script_errors) == 1


def test_bad_json_and_unknown_route(fake_api: FakeApiFactory) -> None:
    server = fake_api(SCRIPT)
    assert post(server, {"model": "m"})[0] == 400
    request = urllib.request.Request(server.base_url + "/v2/nothing", data=b"{}")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 404


def test_cli_serves_until_interrupted(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("agents:\n  lead:\n    steps: ['from the cli']\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.model.fakeapi", str(script), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        reply = client.messages.create(
            model="m",
            max_tokens=10,
            messages=[{"role": "user", "content": "x"}],
            extra_headers={"x-teamctl-agent": "lead"},
        )
        assert reply.content[0].type == "text" and reply.content[0].text == "from the cli"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0


def test_cli_rejects_a_bad_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "bad.yaml"
    script.write_text("agents: {a: {nope: 1}}\n")
    assert main([str(script)]) == 2
    assert "nope" in capsys.readouterr().out
