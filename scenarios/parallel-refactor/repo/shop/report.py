"""Daily sales report."""

from shop.pricing import Line, calc_total


def daily_report(orders: list[list[Line]]) -> str:
    """One line: the number of orders and their net total."""
    total = sum(calc_total(lines) for lines in orders)
    return f"{len(orders)} orders, {total:.2f} net"
