"""teamctl mailboxes package."""
