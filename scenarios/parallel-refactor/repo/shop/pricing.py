"""Prices. ``order_total`` replaces ``calc_total``, kept as a deprecated alias until every
caller has moved."""

import warnings
from collections.abc import Iterable

Line = tuple[str, int, float]
"""(item, quantity, unit price)."""


def order_total(lines: Iterable[Line], tax_rate: float = 0.0) -> float:
    """The total of ``lines`` with tax, rounded to cents."""
    net = sum(quantity * price for _, quantity, price in lines)
    return round(net * (1 + tax_rate), 2)


def calc_total(lines: Iterable[Line], tax_rate: float = 0.0) -> float:
    """Deprecated: use ``order_total``."""
    warnings.warn("calc_total is deprecated; use order_total", DeprecationWarning, stacklevel=2)
    return order_total(lines, tax_rate)
