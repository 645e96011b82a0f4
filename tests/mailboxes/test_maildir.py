"""mailboxes/maildir.py: durable Maildir inboxes, with real files and real processes."""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailboxes.errors import BadMessage, UnknownRecipient
from mailboxes.maildir import Maildir, UniqueNames
from mailboxes.messages import (
    Envelope,
    InvalidAgentName,
    MessageDraft,
    dump_envelope,
    parse_envelope,
)
from mailboxes.ports import Mailbox
from tests.support.fakes import FakeClock


class CountingIds:
    def __init__(self, prefix: str = "m") -> None:
        self._prefix = prefix
        self._n = itertools.count(1)

    def new_id(self) -> str:
        return f"{self._prefix}{next(self._n):04d}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def box(tmp_path: Path, clock: FakeClock) -> Maildir:
    maildir = Maildir(tmp_path / "mailboxes", clock, CountingIds())
    for agent in ("lead", "bob", "carol"):
        maildir.ensure_inbox(agent)
    return maildir


def _send(box: Maildir, to: str, text: str, sender: str = "lead") -> Envelope:
    (envelope,) = box.deliver(sender, MessageDraft.text(to, text))
    return envelope


def _files(box: Maildir, agent: str, sub: str) -> list[str]:
    return sorted(os.listdir(box.root / agent / sub))


def test_is_a_mailbox(box: Maildir) -> None:
    assert isinstance(box, Mailbox)


def test_inboxes_and_agents(box: Maildir, tmp_path: Path) -> None:
    box.ensure_inbox("bob")  # idempotent
    (box.root / "not-an-inbox").mkdir()
    (box.root / ".hidden").mkdir()
    assert box.agents() == ["bob", "carol", "lead"]
    assert Maildir(tmp_path / "nowhere").agents() == []
    assert box.agent_for_path(box.root / "bob" / "new" / "x") == "bob"
    assert box.agent_for_path(tmp_path / "elsewhere") is None
    relative = Maildir(Path(os.path.relpath(box.root)))
    assert relative.agent_for_path(box.root.resolve() / "carol" / "cur") == "carol"


@pytest.mark.parametrize("name", ["../evil", ".x", "a/b", "", "*"])
def test_bad_agent_names_refused(box: Maildir, name: str) -> None:
    with pytest.raises(InvalidAgentName):
        box.ensure_inbox(name)
    with pytest.raises(InvalidAgentName):
        box.pending(name)
    with pytest.raises(InvalidAgentName):
        box.deliver(name, MessageDraft.text("bob", "hi"))


def test_names_are_checked_on_every_delivery_even_after_good_ones(box: Maildir) -> None:
    """A Maildir remembers the names it has checked (and their folders): only good ones."""
    for _ in range(2):
        _send(box, "bob", "hi", sender="lead")
        for bad in ("../evil", ".x"):
            with pytest.raises(InvalidAgentName):
                box.deliver(bad, MessageDraft.text("bob", "hi"))
            with pytest.raises(InvalidAgentName):
                box.deliver_keyed(bad, MessageDraft.text("bob", "hi"), "k1")
            with pytest.raises(InvalidAgentName):
                box.deliver_many(
                    bad, [MessageDraft.text("bob", "1"), MessageDraft.text("bob", "2")]
                )
    assert box.counts("bob") == (2, 0)
    assert not (box.root.parent / "evil").exists()


def test_delivery_order_and_envelope(box: Maildir, clock: FakeClock) -> None:
    sent = []
    for i in range(5):
        sent.append(_send(box, "bob", f"msg {i}"))
        if i % 2:
            clock.t += 0.5  # some share a timestamp: the sender seq still orders them
    got = box.pending("bob")
    assert [e.id for e in got] == [e.id for e in sent]
    assert [e.text for e in got] == [f"msg {i}" for i in range(5)]
    assert got[0].sender == "lead" and got[0].to == "bob" and got[0].ts == 1_000_000.0
    assert box.pending("bob") == got  # reading does not consume
    assert box.counts("bob") == (5, 0)
    assert _files(box, "bob", "tmp") == []


