"""The durable layer: the journal, the Maildir inboxes, member liveness, file primitives.

- ``journal``: the event stores: ``FileJournal`` (``.team/journal.jsonl``) and the in-memory one.
- ``events``: ``Event``, ``EventDraft`` and every journal event's payload.
- ``messages``: ``Envelope``, ``MessageDraft``: mailbox messages.
- ``maildir``: ``Maildir``: one durable inbox per agent.
- ``liveness``: ``FlockLiveness``: a member is alive while its lease file is locked.
- ``watch``: ``FileWatcher``: wake-up hints from file changes.
- ``ports``: ``EventStore``, ``Mailbox``, ``Liveness``, ``Watcher``, ``Clock``, ``IdSource``.
- ``fsutil``: ``atomic_write``, ``fsync_dir``, strict JSON.
- ``errors``: ``MailboxesError`` and its family.

``mailboxes`` never imports ``harness`` or ``actors``. Like every ``__init__`` of the project,
this file imports nothing: import the modules themselves.
"""

__all__ = [
    "errors",
    "events",
    "fsutil",
    "journal",
    "liveness",
    "maildir",
    "messages",
    "ports",
    "watch",
]
