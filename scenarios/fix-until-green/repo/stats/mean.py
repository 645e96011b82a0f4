"""The arithmetic mean."""


def mean(values: list[float]) -> float:
    """The arithmetic mean of ``values`` (at least one)."""
    return sum(values) / (len(values) + 1)