def test_names_sort_by_time_not_by_sender_seq(box: Maildir, clock: FakeClock) -> None:
    other = Maildir(box.root, clock, CountingIds("o"))  # another sender, its own seq from 1
    clock.t = 10.0
    first = _send(box, "bob", "first")  # seq 1
    _send(box, "carol", "x")  # seq 2
    clock.t = 20.0
    second = _send(other, "bob", "second")  # seq 1 again, later time
    assert [e.id for e in box.pending("bob")] == [first.id, second.id]


def test_batches_bounded_by_count_and_bytes(box: Maildir) -> None:
    sent = [_send(box, "bob", "x" * 100) for _ in range(10)]
    assert [e.id for e in box.pending("bob", max_messages=3)] == [e.id for e in sent[:3]]
    size = len(dump_envelope(sent[0]))
    batch = box.pending("bob", max_bytes=size * 4 + 1)
    assert [e.id for e in batch] == [e.id for e in sent[:4]]
    # A message larger than max_bytes still comes, alone, so it cannot block the inbox.
    assert len(box.pending("bob", max_bytes=1)) == 1


def test_ack_moves_to_cur_idempotently(box: Maildir) -> None:
    a, b, c = (_send(box, "bob", t) for t in "abc")
    box.ack("bob", [a.id, c.id, "unknown-id"])
    assert [e.id for e in box.pending("bob")] == [b.id]
    assert box.counts("bob") == (1, 2)
    box.ack("bob", [a.id])
    box.ack("bob", [])
    assert box.counts("bob") == (1, 2)
    for name in _files(box, "bob", "cur"):
        assert parse_envelope((box.root / "bob" / "cur" / name).read_bytes()).id in {a.id, c.id}


def _duplicate(box: Maildir, agent: str, envelope: Envelope, prefix: str) -> None:
    """A second file for the same message (as a redelivery would leave)."""
    name = f"{prefix}.0000000001.{envelope.id}"
    (box.root / agent / "new" / name).write_bytes(dump_envelope(envelope))


def test_duplicates_dropped_by_id(box: Maildir) -> None:
    a = _send(box, "bob", "a")
    b = _send(box, "bob", "b")
    _duplicate(box, "bob", a, "9" * 20)  # sorts last
    assert [e.id for e in box.pending("bob")] == [a.id, b.id]
    box.ack("bob", [a.id])  # the ack sweeps every copy
    assert [e.id for e in box.pending("bob")] == [b.id]
    assert box.counts("bob") == (1, 2)


def test_duplicate_of_acked_message_is_acked_away(box: Maildir) -> None:
    a = _send(box, "bob", "a")
    box.ack("bob", [a.id])
    _duplicate(box, "bob", a, "0" * 20)
    b = _send(box, "bob", "b")
    assert [e.id for e in box.pending("bob")] == [b.id]
    assert box.counts("bob") == (1, 2)
    assert all(n.endswith(a.id) for n in _files(box, "bob", "cur"))


def test_garbage_moves_to_bad_without_crash_or_loop(
    box: Maildir, caplog: pytest.LogCaptureFixture
) -> None:
    good = _send(box, "bob", "good")
    new = box.root / "bob" / "new"
    (new / f"{'0' * 20}.1.junk1").write_bytes(b"\x00not json")
    (new / "no-name-pattern").write_bytes(dump_envelope(good))
    wrong_to = good.model_copy(update={"id": "other", "to": "carol"})
    (new / f"{'0' * 20}.1.other").write_bytes(dump_envelope(wrong_to))
    mismatch = good.model_copy(update={"id": "inside"})
    (new / f"{'0' * 20}.1.outside").write_bytes(dump_envelope(mismatch))
    (new / f"{'0' * 20}.1.link").symlink_to(new.parent / "cur")
    (new / f"{'0' * 20}.1.dir").mkdir()
    (new / f"{'0' * 20}.1.big").write_bytes(b"x" * (box.max_message_bytes + 1))
    with caplog.at_level(logging.WARNING, logger="mailboxes.maildir"):
        assert [e.id for e in box.pending("bob")] == [good.id]
    assert len(_files(box, "bob", "bad")) == 7
    assert len([r for r in caplog.records if "bad message" in r.getMessage()]) == 7
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mailboxes.maildir"):
        assert [e.id for e in box.pending("bob")] == [good.id]
    assert caplog.records == []
    assert _files(box, "bob", "new") == [n for n in _files(box, "bob", "new") if good.id in n]


