"""The seams of docs/ARCHITECTURE.md, "Backends and seams", on the JetStream backend (a real
``nats-server`` from the wheel, two clones of one repository connected to one team): a
workflow runs through the CLI with the fake Messages API, state snapshots written in one clone
start the other clone's board, and scenario facts read every message through the mailbox."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.team_support import model_env, teamctl, write_script
from tests.e2e.test_workflows import SCRIPT, SEQUENTIAL
from tests.support.nats_server import NatsServer, running_server

_GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


def _clones(tmp_path: Path) -> tuple[Path, Path]:
    origin = tmp_path / "origin"
    origin.mkdir()
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    (origin / "README").write_text("hello\n")
    subprocess.run([*_GIT, "-C", str(origin), "add", "README"], check=True)
    subprocess.run([*_GIT, "-C", str(origin), "commit", "-qm", "start"], check=True)
    clones = []
    for name in ("host_a", "host_b"):
        subprocess.run(["git", "clone", "-q", str(origin), str(tmp_path / name)], check=True)
        clones.append((tmp_path / name).resolve())
    return clones[0], clones[1]


def _run(root: Path, backend: str, *args: str, env: dict[str, str] | None = None) -> str:
    proc = teamctl(root, *args, env_extra={"TEAMCTL_BACKEND": backend, **(env or {})})
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, f"teamctl {' '.join(args)} failed:\n{out}\n{err}"
    return out


def test_a_workflow_runs_on_jetstream_and_every_clone_sees_it(
    tmp_path: Path, server: NatsServer
) -> None:
    a, b = _clones(tmp_path)
    backend = f"{server.url}/wf"
    _run(a, backend, "init")
    _run(b, backend, "init")
    folder = a / ".team" / "workflows"
    folder.mkdir()
    (folder / "steps.py").write_text(SEQUENTIAL, encoding="utf-8")
    script = write_script(tmp_path / "script.yaml", SCRIPT)
    with model_env(script, via_api=True) as model:
        out = _run(a, backend, "workflow", "run", "steps", "--json", env=model.env)
        assert model.server is not None and not model.server.script_errors
    answer = json.loads(out)
    assert (answer["status"], answer["result"]) == (
        "completed",
        ["did one", "did two", "did three", "did four"],
    )
    assert not (a / ".team" / "journal.jsonl").exists()  # the journal is the stream
    # The other clone reads the run from the stream (``read_runs`` through the journal port).
    [row] = json.loads(_run(b, backend, "workflow", "runs", "--json"))
    assert (row["run_id"], row["status"], row["steps_done"]) == (answer["run_id"], "completed", 4)


def test_a_snapshot_written_in_one_clone_starts_the_other_clones_board(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import actors.factory
    from actors.board import snapshot
    from actors.factory import init_team, open_team
    from mailboxes.nats_blobs import NatsBlobs

    a, b = _clones(tmp_path)
    monkeypatch.setenv("TEAMCTL_BACKEND", f"{server.url}/snap")
    monkeypatch.setattr(actors.factory, "REMOTE_SNAPSHOT_EVERY", 5)  # JetStream's interval
    init_team(a)
    init_team(b)
    with open_team(a) as team_a:
        assert isinstance(team_a.blobs, NatsBlobs)
        for n in range(8):
            team_a.board.create(f"task {n}")
        end = team_a.journal.last_seq()
    assert not (a / ".team" / "snapshots").exists()
    with open_team(b) as team_b:
        snap = snapshot.load(team_b.blobs, team_b.journal)
        assert snap is not None and 5 <= snap.seq <= end
        asked: list[int] = []
        read_from = team_b.journal.read_from

        def counting(seq: int) -> Any:
            asked.append(seq)
            return read_from(seq)

        monkeypatch.setattr(team_b.journal, "read_from", counting)
        state = team_b.state()
        assert len(state.tasks) == 8
        assert min(asked) >= snap.seq  # never folded from the start
        monkeypatch.setattr(team_b.journal, "read_from", read_from)
        assert team_b.verify_projections() == []  # the snapshot equals the fold


def test_scenario_facts_read_every_message_through_the_mailbox(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.factory import init_team, open_team
    from actors.scenarios.facts import gather
    from mailboxes.messages import MessageDraft

    a, _ = _clones(tmp_path)
    monkeypatch.setenv("TEAMCTL_BACKEND", f"{server.url}/facts")
    init_team(a)
    with open_team(a) as team:
        team.ensure_human("ann")
        team.mailbox.deliver("ann", MessageDraft.text("lead", "first"))
        team.mailbox.deliver("ann", MessageDraft.text("lead", "second"))
        [first, _] = team.mailbox.pending("lead")
        team.mailbox.ack("lead", [first.id])
    facts = gather(a)
    assert [(m.sender, m.to, m.text) for m in facts.messages] == [
        ("ann", "lead", "first"),
        ("ann", "lead", "second"),
    ]
    assert facts.lost == []
    assert facts.state.members["ann"].kind == "human"


def test_transcripts_of_a_run_on_one_host_read_on_another(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.factory import open_team
    from actors.scenarios.facts import gather
    from tests.e2e.team_support import BACKLOG_SCRIPT

    a, b = _clones(tmp_path)
    backend = f"{server.url}/talk"
    _run(a, backend, "init")
    _run(b, backend, "init")
    script = write_script(tmp_path / "script.yaml", BACKLOG_SCRIPT)
    _run(
        a,
        backend,
        "run",
        "--headless",
        "--timeout",
        "120",
        "Build the backlog",
        env={"TEAMCTL_SCRIPT": str(script)},
    )
    hosted = sorted(p.stem for p in (a / ".team" / "transcripts").glob("*.jsonl"))
    assert "lead" in hosted and len(hosted) > 1
    assert not (b / ".team" / "transcripts").exists() or not any(
        (b / ".team" / "transcripts").iterdir()
    )
    monkeypatch.setenv("TEAMCTL_BACKEND", backend)
    with open_team(b) as team:
        assert team.transcripts.agents() == hosted
        for agent in hosted:
            mine = (a / ".team" / "transcripts" / f"{agent}.jsonl").read_bytes()
            assert team.transcripts.transcript(agent) == mine
    facts = gather(b)  # scenario checks in the other clone see the agents' conversations
    assert sorted(facts.transcripts) == hosted
    assert all(facts.transcripts[agent] for agent in hosted)
