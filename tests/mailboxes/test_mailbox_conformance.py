"""The contract every ``Mailbox`` keeps (mailboxes/ports.py), run against the Maildir and the
JetStream mailbox (a real ``nats-server`` from the wheel; ``TEAMCTL_REQUIRE_NATS=1`` turns a
missing one into a failure). Each test uses two mailbox objects on one backing (one folder, or
one stream through two connections): a sender and a reader."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from mailboxes.errors import BadMessage, UnknownRecipient
from mailboxes.maildir import Maildir
from mailboxes.messages import Envelope, InvalidAgentName, MessageDraft, dump_envelope
from mailboxes.ports import Mailbox
from tests.support.fakes import FakeClock
from tests.support.nats_server import running_server


class CountingIds:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._n = itertools.count(1)

    def new_id(self) -> str:
        return f"{self._prefix}{next(self._n):04d}"


BoxFactory = Callable[..., Any]
"""``make(prefix="m", max_message_bytes=…)``: another mailbox object on the same backing."""


@pytest.fixture(params=["maildir", "nats"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BoxFactory]:
    clock = FakeClock(1_000_000.0)
    made: list[Any] = []
    with ExitStack() as stack:
        if request.param == "nats":
            from mailboxes.nats_mailbox import NatsMailbox

            server = stack.enter_context(contextmanager(running_server)(tmp_path / "nats"))

        def factory(prefix: str = "m", **options: Any) -> Any:
            box: Any
            if request.param == "maildir":
                box = Maildir(tmp_path / "mailboxes", clock, CountingIds(prefix), **options)
            else:
                box = NatsMailbox(server.url, "conformance", clock, CountingIds(prefix), **options)
            made.append(box)
            return box

        yield factory
        for box in made:
            close = getattr(box, "close", None)
            if close is not None:
                close()


@pytest.fixture
def pair(make: BoxFactory) -> tuple[Any, Any]:
    """(sender, reader) with inboxes for lead, bob and carol."""
    sender, reader = make("s"), make("r")
    for agent in ("lead", "bob", "carol"):
        reader.ensure_inbox(agent)
    return sender, reader


def _send(box: Mailbox, to: str, text: str, sender: str = "lead") -> Envelope:
    (envelope,) = box.deliver(sender, MessageDraft.text(to, text))
    return envelope


def test_is_a_mailbox(pair: tuple[Any, Any]) -> None:
    sender, reader = pair
    assert isinstance(sender, Mailbox) and isinstance(reader, Mailbox)


def test_inboxes_are_shared_and_sorted(pair: tuple[Any, Any]) -> None:
    sender, reader = pair
    reader.ensure_inbox("bob")  # idempotent
    sender.ensure_inbox("d.ave")  # dots are allowed in agent names
    assert sender.agents() == reader.agents() == ["bob", "carol", "d.ave", "lead"]
    _send(sender, "d.ave", "hi")
    assert [e.text for e in reader.pending("d.ave")] == ["hi"]


@pytest.mark.parametrize("name", ["../evil", ".x", "a/b", "", "*"])
def test_bad_agent_names_refused(pair: tuple[Any, Any], name: str) -> None:
    sender, _ = pair
    with pytest.raises(InvalidAgentName):
        sender.ensure_inbox(name)
    with pytest.raises(InvalidAgentName):
        sender.deliver(name, MessageDraft.text("bob", "hi"))


def test_delivery_order_and_envelope(pair: tuple[Any, Any], make: BoxFactory) -> None:
    sender, reader = pair
    other = make("o")  # a third sender: its messages interleave in delivery order
    sent = [_send(sender if i % 2 else other, "bob", f"msg {i}") for i in range(6)]
    got = reader.pending("bob")
    assert [e.id for e in got] == [e.id for e in sent]
    assert [e.text for e in got] == [f"msg {i}" for i in range(6)]
    assert got[0].sender == "lead" and got[0].to == "bob" and got[0].ts == 1_000_000.0
    assert got == sent
    assert reader.pending("bob") == got  # reading does not consume
    assert (reader.unread("bob"), reader.has_unread("bob")) == (6, True)
    assert (reader.unread("carol"), reader.has_unread("carol")) == (0, False)


def test_batches_bounded_by_count_and_bytes(pair: tuple[Any, Any]) -> None:
    sender, reader = pair
    sent = [_send(sender, "bob", "x" * 100) for _ in range(10)]
    assert [e.id for e in reader.pending("bob", max_messages=3)] == [e.id for e in sent[:3]]
    size = len(dump_envelope(sent[0]))
    batch = reader.pending("bob", max_bytes=size * 4 + 1)
    assert [e.id for e in batch] == [e.id for e in sent[:4]]
    # A message larger than max_bytes still comes, alone, so it cannot block the inbox.
    assert len(reader.pending("bob", max_bytes=1)) == 1
    assert [e.id for e in reader.pending("bob", max_messages=100)] == [e.id for e in sent]


def test_ack_takes_messages_away_idempotently(pair: tuple[Any, Any]) -> None:
    sender, reader = pair
    a, b, c = (_send(sender, "bob", t) for t in "abc")
    assert len(reader.pending("bob")) == 3
    reader.ack("bob", [a.id, c.id, "unknown-id"])
    assert [e.id for e in reader.pending("bob")] == [b.id]
    reader.ack("bob", [a.id])
    reader.ack("bob", [])
    assert reader.unread("bob") == 1 and sender.unread("bob") == 1
    assert all(reader.holds("bob", e.id) for e in (a, b, c))  # acked is still held
    assert not reader.holds("bob", "never-sent")
    reader.ack("bob", [b.id])
    assert reader.pending("bob") == [] and reader.has_unread("bob") is False


def test_a_new_reader_gets_exactly_what_was_not_acked(
    pair: tuple[Any, Any], make: BoxFactory
) -> None:
    sender, reader = pair
    sent = [_send(sender, "carol", str(i)) for i in range(5)]
    assert len(reader.pending("carol")) == 5
    reader.ack("carol", [sent[0].id, sent[3].id])
    getattr(reader, "close", lambda: None)()  # a reader that stops (a CLI command) lets go
    later = make("l")
    assert [e.id for e in later.pending("carol")] == [sent[i].id for i in (1, 2, 4)]


def test_unknown_recipient_refused_without_creating_an_inbox(pair: tuple[Any, Any]) -> None:
    sender, reader = pair
    with pytest.raises(UnknownRecipient, match="bob, carol, lead"):
        sender.deliver("lead", MessageDraft.text("nobody", "hi"))
    assert "nobody" not in reader.agents()
    with pytest.raises(UnknownRecipient):
        reader.pending("nobody")
    with pytest.raises(UnknownRecipient):
        reader.unread("nobody")
    with pytest.raises(UnknownRecipient):
        reader.ack("nobody", ["x"])
    assert reader.has_unread("nobody") is False


def test_broadcast_one_copy_per_agent_but_sender(pair: tuple[Any, Any]) -> None:
    sender, reader = pair
    reader.ensure_inbox("dave")
    copies = sender.deliver("bob", MessageDraft.text("*", "all hands", type="broadcast"))
    assert sorted(e.to for e in copies) == ["carol", "dave", "lead"]
    assert len({e.id for e in copies}) == 3
    for envelope in copies:
        (got,) = reader.pending(envelope.to)
        assert got == envelope and got.type == "broadcast" and got.sender == "bob"
    assert reader.pending("bob") == []


def test_sender_is_set_by_transport(pair: tuple[Any, Any]) -> None:
    sender, reader = pair
    draft = MessageDraft(to="bob", body={"text": "hi", "from": "lead", "sender": "lead"})
    (envelope,) = sender.deliver("mallory", draft)
    (got,) = reader.pending("bob")
    assert got.sender == envelope.sender == "mallory"
    assert got.body["from"] == "lead"  # text in the body is just text


def test_oversize_message_refused(pair: tuple[Any, Any], make: BoxFactory) -> None:
    _, reader = pair
    small = make("x", max_message_bytes=500)
    with pytest.raises(BadMessage, match="exceeds"):
        small.deliver("lead", MessageDraft.text("bob", "x" * 1000))
    assert reader.unread("bob") == 0


def test_keyed_delivery_lands_once_acked_or_not(pair: tuple[Any, Any]) -> None:
    sender, reader = pair
    draft = MessageDraft.text("bob", "cron fired")
    assert sender.deliver_keyed("lead", draft, "fire-1") is True
    assert sender.deliver_keyed("lead", draft, "fire-1") is False  # once per id
    assert reader.deliver_keyed("lead", draft, "fire-1") is False  # whoever asks
    [env] = reader.pending("bob")
    assert (env.id, reader.unread("bob"), reader.holds("bob", "fire-1")) == ("fire-1", 1, True)
    reader.ack("bob", ["fire-1"])
    assert sender.deliver_keyed("lead", draft, "fire-1") is False  # acked still counts
    assert (reader.unread("bob"), reader.holds("bob", "fire-1")) == (0, True)
    assert sender.deliver_keyed("lead", draft, "fire-2") is True
    with pytest.raises(UnknownRecipient):
        sender.deliver_keyed("lead", MessageDraft.text("nobody", "x"), "fire-3")


def test_concurrent_senders_lose_nothing_and_keep_their_order(
    pair: tuple[Any, Any], make: BoxFactory
) -> None:
    _, reader = pair
    senders = [make(f"p{n}") for n in range(4)]
    errors: list[BaseException] = []

    def send_all(box: Any, n: int) -> None:
        try:
            for i in range(15):
                _send(box, "bob", f"{n}:{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=send_all, args=(b, n)) for n, b in enumerate(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    got = [e.text for e in reader.pending("bob", max_messages=1000)]
    assert sorted(got) == sorted(f"{n}:{i}" for n in range(4) for i in range(15))
    for n in range(4):  # each sender's messages in the order it sent them
        mine = [int(t.split(":")[1]) for t in got if t.startswith(f"{n}:")]
        assert mine == list(range(15))
