"""A shopping cart."""

from shop.pricing import Line, calc_total


class Cart:
    """Lines added one by one."""

    def __init__(self) -> None:
        self.lines: list[Line] = []

    def add(self, item: str, quantity: int, price: float) -> None:
        self.lines.append((item, quantity, price))

    def total(self) -> float:
        return calc_total(self.lines)