def test_unknown_recipient_refused_without_creating_inbox(box: Maildir) -> None:
    with pytest.raises(UnknownRecipient, match="bob, carol, lead"):
        box.deliver("lead", MessageDraft.text("nobody", "hi"))
    assert not (box.root / "nobody").exists()
    with pytest.raises(UnknownRecipient):
        box.pending("nobody")
    # One unknown recipient refuses the whole batch.
    drafts = [MessageDraft.text("bob", "1"), MessageDraft.text("ghost", "2")]
    with pytest.raises(UnknownRecipient):
        box.deliver_many("lead", drafts)
    assert box.counts("bob") == (0, 0)


def test_a_half_made_inbox_is_refused_and_left_clean(box: Maildir) -> None:
    """One recipient is not stat'ed up front: a missing ``tmp/`` or ``new/`` still refuses the
    delivery as an unknown recipient, and leaves no file behind."""
    (box.root / "half" / "tmp").mkdir(parents=True)  # an inbox whose creation was cut short
    with pytest.raises(UnknownRecipient, match="bob, carol, lead"):
        box.deliver("lead", MessageDraft.text("half", "hi"))
    assert list((box.root / "half").rglob("*")) == [box.root / "half" / "tmp"]
    (box.root / "half" / "new").mkdir()  # now ``new/`` without ``tmp/``
    (box.root / "half" / "tmp").rmdir()
    with pytest.raises(UnknownRecipient):
        box.deliver("lead", MessageDraft.text("half", "hi"))
    assert list((box.root / "half" / "new").iterdir()) == []


def test_an_inbox_removed_and_made_again_gets_the_next_delivery(box: Maildir) -> None:
    """Folders are opened by path on every delivery, never kept open: a descriptor kept from
    before would link into (and fsync) the removed inbox, and the message would be lost."""
    _send(box, "bob", "before")
    shutil.rmtree(box.root / "bob")
    box.ensure_inbox("bob")
    after = _send(box, "bob", "after")
    assert [e.id for e in box.pending("bob")] == [after.id]
    assert _files(box, "bob", "tmp") == []


