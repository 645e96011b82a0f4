"""Network helpers."""
