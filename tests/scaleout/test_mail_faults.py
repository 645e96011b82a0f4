"""Message delivery while the mail stream's leader is SIGKILLed, on a 3-node loopback cluster
(mailboxes/nats_mailbox.py ``NatsMailbox``, stream with 3 replicas): a sender process delivers
messages one by one (each under its own id, re-sent after an unclear outcome, which the id makes
harmless) while this process reads and acks them. Every delivery the sender saw acknowledged is
read, none twice, and nothing is left unread once the killed node is back."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.nats_server import NatsCluster

pytest.importorskip("mailboxes.nats_mailbox")

TEAM = "alpha"
MESSAGES = 120

SENDER = r"""
import json, sys
from mailboxes.errors import MailboxesError
from mailboxes.messages import MessageDraft
from mailboxes.nats_mailbox import NatsMailbox
servers, team, count = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
box = NatsMailbox(servers, team, replicas=3)
print("ready", flush=True)
sys.stdin.readline()
acked = []
for n in range(count):
    mid = f"m{n:05d}"
    while True:
        try:
            box.deliver_keyed("ann", MessageDraft.text("lead", f"job {n}"), mid)
            break
        except MailboxesError:
            continue  # unclear (an election): the same id again, stored once
    acked.append(mid)
box.close()
print(json.dumps(acked))
"""


def test_killing_the_mail_stream_leader_loses_no_acknowledged_message(
    cluster: NatsCluster,
) -> None:
    import json

    from mailboxes.errors import MailboxesError
    from mailboxes.nats_mailbox import NatsMailbox

    box = NatsMailbox(cluster.urls, TEAM, replicas=3)
    try:
        box.ensure_inbox("lead")
        box.ensure_inbox("ann")
        assert cluster.stream_info(box.stream)["config"]["num_replicas"] == 3
        proc = subprocess.Popen(
            [sys.executable, "-c", SENDER, ",".join(cluster.urls), TEAM, str(MESSAGES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        received: list[str] = []
        try:
            assert proc.stdout is not None and proc.stdin is not None
            assert proc.stdout.readline().strip() == "ready"
            proc.stdin.write("go\n")
            proc.stdin.flush()
            leader = None
            deadline = time.monotonic() + 180
            while proc.poll() is None or len(received) < MESSAGES:
                assert time.monotonic() < deadline, f"read {len(received)} of {MESSAGES}"
                if leader is None and len(received) >= MESSAGES // 4:
                    leader = cluster.stream_leader(box.stream)
                    leader.kill()  # mid-delivery
                try:
                    batch = box.pending("lead", max_messages=20)
                    box.ack("lead", [m.id for m in batch])
                except MailboxesError:
                    continue  # the election: read again
                # No early exit on an empty batch once the sender is done: under load the
                # inbox's consumer may still be electing its leader then (every message the
                # sender sent is read, or the deadline fails the test).
                received += [m.id for m in batch]
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        acked = json.loads(out.strip().splitlines()[-1])
        assert leader is not None, "the leader was killed while messages flowed"
        leader.start()
        cluster.wait_ready()
        assert sorted(set(received)) == sorted(received), "no message read twice"
        assert set(acked) <= set(received), sorted(set(acked) - set(received))[:10]
        assert len(acked) == MESSAGES
        assert box.unread("lead") == 0
    finally:
        box.close()
