"""Event stores: the ``mailboxes.ports.EventStore`` port and its implementations.

- ``store``: ``FileJournal``: ``.team/journal.jsonl``, the team's source of truth.
- ``memory``: ``MemoryEventStore``: the in-memory reference implementation.
- ``nats``: ``NatsEventStore``: a team's journal on a NATS JetStream stream (optional extra).
- ``frame``: the journal's line format; ``check_journal``: a read-only checker.
- ``base``: what every store shares: ``stamp`` (drafts into events, ``op_id`` idempotency).
"""

__all__ = ["base", "frame", "memory", "store"]
