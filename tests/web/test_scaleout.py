"""The dashboard on the scale-out backend (docs/SCALE-OUT.md): ``teamctl web`` in one checkout of
a JetStream team sees what another checkout does, pushed by the JetStream watcher's hints. Real
git clones, a real nats-server from the wheel, the real CLI as subprocesses."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.nats_server import NatsServer, running_server
from tests.web.conftest import WebServer, teamctl
from tests.web.sse_support import next_journal_event, sse_events

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


def _clones(tmp_path: Path) -> tuple[Path, Path]:
    origin = tmp_path / "origin"
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    (origin / "README").write_text("hello\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@x"]
    subprocess.run([*git, "add", "README"], cwd=origin, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=origin, check=True)
    clones = []
    for name in ("here", "there"):
        clone = (tmp_path / name).resolve()
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        clones.append(clone)
    return clones[0], clones[1]


def test_a_task_added_in_another_clone_arrives_on_the_event_stream(
    tmp_path: Path, nats: NatsServer, start_web: Callable[..., WebServer]
) -> None:
    here, there = _clones(tmp_path)
    backend = f"{nats.url}/demo"
    assert "initialised team 'demo'" in teamctl(here, "init", "--backend", backend).stdout
    assert "connected to existing team demo" in teamctl(there, "init", "--backend", backend).stdout
    assert not (here / ".team" / "journal.jsonl").exists()  # the journal is on JetStream
    teamctl(there, "task", "add", "already there")
    server = start_web(here)
    with server.client() as http:
        state = http.get("/api/state").json()
        assert state["team"] == "demo"
        assert [t["subject"] for t in state["tasks"]] == ["already there"]
        with http.stream("GET", "/api/events") as response:
            assert response.status_code == 200
            teamctl(there, "task", "add", HOSTILE, "--blocked-by", "task_1")
            created = next_journal_event(sse_events(response), "task.created")
        event = created.json()
        assert event["data"]["subject"] == HOSTILE and event["data"]["task_id"] == "task_2"
        assert created.id == str(event["seq"])
        state = http.get("/api/state").json()
        tasks = {t["id"]: t for t in state["tasks"]}
        assert tasks["task_2"]["blocked_by"] == ["task_1"] and tasks["task_2"]["subject"] == HOSTILE
        detail = http.get("/api/tasks/task_2").json()
        assert [e["type"] for e in detail["history"]] == ["task.created"]
        # A message from the page reaches the other clone's view of the lead's inbox.
        csrf = state["csrf"]
        sent = http.post(
            "/api/messages", json={"to": "lead", "body": "hello"}, headers={"X-Teamctl-CSRF": csrf}
        )
        assert sent.status_code == 200, sent.text
    inbox = teamctl(there, "inbox", "lead", "--json").stdout
    assert '"hello"' in inbox
