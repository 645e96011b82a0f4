import pytest
from inventory.stock import OutOfStock, Stock


def test_add_then_take() -> None:
    stock = Stock()
    stock.add("bolt", 5)
    stock.take("bolt", 2)
    assert stock.count("bolt") == 3


def test_taking_too_much_is_refused() -> None:
    stock = Stock()
    stock.add("nut", 1)
    with pytest.raises(OutOfStock):
        stock.take("nut", 2)
    assert stock.count("nut") == 1
