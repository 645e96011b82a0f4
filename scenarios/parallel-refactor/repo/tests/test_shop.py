import warnings

from shop.cart import Cart
from shop.invoice import invoice_total
from shop.report import daily_report


def test_cart_invoice_and_report() -> None:
    cart = Cart()
    cart.add("pen", 2, 1.5)
    cart.add("pad", 1, 4.0)
    assert cart.total() == 7.0
    assert invoice_total(cart.lines) == 8.4
    assert daily_report([cart.lines, [("ink", 1, 3.0)]]) == "2 orders, 10.00 net"


def test_no_caller_uses_the_deprecated_name() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        test_cart_invoice_and_report()
