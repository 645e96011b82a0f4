"""A stock of items with quantities."""


class OutOfStock(Exception):
    """Taking more than there is."""


class Stock:
    """Quantities per item name."""

    def __init__(self) -> None:
        self._items: dict[str, int] = {}

    def add(self, name: str, quantity: int) -> None:
        """Put ``quantity`` more of ``name`` in stock."""
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self._items[name] = self._items.get(name, 0) + quantity

    def take(self, name: str, quantity: int) -> None:
        """Remove ``quantity`` of ``name``; ``OutOfStock`` if there is not enough."""
        have = self._items.get(name, 0)
        if quantity > have:
            raise OutOfStock(f"{name}: {have} left, {quantity} wanted")
        self._items[name] = have - quantity

    def count(self, name: str) -> int:
        """How many of ``name`` are in stock."""
        return self._items.get(name, 0)
