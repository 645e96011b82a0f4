"""The CLI on a JetStream team (docs/SCALE-OUT.md, "Creating and joining a team", "Backup and
export"): ``teamctl init --backend`` creates the team on the cluster or connects another clone to
it, ``journal export`` / ``init --import`` move a team between backends, and every command works
the same in a second connected checkout. Real git clones, a real nats-server from the wheel."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.actors.cli.cli_support import fails, ok, ok_json, run
from tests.actors.runtime.runtime_support import stop_actors
from tests.support.nats_server import NatsServer, running_server

__all__ = ["stop_actors"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TEAMCTL_BACKEND", "TEAMCTL_SETTINGS", "TEAMCTL_MODEL"):
        monkeypatch.delenv(name, raising=False)


def _git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _clones(tmp_path: Path, count: int = 2) -> list[Path]:
    """``count`` clones of one repository with a commit (each its own checkout, as on two
    hosts)."""
    origin = tmp_path / "origin"
    origin.mkdir()
    _git("init", "-q", str(origin))
    (origin / "README").write_text("hello\n")
    _git("add", "README", cwd=origin)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init", cwd=origin)
    clones = []
    for i in range(count):
        clone = (tmp_path / f"clone{i + 1}").resolve()
        _git("clone", "-q", str(origin), str(clone))
        clones.append(clone)
    return clones


def _stream_events(url: str, team: str) -> list[dict[str, object]]:
    from mailboxes.journal.nats import NatsEventStore

    store = NatsEventStore(url, team)
    try:
        return [event.model_dump(mode="json") for event in store.read_from(1)]
    finally:
        store.close()


def _statuses() -> dict[str, str]:
    return {t["id"]: t["status"] for t in ok_json(["tasks", "--all"])}


def _settings(root: Path) -> dict[str, object]:
    raw: dict[str, object] = json.loads((root / ".team" / "settings.json").read_text())
    return raw


def test_init_creates_the_team_on_the_cluster_and_a_second_clone_connects(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _clones(tmp_path)
    backend = f"{server.url}/demo"
    # The first clone has settings of its own already: they are kept, the backend added.
    (first / ".team").mkdir()
    (first / ".team" / "settings.json").write_text(json.dumps({"team": {"max_teammates": 3}}))
    monkeypatch.chdir(first)
    out = ok(["init", "--backend", backend]).stdout
    assert "initialised team 'demo'" in out
    assert _settings(first) == {"team": {"max_teammates": 3}, "backend": backend}
    assert not (first / ".team" / "journal.jsonl").exists()
    created = [e for e in _stream_events(server.url, "demo") if e["type"] == "team.created"]
    assert len(created) == 1

    # The second clone joins through $TEAMCTL_BACKEND: no second team.created.
    monkeypatch.chdir(second)
    monkeypatch.setenv("TEAMCTL_BACKEND", backend)
    out = ok(["init"]).stdout
    events = _stream_events(server.url, "demo")
    assert f"connected to existing team demo ({len(events)} events)" in out
    assert [e["type"] for e in events].count("team.created") == 1
    monkeypatch.delenv("TEAMCTL_BACKEND")
    assert _settings(second)["backend"] == backend  # recorded: later commands need no env
    # Running it again changes nothing and still says where it is.
    assert "connected to existing team demo" in ok(["init", "--backend", backend]).stdout
    assert [e["type"] for e in _stream_events(server.url, "demo")].count("team.created") == 1

    # Every command works the same in either checkout: added in one, claimed in the other.
    monkeypatch.chdir(first)
    ok(["task", "add", "build it"])
    monkeypatch.chdir(second)
    assert [t["subject"] for t in ok_json(["tasks"])] == ["build it"]
    task_id = ok_json(["tasks"])[0]["id"]
    ok(["task", "claim", task_id, "--as", "ann"])
    monkeypatch.chdir(first)
    assert "already claimed by ann" in fails(["task", "claim", task_id, "--as", "bob"])
    assert ok_json(["tasks"])[0]["owner"] == "ann"
    monkeypatch.chdir(second)
    ok(["task", "complete", task_id, "--as", "ann", "--summary", "done"])
    for clone in (first, second):
        monkeypatch.chdir(clone)
        assert ok_json(["tasks"])[0]["status"] == "completed"
        status = ok_json(["status"])
        assert status["team"] == "demo"
        assert status["tasks"]["completed"] == 1
        types = [json.loads(line)["type"] for line in ok(["events", "--json"]).stdout.splitlines()]
        assert types.count("task.completed") == 1
        verified = ok_json(["replay", "--verify"])
        assert verified["ok"] is True
        assert (clone / ".tasks").is_dir()  # each checkout renders its own projections


def test_init_errors_are_one_line_and_change_nothing(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root,) = _clones(tmp_path, 1)
    monkeypatch.chdir(root)
    line = fails(["init", "--backend", "nats://127.0.0.1/demo"])
    assert "--backend: 'nats://127.0.0.1/demo' is not a backend" in line
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    line = fails(["init", "--backend", f"nats://127.0.0.1:{port}/demo"])
    assert f"cannot reach the JetStream server(s) nats://127.0.0.1:{port}" in line
    assert not (root / ".team").exists()  # nothing was created for a backend that failed
    monkeypatch.setenv("TEAMCTL_BACKEND", f"{server.url}/other")
    line = fails(["init", "--backend", f"{server.url}/demo"])
    assert "differs from $TEAMCTL_BACKEND" in line


class _OldServer:
    """A loopback TCP server that greets like nats-server 2.9.10 (Debian's) and answers the
    client's PING: enough for a client to connect and read the version."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        info = {
            "server_id": "OLD",
            "version": "2.9.10",
            "proto": 1,
            "headers": True,
            "max_payload": 1048576,
            "jetstream": True,
        }
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"INFO " + json.dumps(info).encode() + b"\r\n")
                buffer = b""
                while True:
                    try:
                        data = conn.recv(4096)
                    except OSError:
                        break
                    if not data:
                        break
                    buffer += data
                    while b"\r\n" in buffer:
                        line, buffer = buffer.split(b"\r\n", 1)
                        if line.startswith(b"PING"):
                            conn.sendall(b"PONG\r\n")

    def close(self) -> None:
        self.sock.close()
        self._thread.join(timeout=5)


