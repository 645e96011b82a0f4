"""``MailArchive.history`` (mailboxes/ports.py) on the Maildir and on the JetStream mailbox (a
real ``nats-server`` from the wheel): every stored message of an agent, acked or not, oldest
first; what scenario facts read on either backend (actors/scenarios/facts.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from mailboxes.errors import UnknownRecipient
from mailboxes.maildir import Maildir
from mailboxes.messages import MessageDraft
from mailboxes.ports import MailArchive
from tests.support.nats_server import running_server


@pytest.fixture(params=["maildir", "nats"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    made: list[Any] = []
    with ExitStack() as stack:
        if request.param == "nats":
            from mailboxes.nats_mailbox import NatsMailbox

            server = stack.enter_context(contextmanager(running_server)(tmp_path / "nats"))

        def factory() -> Any:
            box: Any
            if request.param == "maildir":
                box = Maildir(tmp_path / "mailboxes")
            else:
                box = NatsMailbox(server.url, "history")
            made.append(box)
            return box

        yield factory
        for box in made:
            close = getattr(box, "close", None)
            if close is not None:
                close()


def test_history_holds_acked_and_unacked_messages_oldest_first(make: Callable[[], Any]) -> None:
    box = make()
    assert isinstance(box, MailArchive)
    box.ensure_inbox("ann")
    box.ensure_inbox("bob")
    assert box.history("ann") == []
    sent = [box.deliver("lead", MessageDraft.text("ann", f"m{i}"))[0] for i in range(3)]
    box.deliver("lead", MessageDraft.text("bob", "for bob"))
    [first] = box.pending("ann", max_messages=1)
    box.ack("ann", [first.id])
    other = make()  # another process reading the same backing
    assert [e.id for e in other.history("ann")] == [e.id for e in sent]
    assert [e.text for e in other.history("bob")] == ["for bob"]
    assert box.unread("ann") == 2  # reading history acks nothing


def test_history_without_an_inbox_is_unknown_recipient(make: Callable[[], Any]) -> None:
    box = make()
    box.ensure_inbox("ann")
    with pytest.raises(UnknownRecipient):
        box.history("nobody")