def test_a_short_write_is_completed(box: Maildir, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.write`` may write less than asked (a signal): the delivery writes the rest."""
    real_write = os.write

    def short_write(fd: int, data: bytes) -> int:
        return real_write(fd, bytes(data[:10]))

    monkeypatch.setattr(os, "write", short_write)
    sent = _send(box, "bob", "a message much longer than ten bytes")
    monkeypatch.undo()
    assert box.pending("bob") == [sent]


def test_one_clock_reading_stamps_both_the_envelope_and_its_name(
    box: Maildir, clock: FakeClock
) -> None:
    clock.t = 1234.5678
    sent = _send(box, "bob", "hi")
    [name] = _files(box, "bob", "new")
    assert sent.ts == 1234.5678 and type(sent.ts) is float
    assert int(name.split(".")[0]) == round(1234.5678 * 1e9)
    later = _send(box, "bob", "same reading")  # the clock has not moved: ns still grows
    assert later.ts == 1234.5678
    assert [int(n.split(".")[0]) for n in _files(box, "bob", "new")] == [
        round(1234.5678 * 1e9),
        round(1234.5678 * 1e9) + 1,
    ]


def test_the_system_clock_stamps_integer_nanoseconds(tmp_path: Path) -> None:
    box = Maildir(tmp_path)
    box.ensure_inbox("bob")
    before = time.time_ns()
    (sent,) = box.deliver("lead", MessageDraft.text("bob", "hi"))
    after = time.time_ns()
    [name] = os.listdir(tmp_path / "bob" / "new")
    ns = int(name.split(".")[0])
    assert before <= ns <= after and abs(sent.ts - ns / 1e9) < 1e-6


@pytest.mark.parametrize("bad", ["a.b", "a/b", ""])
def test_a_keyed_delivery_under_a_bad_id_writes_nothing(box: Maildir, bad: str) -> None:
    with pytest.raises(ValueError, match="invalid message id"):
        box.deliver_keyed("lead", MessageDraft.text("bob", "hi"), bad)
    assert box.counts("bob") == (0, 0) and _files(box, "bob", "tmp") == []


def test_names_keep_send_order_when_the_counter_gains_a_digit(
    tmp_path: Path, clock: FakeClock
) -> None:
    """Two Maildirs of one process at one clock reading (a fixed clock): names tie on time and
    sort by the shared per-process counter, also across 9 -> 10."""
    names = UniqueNames(host="h")
    a = Maildir(tmp_path / "m", clock, CountingIds("a"), names=names)
    b = Maildir(tmp_path / "m", clock, CountingIds("b"), names=names)
    a.ensure_inbox("bob")
    sent = [_send(a if i % 2 else b, "bob", str(i)) for i in range(14)]
    assert [e.id for e in a.pending("bob")] == [e.id for e in sent]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_names_its_deliveries_with_its_own_pid(box: Maildir) -> None:
    """The pid in a name is kept, not asked for per delivery: a fork must still change it."""
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            box.deliver("lead", MessageDraft.text("bob", "from the child"))
        finally:
            os._exit(0)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    _send(box, "carol", "from the parent")
    [in_bob] = _files(box, "bob", "new")
    [in_carol] = _files(box, "carol", "new")
    assert in_bob.split(".")[1].startswith(f"{child}-")
    assert in_carol.split(".")[1].startswith(f"{os.getpid()}-")


def test_broadcast_one_copy_per_agent_but_sender(box: Maildir) -> None:
    box.ensure_inbox("dave")
    copies = box.deliver("bob", MessageDraft.text("*", "all hands", type="broadcast"))
    assert sorted(e.to for e in copies) == ["carol", "dave", "lead"]
    assert len({e.id for e in copies}) == 3
    for envelope in copies:
        (got,) = box.pending(envelope.to)
        assert got == envelope and got.type == "broadcast" and got.sender == "bob"
    assert box.pending("bob") == []


def test_sender_is_set_by_transport(box: Maildir) -> None:
    draft = MessageDraft(to="bob", body={"text": "hi", "from": "lead", "sender": "lead"})
    (envelope,) = box.deliver("mallory", draft)
    (got,) = box.pending("bob")
    assert got.sender == envelope.sender == "mallory"
    assert got.body["from"] == "lead"  # text in the body is just text


def test_oversize_message_refused(box: Maildir) -> None:
    small = Maildir(box.root, max_message_bytes=500)
    with pytest.raises(BadMessage, match="exceeds"):
        small.deliver("lead", MessageDraft.text("bob", "x" * 1000))
    assert box.counts("bob") == (0, 0)
    assert _files(box, "bob", "tmp") == []


def test_prune_only_touches_cur(box: Maildir, clock: FakeClock) -> None:
    old = [_send(box, "bob", f"old {i}") for i in range(3)]
    clock.t += 3600
    recent = [_send(box, "bob", f"new {i}") for i in range(3)]
    box.ack("bob", [e.id for e in old + recent[:2]])
    unacked_old = _send(box, "carol", "x")
    assert box.prune("bob", max_age_s=1800) == 3
    assert box.counts("bob") == (1, 2)
    assert box.prune("bob", max_count=1) == 1
    assert [n.rsplit(".", 1)[1] for n in _files(box, "bob", "cur")] == [recent[1].id]
    clock.t += 10**6
    assert box.prune("carol", max_age_s=1, max_count=0) == 0  # nothing is pruned from new
    assert [e.id for e in box.pending("carol")] == [unacked_old.id]


def test_recover_removes_only_old_orphans(tmp_path: Path) -> None:
    box = Maildir(tmp_path / "mb")
    box.ensure_inbox("bob")
    orphan = box.root / "bob" / "tmp" / "123.1.abc"
    orphan.write_bytes(b"{partial")
    assert box.recover() == 0  # young: may belong to a live sender
    os.utime(orphan, (1, 1))
    assert box.recover() == 1
    assert not orphan.exists()


# -- real processes ----------------------------------------------------------------------------

SENDER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from mailboxes.maildir import Maildir
    from mailboxes.messages import MessageDraft

    root, sender, count, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    state = {"armed": False}

    def step(name):
        if state["armed"] and name == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    box = Maildir(Path(root), on_step=step)
    for i in range(count):
        state["armed"] = kill_at != "none" and i == count - 1
        (env,) = box.deliver(sender, MessageDraft.text("bob", f"{sender} {i}"))
        print(env.id, flush=True)  # acknowledged: deliver returned
    """
)