def test_init_refuses_a_server_older_than_2_12(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("nats")
    (root,) = _clones(tmp_path, 1)
    monkeypatch.chdir(root)
    old = _OldServer()
    try:
        line = fails(["init", "--backend", f"nats://127.0.0.1:{old.port}/demo"])
    finally:
        old.close()
    assert "nats-server 2.9.10" in line
    assert "too old: the JetStream backend needs 2.12 or newer" in line
    assert not (root / ".team").exists()


def test_moving_a_file_team_without_import_is_refused(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root,) = _clones(tmp_path, 1)
    monkeypatch.chdir(root)
    ok(["init"])
    ok(["task", "add", "one"])
    line = fails(["init", "--backend", f"{server.url}/demo"])
    assert "--import" in line and "journal.jsonl" in line
    assert _settings(root)["backend"] == "file"
    assert _stream_events(server.url, "demo") == []


def test_round_trip_file_to_nats_to_file(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mailboxes.journal.store import FileJournal

    first, second, third = _clones(tmp_path, 3)
    monkeypatch.chdir(first)
    ok(["init"])
    for subject in ("one", "two", "three"):
        ok(["task", "add", subject])
    ok(["task", "claim", "task_1", "--as", "ann"])
    ok(["task", "complete", "task_1", "--as", "ann"])
    original = (first / ".team" / "journal.jsonl").read_bytes()

    # An export of a file team is that journal, line for line.
    exported = tmp_path / "file-export.jsonl"
    assert "exported" in ok(["journal", "export", str(exported)]).stdout
    assert exported.read_bytes() == original
    assert "exists" in fails(["journal", "export", str(exported)])

    # Onto the cluster: the same events, seqs and op ids; the checkout now uses the cluster.
    backend = f"{server.url}/moved"
    out = ok(["init", "--backend", backend, "--import", str(exported)]).stdout
    count = original.count(b"\n")
    assert f"imported team 'clone1' ({count} events) into {backend}" in out
    assert _settings(first)["backend"] == backend
    from mailboxes.journal.frame import decode_event

    lines = original.split(b"\n")[:-1]
    expected = [decode_event(raw, n).model_dump(mode="json") for n, raw in enumerate(lines, 1)]
    assert _stream_events(server.url, "moved") == expected
    assert _statuses() == {"task_1": "completed", "task_2": "pending", "task_3": "pending"}
    assert ok_json(["replay", "--verify"])["ok"] is True

    # A second import into a team that has events is refused.
    monkeypatch.chdir(second)
    line = fails(["init", "--backend", backend, "--import", str(exported)])
    assert "already has" in line

    # Back to files: the export of the cluster team is byte for byte the original journal.
    monkeypatch.chdir(first)
    back = tmp_path / "nats-export.jsonl"
    ok(["journal", "export", str(back)])
    assert back.read_bytes() == original
    monkeypatch.chdir(third)
    ok(["init", "--import", str(back)])
    assert (third / ".team" / "journal.jsonl").read_bytes() == original
    journal = FileJournal(third / ".team", read_only=True)
    try:
        assert [e.model_dump(mode="json") for e in journal.read_from(1)] == expected
    finally:
        journal.close()
    assert ok_json(["replay", "--verify"])["ok"] is True
    assert _statuses() == {"task_1": "completed", "task_2": "pending", "task_3": "pending"}


def test_import_refuses_a_damaged_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root,) = _clones(tmp_path, 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"not": "a journal line"}\n')
    monkeypatch.chdir(root)
    line = fails(["init", "--import", str(bad)])
    assert f"{bad} is not a sound journal: line 1" in line
    result = run(["status"])
    assert result.exit_code == 1  # no team was started from it


def test_a_second_run_on_another_checkout_of_the_team_is_refused(
    tmp_path: Path,
    server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    stop_actors: list[Any],
) -> None:
    from harness.model.scripted import ScriptedModel
    from tests.actors.runtime.runtime_support import runtime

    first, second = _clones(tmp_path)
    backend = f"{server.url}/demo"
    for clone in (first, second):
        monkeypatch.chdir(clone)
        ok(["init", "--backend", backend])
    script = {"agents": {"lead": {"rules": [{"match": "(?s).", "text": "ok"}]}}}
    first_run = runtime(first, ScriptedModel(script))
    stop_actors.append(first_run)
    first_run.start()  # holds the lead's lease on the cluster

    monkeypatch.chdir(second)
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    before = len(_stream_events(server.url, "demo"))
    for command in (
        ["run", "--headless", "--script", str(path), "hello"],
        ["run", "--fresh", "--headless", "--script", str(path), "hello"],
        ["resume", "--headless", "--script", str(path)],
    ):
        assert "another teamctl runtime runs team demo" in fails(command)
    assert len(_stream_events(server.url, "demo")) == before  # nothing was recorded
