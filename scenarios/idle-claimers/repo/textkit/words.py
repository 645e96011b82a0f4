"""Splitting text into words."""

import re

_WORD = re.compile(r"[A-Za-z0-9']+")


def words(text: str) -> list[str]:
    """The words of ``text`` in order: letters, digits and apostrophes."""
    return _WORD.findall(text)
