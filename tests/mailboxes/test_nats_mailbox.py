"""The JetStream mailbox (mailboxes/nats_mailbox.py) against a real ``nats-server``: what the
Maildir has no counterpart for (ack wait, a reader that dies, an unreachable server, retention
by the consumer's ack floor, a server restart). The shared contract is in
test_mailbox_conformance.py."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mailboxes.errors import MailboxesError, MailboxUnavailable
from mailboxes.messages import MessageDraft
from tests.support.fakes import FakeClock
from tests.support.nats_server import NatsServer, running_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


@pytest.fixture
def open_box(server: NatsServer) -> Iterator[Callable[..., Any]]:
    from mailboxes.nats_mailbox import NatsMailbox

    made: list[NatsMailbox] = []

    def factory(**options: Any) -> NatsMailbox:
        box = NatsMailbox(server.url, "t", **options)
        made.append(box)
        box.ensure_inbox("lead")
        box.ensure_inbox("bob")
        return box

    yield factory
    for box in made:
        box.close()


def _wait(predicate: Callable[[], bool], deadline_s: float = 20.0) -> bool:
    """Poll a server-side condition until it holds or the (generous) deadline passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_held_messages_outlive_the_ack_wait(open_box: Callable[..., Any]) -> None:
    """A message being worked on (a model call of minutes) is not handed to anyone else while
    its reader holds it: in-progress signals extend the ack wait."""
    reader = open_box(ack_wait=1.0)
    other = open_box()
    [sent] = reader.deliver("lead", MessageDraft.text("bob", "long job"))
    assert [e.id for e in reader.pending("bob")] == [sent.id]
    # Three ack waits later, the server still counts it as delivered to this reader, once.
    info = _consumer(reader, "bob")
    start = info.delivered.consumer_seq
    _sleep_for_server(3.5)
    assert other.pending("bob") == []  # not handed out again
    info = _consumer(reader, "bob")
    assert (info.num_ack_pending, info.num_redelivered) == (1, 0)
    assert info.delivered.consumer_seq == start
    assert [e.id for e in reader.pending("bob")] == [sent.id]


def _sleep_for_server(seconds: float) -> None:
    # Not a wait for an event: the test needs server time to pass (ack waits expiring).
    time.sleep(seconds)


def _consumer(box: Any, agent: str) -> Any:
    from mailboxes.nats_mailbox import key

    return box._io.run(box._js.consumer_info(box.stream, key(agent)), timeout=10)


READ_AND_HANG = textwrap.dedent(
    """
    import sys, time
    from mailboxes.nats_mailbox import NatsMailbox
    box = NatsMailbox(sys.argv[1], "t", ack_wait=1.0)
    print(",".join(e.id for e in box.pending("bob")), flush=True)
    time.sleep(600)
    """
)


def test_messages_of_a_reader_that_dies_go_to_the_next_one(
    open_box: Callable[..., Any], server: NatsServer
) -> None:
    sender = open_box(ack_wait=1.0)
    sent = [e.id for e in sender.deliver("lead", MessageDraft.text("bob", "x"))]
    proc = subprocess.Popen(
        [sys.executable, "-c", READ_AND_HANG, server.url],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == ",".join(sent)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    reader = open_box()
    assert _wait(lambda: [e.id for e in reader.pending("bob")] == sent)
    assert reader.unread("bob") == 1


def test_an_unreachable_server_is_a_mailboxes_error(
    open_box: Callable[..., Any], server: NatsServer
) -> None:
    box = open_box(timeout=0.5)
    server.stop()
    for call in (
        lambda: box.deliver("lead", MessageDraft.text("bob", "x")),
        lambda: box.pending("bob"),
        lambda: box.unread("bob"),
        lambda: box.agents(),
    ):
        with pytest.raises(MailboxUnavailable, match="cannot be reached"):
            call()
    from mailboxes.nats_mailbox import NatsMailbox

    with pytest.raises(MailboxUnavailable) as raised:
        NatsMailbox(server.url, "t", timeout=0.5)
    assert isinstance(raised.value, MailboxesError)


def test_an_unread_mailbox_survives_a_server_restart(
    open_box: Callable[..., Any], server: NatsServer
) -> None:
    box = open_box(ack_wait=1.0)
    sent = [box.deliver("lead", MessageDraft.text("bob", str(i)))[0].id for i in range(3)]
    box.pending("bob")
    box.ack("bob", [sent[0]])
    box.close()
    server.restart()
    again = open_box()
    assert again.unread("bob") == 2
    # Messages that were out with a reader when the server stopped come back after the ack wait.
    assert _wait(lambda: [e.id for e in again.pending("bob")] == sent[1:])
    assert again.holds("bob", sent[0]) and again.agents() == ["bob", "lead"]


def test_prune_deletes_old_acked_messages_only(open_box: Callable[..., Any]) -> None:
    clock = FakeClock(1_000.0)
    box = open_box(clock=clock)
    old = [box.deliver("lead", MessageDraft.text("bob", f"old {i}"))[0] for i in range(3)]
    clock.t += 3600
    recent = [box.deliver("lead", MessageDraft.text("bob", f"new {i}"))[0] for i in range(2)]
    box.pending("bob")
    box.ack("bob", [e.id for e in old[:2] + recent])  # old[2] stays unacked
    assert box.counts("bob") == (1, 4)
    assert box.prune("bob", max_age_s=1800) == 2  # old[0], old[1]: below the ack floor
    assert box.counts("bob") == (1, 2)
    assert not box.holds("bob", old[0].id) and box.holds("bob", old[2].id)
    clock.t += 10**6
    assert box.prune("bob", max_age_s=1) == 0  # the floor stops at the unacked old[2]
    assert [e.id for e in box.pending("bob")] == [old[2].id]
    assert box.recover() == 0


def test_a_bad_message_in_the_stream_is_dropped_for_good(
    open_box: Callable[..., Any], server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    box = open_box()
    [good] = box.deliver("lead", MessageDraft.text("bob", "good"))

    async def publish_garbage() -> None:
        import nats

        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.publish("teamctl.t.mail.bob.junk1", b"\x00not json")
        wrong = good.model_copy(update={"id": "other", "to": "lead"})
        await js.publish("teamctl.t.mail.bob.other", wrong.model_dump_json(by_alias=True).encode())
        await nc.close()

    asyncio.run(publish_garbage())
    with caplog.at_level(logging.WARNING, logger="mailboxes.nats_mailbox"):
        assert [e.id for e in box.pending("bob")] == [good.id]
    assert len([r for r in caplog.records if "bad message" in r.getMessage()]) == 2
    box.ack("bob", [good.id])
    assert box.unread("bob") == 0  # terminated: never delivered again
