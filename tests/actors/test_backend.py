"""The ``backend`` setting (docs/ARCHITECTURE.md, "Backends and seams"; docs/SCALE-OUT.md): the
factory builds a team's journal and liveness on the file backend (the default) or on JetStream."""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.factory import FileJournal, init_team, open_team
from actors.settings import NatsBackend, SettingsError, load_settings, parse_backend
from mailboxes.liveness import FlockLiveness
from tests.support.nats_server import NatsServer, running_server


def _repo(path: Path, backend: object = None) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    if backend is not None:
        (path / ".team").mkdir()
        (path / ".team" / "settings.json").write_text(json.dumps({"backend": backend}))
    return path.resolve()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


def test_parse_backend() -> None:
    assert parse_backend("file") is None
    assert parse_backend("nats://127.0.0.1:4222,h2:4223/demo") == NatsBackend(
        servers=("nats://127.0.0.1:4222", "nats://h2:4223"), team="demo"
    )
    for bad in ("", "nats", "nats://h:1", "nats://h/demo", "nats://h:1/a.b", "redis://h:1/demo"):
        with pytest.raises(ValueError, match="not a backend"):
            parse_backend(bad)


def test_file_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAMCTL_BACKEND", raising=False)
    root = _repo(tmp_path / "repo")
    init_team(root)
    assert json.loads((root / ".team" / "settings.json").read_text())["backend"] == "file"
    with open_team(root) as team:
        assert isinstance(team.journal, FileJournal)
        assert isinstance(team.liveness, FlockLiveness)
        assert team.journal_path == root / ".team" / "journal.jsonl"


def test_a_bad_backend_is_one_line_naming_the_setting_and_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAMCTL_BACKEND", raising=False)
    root = _repo(tmp_path / "repo")
    init_team(root)
    settings = root / ".team" / "settings.json"
    raw = json.loads(settings.read_text())
    raw["backend"] = "postgres://db/team"
    settings.write_text(json.dumps(raw))
    with pytest.raises(SettingsError) as err:
        open_team(root)
    message = str(err.value)
    assert "\n" not in message
    assert f"settings {settings}: backend" in message
    assert "'postgres://db/team' is not a backend" in message
    with pytest.raises(SettingsError, match="backend"):  # the whole settings load agrees
        load_settings(settings, environ={})


def test_the_environment_overrides_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo(tmp_path / "repo")
    monkeypatch.delenv("TEAMCTL_BACKEND", raising=False)
    init_team(root)
    monkeypatch.setenv("TEAMCTL_BACKEND", "nats:/nowhere")
    with pytest.raises(
        SettingsError, match=r"^\$TEAMCTL_BACKEND: 'nats:/nowhere' is not a backend"
    ):
        open_team(root)


def test_a_team_on_jetstream(
    tmp_path: Path,
    server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from mailboxes.journal.nats import NatsEventStore, stream_name
    from mailboxes.nats_liveness import NatsLiveness

    monkeypatch.delenv("TEAMCTL_BACKEND", raising=False)
    backend = f"{server.url}/demo"
    root = _repo(tmp_path / "repo", backend)
    with caplog.at_level(logging.INFO, logger="actors.factory"):
        init_team(root)
    assert any(
        "journal, mailboxes, liveness, wake-ups and state snapshots on JetStream" in r.message
        for r in caplog.records
    )
    assert not (root / ".team" / "journal.jsonl").exists()  # nothing written to a file journal
    with open_team(root) as team:
        assert isinstance(team.journal, NatsEventStore)
        assert isinstance(team.liveness, NatsLiveness)
        assert team.journal.stream == stream_name("demo")
        assert team.journal_path is None
        task = team.board.create("build it")
        other = open_team(root)  # a second Team on the same settings
        try:
            assert other.state().task(task.id).subject == "build it"
        finally:
            other.close()
    assert not (root / ".team" / "journal.jsonl").exists()
    # The events are in the stream itself: a bare store on the server reads them back.
    store = NatsEventStore(server.url, "demo")
    try:
        types = [e.type for e in store.read_from(1)]
    finally:
        store.close()
    assert types[0] == "team.created"
    assert "task.created" in types
    # A command on the journal file is refused in one line.
    from actors.errors import TeamError
    from actors.factory import check_team_journal

    with pytest.raises(TeamError, match="file journal only"):
        check_team_journal(root)


def test_a_jetstream_team_needs_init(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.errors import TeamError

    monkeypatch.delenv("TEAMCTL_BACKEND", raising=False)
    root = _repo(tmp_path / "repo", f"{server.url}/fresh")
    with pytest.raises(TeamError, match="JetStream journal is empty: run `teamctl init`"):
        open_team(root)
