"""Small text helpers."""

from textkit.words import words

__all__ = ["words"]
