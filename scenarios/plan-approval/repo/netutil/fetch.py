"""Fetching through a transport that sometimes fails."""

from collections.abc import Callable

Transport = Callable[[str], bytes]


def fetch(url: str, transport: Transport) -> bytes:
    """The body at ``url``; a transport error propagates (no retry yet)."""
    return transport(url)
