"""Mailboxes and wake-ups on the JetStream backend through the real CLI (docs/SCALE-OUT.md,
"Mailboxes", "Wake-ups"): two clones of one repository, both with ``TEAMCTL_BACKEND`` naming one
team on a real ``nats-server`` from the wheel; ``teamctl send`` in one clone reaches
``teamctl inbox`` in the other, and an ack in either is seen by both. Also the factory wiring:
``Team.mailbox`` / ``Team.watch`` of a JetStream team, and the runtime's housekeeping on it."""

from __future__ import annotations

import json
import logging
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.team_support import BACKLOG_SCRIPT, teamctl, write_script
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


def _run(root: Path, backend: str, *args: str) -> str:
    proc = teamctl(root, *args, env_extra={"TEAMCTL_BACKEND": backend})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"teamctl {' '.join(args)} failed:\n{out}\n{err}"
    return out


def test_send_in_one_clone_reaches_inbox_in_another(tmp_path: Path, server: NatsServer) -> None:
    a, b = _clones(tmp_path)
    backend = f"{server.url}/demo"
    _run(a, backend, "init")
    _run(b, backend, "init")  # the team exists: this checkout joins it
    sent = _run(a, backend, "send", "lead", "hello from host a", "--as", "ann")
    [message_id] = [line.split()[1] for line in sent.splitlines() if line.startswith("sent ")]
    assert not list((a / ".team" / "mailboxes").rglob(f"*{message_id}*"))  # not a file
    shown = json.loads(_run(b, backend, "inbox", "lead", "--json"))
    assert [(m["id"], m["from"], m["to"], m["body"]["text"]) for m in shown] == [
        (message_id, "ann", "lead", "hello from host a")
    ]
    # Reading without --ack leaves it unread for the next reader, on any host.
    assert [m["id"] for m in json.loads(_run(a, backend, "inbox", "lead", "--json"))] == [
        message_id
    ]
    _run(b, backend, "inbox", "lead", "--ack")
    assert json.loads(_run(a, backend, "inbox", "lead", "--json")) == []
    # Unknown recipients are refused as on the file backend, naming the known ones.
    proc = teamctl(a, "send", "nobody", "x", env_extra={"TEAMCTL_BACKEND": backend})
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "unknown recipient 'nobody'" in err and "lead" in err


def test_a_jetstream_team_uses_the_jetstream_mailbox_and_watcher(
    tmp_path: Path,
    server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from actors.factory import MIXED_NOTICE, init_team, open_team, tidy_mailboxes
    from actors.settings import load_settings
    from mailboxes.messages import MessageDraft
    from mailboxes.nats_mailbox import NatsMailbox
    from mailboxes.nats_watch import NatsWatcher
    from mailboxes.ports import Hint, InboxChanged, JournalAdvanced

    a, b = _clones(tmp_path)
    monkeypatch.setenv("TEAMCTL_BACKEND", f"{server.url}/demo")
    with caplog.at_level(logging.INFO, logger="actors.factory"):
        init_team(a)
    assert any(
        r.message.startswith(MIXED_NOTICE.split("{")[0]) and "transcripts" in r.message
        for r in caplog.records
    )
    init_team(b)
    hints: list[frozenset[Hint]] = []
    woke = threading.Condition()

    def on_hints(batch: frozenset[Hint]) -> None:
        with woke:
            hints.append(batch)
            woke.notify_all()

    def seen(hint: Hint) -> bool:
        with woke:
            return woke.wait_for(lambda: any(hint in h for h in hints), 20)

    with open_team(a) as team_a, open_team(b) as team_b:
        assert isinstance(team_a.mailbox, NatsMailbox) and team_a.mailbox_path is None
        watcher = team_a.watch(on_hints, 60)
        assert isinstance(watcher, NatsWatcher)
        watcher.start()
        try:
            team_b.mailbox.deliver("ann", MessageDraft.text("lead", "hi"))  # the other host
            assert seen(InboxChanged("lead"))
            team_b.board.create("a task")
            assert seen(JournalAdvanced())
        finally:
            watcher.stop()
        assert team_a.inbox_counts() == {"lead": 1}
        from actors.live.load import LiveSource

        source = LiveSource(team_a)  # the live view: counts from the stream, no paths to watch
        assert source.paths == ()
        assert [(r.agent, r.unread) for r in source.load().inboxes] == [("lead", 1)]
        settings = load_settings(a / ".team" / "settings.json")
        assert tidy_mailboxes(team_a, settings) == (0, 0)  # nothing old enough to prune


def test_an_unreachable_server_fails_the_command_in_one_line(
    tmp_path: Path, server: NatsServer
) -> None:
    a, _ = _clones(tmp_path)
    backend = f"{server.url}/demo"
    _run(a, backend, "init")
    server.stop()
    proc = teamctl(a, "send", "lead", "x", env_extra={"TEAMCTL_BACKEND": backend})
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in err and "cannot be reached" in err


def test_a_headless_run_on_jetstream_passes_its_mail_through_the_stream(
    tmp_path: Path, server: NatsServer
) -> None:
    """The runtime's teammates get their wake-ups and messages from JetStream: the backlog is
    drained, nothing lands in a Maildir, and every message of the run was acked."""
    from mailboxes.nats_mailbox import NatsMailbox

    a, _ = _clones(tmp_path)
    backend = f"{server.url}/demo"
    _run(a, backend, "init")
    script = write_script(tmp_path / "script.yaml", BACKLOG_SCRIPT)
    proc = teamctl(
        a,
        *("run", "--headless", "--output-format", "stream-json", "--timeout", "120"),
        "Build the backlog",
        script=script,
        env_extra={"TEAMCTL_BACKEND": backend},
    )
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    result = json.loads(out.splitlines()[-1])
    assert result["subtype"] == "success" and result["tasks"] == {"completed": 6}
    assert [p for p in (a / ".team" / "mailboxes").rglob("*") if p.is_file()] == []
    box = NatsMailbox(server.url, "demo")
    try:
        assert {"lead", "w1", "w2", "w3"} <= set(box.agents())
        counts = {agent: box.counts(agent) for agent in box.agents()}
    finally:
        box.close()
    assert sum(acked for _, acked in counts.values()) > 0  # teammates reported to the lead
    assert all(unread == 0 for unread, _ in counts.values()), counts
