"""The error family of the durable layer: one base, caught once at the edge."""

from __future__ import annotations


class MailboxesError(Exception):
    """Base of every error raised by ``mailboxes``."""


class JournalCorrupt(MailboxesError):
    """A bad line that is not the last one: never skipped silently."""

    def __init__(self, path: str, line_no: int, reason: str) -> None:
        super().__init__(
            f"journal {path} is corrupt at line {line_no}: {reason}; nothing was changed "
            "(`teamctl journal salvage` keeps the events before it)"
        )
        self.path = path
        self.line_no = line_no
        self.reason = reason


class InvalidEvent(MailboxesError):
    """An event line or draft that does not match its schema."""


class UnknownRecipient(MailboxesError):
    """A message addressed to an agent that has no inbox."""

    def __init__(self, recipient: str, known: list[str]) -> None:
        names = ", ".join(known) or "none"
        super().__init__(f"unknown recipient {recipient!r} (known agents: {names})")
        self.recipient = recipient


class BadMessage(MailboxesError):
    """A mailbox file that does not parse as an envelope."""


class LeaseHeld(MailboxesError):
    """Another live process holds the agent's liveness lease."""

    def __init__(self, agent: str) -> None:
        super().__init__(f"agent {agent!r} is already hosted by a live process")
        self.agent = agent


class UnsafeFilesystem(MailboxesError):
    """The team folder is on a filesystem where flock and rename are not safe."""


class WriteFailed(MailboxesError, OSError):
    """A durable write failed (disk full, file size limit, I/O error) and was rolled back:
    nothing of it was acknowledged. Still an ``OSError``, carrying the original ``errno``."""

    def __init__(self, what: str, cause: OSError) -> None:
        reason = cause.strerror or str(cause)
        super().__init__(f"{what} failed: {reason}; nothing was written (rolled back)")
        self.errno = cause.errno  # not ``strerror``: OSError would then print only that


class LivenessUnavailable(MailboxesError):
    """The lease store cannot be reached: nobody can be judged dead (or alive) until it is."""


class MailboxUnavailable(MailboxesError):
    """The mailbox store (JetStream) cannot be reached: nothing was delivered, read or acked
    by the call that raised it (a delivery may still land; its id makes a retry land once)."""