def _run_sender(
    root: Path, sender: str, count: int, kill_at: str = "none"
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SENDER, str(root), sender, str(count), kill_at],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_concurrent_sender_processes_lose_nothing(tmp_path: Path) -> None:
    box = Maildir(tmp_path / "mb")
    box.ensure_inbox("bob")
    procs = [_run_sender(box.root, f"s{i}", 150) for i in range(4)]
    acked: list[str] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        acked += out.split()
    assert len(acked) == 600
    got = box.pending("bob", max_messages=10_000, max_bytes=10**9)
    assert sorted(e.id for e in got) == sorted(acked)
    # Per sender, delivery order is preserved.
    for i in range(4):
        texts = [e.text for e in got if e.sender == f"s{i}"]
        assert texts == [f"s{i} {n}" for n in range(150)]


@pytest.mark.parametrize("kill_at", ["tmp_written", "tmp_synced", "renamed", "dir_synced"])
def test_sigkill_mid_delivery_loses_nothing_acknowledged(tmp_path: Path, kill_at: str) -> None:
    box = Maildir(tmp_path / "mb")
    box.ensure_inbox("bob")
    proc = _run_sender(box.root, "lead", 4, kill_at)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    acked = out.split()
    assert len(acked) == 3  # the fourth delivery never returned
    new_names = _files(box, "bob", "new")
    got = box.pending("bob")
    assert _files(box, "bob", "bad") == []  # nothing partial is visible
    assert set(acked) <= {e.id for e in got}
    orphans = _files(box, "bob", "tmp")
    if kill_at in ("tmp_written", "tmp_synced"):
        assert len(new_names) == 3 and len(orphans) == 1
    else:  # visible once renamed; at-least-once allows the unacknowledged one to arrive
        assert len(new_names) == 4 and orphans == []
    assert box.recover(older_than_s=0) == len(orphans)
    assert _files(box, "bob", "tmp") == []
    assert len(box.pending("bob")) == len(new_names)


# -- model-based: any interleaving keeps order, dedupe and the one-place rule -------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.sampled_from(["bob", "carol", "*"]), st.floats(0, 2)),
        st.tuples(st.just("ack"), st.sampled_from(["bob", "carol"]), st.integers(0, 3)),
        st.tuples(st.just("dup"), st.sampled_from(["bob", "carol"]), st.integers(0, 5)),
    ),
    max_size=15,
)


