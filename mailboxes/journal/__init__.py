"""mailboxes.journal.store."""
