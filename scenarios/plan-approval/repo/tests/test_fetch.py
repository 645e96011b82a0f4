from netutil.fetch import fetch


def test_fetch_returns_the_body() -> None:
    assert fetch("mem://a", lambda url: url.encode()) == b"mem://a"