@settings(max_examples=25, deadline=None)
@given(ops=OPS)
def test_any_interleaving_matches_a_simple_model(ops: list[tuple[str, str, float]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        box = Maildir(Path(tmp), clock, CountingIds())
        for agent in ("lead", "bob", "carol"):
            box.ensure_inbox(agent)
        unacked: dict[str, list[str]] = {"bob": [], "carol": []}
        acked: dict[str, set[str]] = {"bob": set(), "carol": set()}
        for op, agent, arg in ops:
            if op == "send":
                clock.t += arg
                for envelope in box.deliver("lead", MessageDraft.text(agent, "x")):
                    unacked[envelope.to].append(envelope.id)
            elif op == "ack":
                batch = box.pending(agent, max_messages=int(arg) + 1)
                box.ack(agent, [e.id for e in batch])
                acked[agent].update(e.id for e in batch)
                del unacked[agent][: len(batch)]
            else:
                names = sorted(os.listdir(box.root / agent / "cur"))
                names += sorted(os.listdir(box.root / agent / "new"))
                if names:  # a redelivered copy of some message, under a later name
                    source = names[int(arg) % len(names)]
                    folder = "cur" if source in os.listdir(box.root / agent / "cur") else "new"
                    raw = (box.root / agent / folder / source).read_bytes()
                    msg_id = source.rsplit(".", 1)[1]
                    (box.root / agent / "new" / f"{'9' * 20}.{arg}.{msg_id}").write_bytes(raw)
            for name in ("bob", "carol"):
                got = [e.id for e in box.pending(name, max_messages=1000)]
                assert got == unacked[name]
                in_new = {n.rsplit(".", 1)[1] for n in os.listdir(box.root / name / "new")}
                in_cur = {n.rsplit(".", 1)[1] for n in os.listdir(box.root / name / "cur")}
                assert in_cur == acked[name]
                # Only a copy of an unacked message may wait in new beside its original.
                assert in_new == set(unacked[name])


def test_unread_and_keyed_delivery_through_the_protocol(box: Maildir) -> None:
    mailbox: Mailbox = box
    assert (mailbox.unread("bob"), mailbox.has_unread("bob")) == (0, False)
    assert mailbox.has_unread("nobody") is False
    draft = MessageDraft.text("bob", "cron fired")
    assert mailbox.deliver_keyed("lead", draft, "fire-1") is True
    assert mailbox.deliver_keyed("lead", draft, "fire-1") is False  # once per id
    [env] = mailbox.pending("bob")
    assert (env.id, mailbox.unread("bob"), mailbox.has_unread("bob")) == ("fire-1", 1, True)
    mailbox.ack("bob", ["fire-1"])
    assert mailbox.deliver_keyed("lead", draft, "fire-1") is False  # acked still counts
    assert (mailbox.unread("bob"), mailbox.holds("bob", "fire-1")) == (0, True)
    with pytest.raises(UnknownRecipient):
        mailbox.unread("nobody")


def test_a_message_kept_unacked_is_parsed_once(
    box: Maildir, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mailboxes.messages

    parsed: list[bytes] = []
    real = mailboxes.messages.parse_envelope

    def counting(raw: bytes) -> Envelope:
        parsed.append(raw)
        return real(raw)

    monkeypatch.setattr(mailboxes.messages, "parse_envelope", counting)
    a, b = _send(box, "bob", "a"), _send(box, "bob", "b")
    for _ in range(3):  # a reader that keeps its mail unacked (a lead holding notices)
        assert box.pending("bob") == [a, b]
    assert len(parsed) == 2
    c = _send(box, "bob", "c")
    assert box.pending("bob") == [a, b, c] and len(parsed) == 3
    box.ack("bob", [a.id])
    assert box.pending("bob") == [b, c] and len(parsed) == 3


def test_a_file_replaced_under_its_name_is_read_again(box: Maildir) -> None:
    a = _send(box, "bob", "first")
    assert [e.text for e in box.pending("bob")] == ["first"]
    (path,) = (box.root / "bob" / "new").iterdir()
    changed = a.model_copy(update={"body": {**a.body, "text": "second, longer"}})
    tmp = path.with_name("swap")
    tmp.write_bytes(dump_envelope(changed))
    os.replace(tmp, path)  # another file under the same name
    assert [e.text for e in box.pending("bob")] == ["second, longer"]
    path.write_bytes(dump_envelope(a))  # rewritten in place, another size
    assert [e.text for e in box.pending("bob")] == ["first"]


def test_a_late_copy_of_a_message_read_and_acked_is_acked_away(box: Maildir) -> None:
    a, b = _send(box, "bob", "a"), _send(box, "bob", "b")
    assert box.pending("bob") == [a, b]  # both read (and kept as read)
    box.ack("bob", [a.id])
    _duplicate(box, "bob", a, "0" * 20)  # a redelivery of a, after its ack
    assert box.pending("bob") == [b]
    assert box.counts("bob") == (1, 2)
